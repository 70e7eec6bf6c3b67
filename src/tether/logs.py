"""Logging set-up: one line per record, with CR and LF in values neutralised so a value
cannot forge a log line."""

from __future__ import annotations

import logging


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        head, sep, rest = text.partition("\n")
        # Tracebacks stay multi-line (they are ours); the message itself is flattened.
        message = record.getMessage()
        flat = message.replace("\r", "\\r").replace("\n", "\\n")
        return text.replace(message, flat, 1) if message in text else head + sep + rest


def configure(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLine("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
