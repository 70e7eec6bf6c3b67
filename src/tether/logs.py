"""Logging set-up: one line per record, with CR and LF in values neutralised so a value
cannot forge a log line, and credentials masked as a last line of defence."""

from __future__ import annotations

import logging
import re
from typing import Any

# Loggers that follow --log-level: Tether's own (ids, sizes and states, never content)
# and the HTTP server's (start-up, shutdown, connection events). Every other library
# is held at WARNING whatever the level, because at debug level some of them write what
# logs must never hold: the database driver (aiosqlite) each SQL statement with its
# parameters, so chat text and tool output; the model client's HTTP stack (httpx,
# httpcore, and the httpx2/httpcore2 the openai SDK may bring) each request, headers
# included. Holding the root at WARNING covers libraries imported after this runs.
_OWN_LOGGERS = ("tether", "uvicorn")
_ACCESS_LOGGER = "uvicorn.access"

# "Bearer <token>", "api_key=<key>", "'api_key': '<key>'" and OpenAI-style "sk-..." keys.
_CREDENTIAL = re.compile(
    r"(?i)(bearer\s+|api[_-]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",;]+|\bsk-[A-Za-z0-9_\-]{8,}"
)


# Control characters as escapes: CR and LF would start a forged line, a NUL or an escape
# sequence would reach whatever reads the log (a terminal, a collector).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c != 0x09} | {
    0x0A: "\\n",
    0x0D: "\\r",
}
# A message longer than this (a model can name a tool with 100 kB) keeps its head and
# its tail (where a traceback logged as a message says what went wrong), saying so.
_MAX_MESSAGE = 8192


def neutralise(text: str) -> str:
    """``text`` on one line and bounded: control characters as escapes (``\\n``,
    ``\\x00``), and past ``_MAX_MESSAGE`` characters its middle cut out."""
    return _cut(text, _MAX_MESSAGE, " ").translate(_CONTROLS)


def _cut(text: str, limit: int, gap: str) -> str:
    """``text`` with its middle cut out past ``limit`` characters, saying how much."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}{gap}... ({len(text) - 2 * half} characters cut) ...{gap}{text[-half:]}"


def redact(text: str) -> str:
    """``text`` with anything shaped like a credential replaced by ``[redacted]``."""
    return _CREDENTIAL.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


class OneLineFormatter(logging.Formatter):
    """Formats the message flattened and redacted (before it is cut, so no half of a
    credential survives a cut); tracebacks stay multi-line, each of their lines marked
    with ``| ``, so an exception's message cannot pass for a record of its own."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        message = record.getMessage()
        safe = neutralise(redact(message))
        if message in text:
            return text.replace(message, safe, 1)
        return redact(text)

    def formatException(self, ei: Any) -> str:
        text = _cut(redact(super().formatException(ei)), 4 * _MAX_MESSAGE, "\n")
        return "\n".join(f"| {line}" for line in text.splitlines())


def configure(level: str) -> None:
    """Send every record to stderr through :class:`OneLineFormatter`.

    ``level`` applies to Tether's and the HTTP server's loggers; every other logger stays
    at WARNING or above (see ``_OWN_LOGGERS``).
    """
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    wanted = logging.getLevelName(level.upper())
    if not isinstance(wanted, int):
        raise ValueError(f"unknown log level {level!r}")
    # The filter holds even for a library that lowers its own level after this runs.
    handler.addFilter(_only_warnings_from_libraries)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(logging.WARNING, wanted))
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or _is_own(name):
            continue
        # A library may have set its own level (the openai SDK does with OPENAI_LOG) or
        # handler: neither may take its records around the formatter or below WARNING.
        logger.handlers.clear()
        logger.propagate = True
        if logger.level != logging.NOTSET:
            logger.setLevel(max(logging.WARNING, logger.level))
    for name in _OWN_LOGGERS:
        own = logging.getLogger(name)
        own.handlers.clear()
        own.propagate = True
        own.setLevel(wanted)
    # Access lines would carry query strings (the console login carries ?token=).
    logging.getLogger(_ACCESS_LOGGER).setLevel(logging.WARNING)


def _only_warnings_from_libraries(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or _is_own(record.name)


def _is_own(name: str) -> bool:
    return any(name == own or name.startswith(f"{own}.") for own in _OWN_LOGGERS)
