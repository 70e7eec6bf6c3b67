"""Logging set-up: one line per record, with CR and LF in values neutralised so a value
cannot forge a log line, and credentials masked as a last line of defence."""

from __future__ import annotations

import logging
import re

# Libraries that log HTTP traffic at debug level: the model client's requests carry the
# provider key in a header, so these never go below WARNING, whatever the server's level.
_QUIET_LOGGERS = ("openai", "httpx", "httpcore")

# "Bearer <token>", "api_key=<key>", "'api_key': '<key>'" and OpenAI-style "sk-..." keys.
_CREDENTIAL = re.compile(
    r"(?i)(bearer\s+|api[_-]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",;]+|\bsk-[A-Za-z0-9_\-]{8,}"
)


def neutralise(text: str) -> str:
    """``text`` on one line: CR and LF shown as ``\\r`` and ``\\n``."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def redact(text: str) -> str:
    """``text`` with anything shaped like a credential replaced by ``[redacted]``."""
    return _CREDENTIAL.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


class OneLineFormatter(logging.Formatter):
    """Formats the message flattened and redacted; tracebacks (ours) stay multi-line."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        message = record.getMessage()
        safe = redact(neutralise(message))
        if message in text:
            return text.replace(message, safe, 1)
        return redact(text)


def configure(level: str) -> None:
    """Send every record to stderr through :class:`OneLineFormatter`."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.WARNING, root.level))
