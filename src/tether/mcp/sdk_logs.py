"""The MCP SDK's stdio reader, told in one line a minute per client.

For each line of a server's stdout that is not JSON-RPC, the SDK logs an ERROR with a
pydantic traceback quoting the line (11 log lines each): a server printing its
environment there put its secrets in Tether's log, and a chatty one flooded it. A filter
on that logger turns such records into one WARNING naming the client and how many lines
there were since the last such record, never their content, at most once a minute per
client.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar

#: The client whose connection the running task serves (the supervisor sets it; the
#: SDK's reader task inherits it).
CLIENT: ContextVar[str] = ContextVar("mcp_client", default="?")

_SDK_LOGGER = "mcp.client.stdio"
_PARSE_FAILURE = "Failed to parse JSONRPC message from server"
_EVERY_SECONDS = 60.0


class _UnparsedLines(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._told_at: dict[str, float] = {}
        self._untold: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _PARSE_FAILURE:
            return True
        client = CLIENT.get()
        self._untold[client] = self._untold.get(client, 0) + 1
        now = time.monotonic()
        if now - self._told_at.get(client, -_EVERY_SECONDS) < _EVERY_SECONDS:
            return False
        self._told_at[client] = now
        record.msg = (
            "MCP client %s: %d line(s) its server wrote to stdout were not JSON-RPC, "
            "since this was last told (the lines are not logged; told at most once a "
            "minute)"
        )
        record.args = (client, self._untold.pop(client))
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_FILTER = _UnparsedLines()


def install() -> None:
    """Put the filter on the SDK's stdio logger (once)."""
    logger = logging.getLogger(_SDK_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
