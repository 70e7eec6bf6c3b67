"""Tether's own ids for tool calls.

A model chooses its call ids freely (``a/b``, ``..``, a reused one); those appear in
URLs, file names and the console, so every call gets an id of Tether's own from a fixed
alphabet, and the model's id is kept only for the messages sent back to it.
"""

from __future__ import annotations

import secrets


def new_call_id() -> str:
    """A fresh call id: ``call_`` and 24 hex digits (96 random bits)."""
    return f"call_{secrets.token_hex(12)}"
