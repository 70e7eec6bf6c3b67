"""The API token: from the environment, else generated once into TETHER_HOME."""

from __future__ import annotations

import secrets
from pathlib import Path

from tether.security.keybox import read_or_create_private


def resolve_token(configured: str | None, home: Path) -> str:
    """``configured`` if set, else the token file's (created with mode 0600 if absent)."""
    if configured:
        return configured
    return read_or_create_private(home / "token", secrets.token_urlsafe(32).encode()).decode()
