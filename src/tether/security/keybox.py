"""Encryption of secrets at rest (provider API keys, MCP secrets): with a key every
node shares (``TETHER_SECRET_KEY``), or else a key file in ``TETHER_HOME``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def shared_mode(directory: Path) -> int | None:
    """The directory's permission bits if other users may enter it, else None."""
    mode = stat.S_IMODE(directory.stat().st_mode)
    return mode if mode & 0o077 else None


def read_or_create_private(path: Path, make: bytes) -> bytes:
    """The file's bytes; if it does not exist, create it (mode 0600) holding ``make``."""
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    try:
        _write_private(path, make)
    except FileExistsError:  # another process created it first
        return path.read_bytes().strip()
    return make


class KeyBox:
    """Encrypts and decrypts short secrets with ``shared_key`` if given, else with a key
    kept in ``key_file`` (created on first use)."""

    def __init__(self, key_file: Path, shared_key: str | None = None) -> None:
        if shared_key is None:
            key = read_or_create_private(key_file, Fernet.generate_key())
        else:
            key = shared_key.strip().encode()
        try:
            self._fernet = Fernet(key)
        except ValueError:
            # The key itself is never echoed, only where it came from.
            where = "TETHER_SECRET_KEY" if shared_key is not None else str(key_file)
            raise ValueError(
                f"{where} is not a Fernet key (32 url-safe base64-encoded bytes); "
                "make one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`"
            ) from None

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise ValueError("a stored secret cannot be decrypted with this key") from exc
