"""A stdio server's stderr, kept in a file for the operator with the client's secrets
masked.

The SDK hands the server a file to write its stderr to. A server may print its
environment there (API keys travel in ``env``), so it gets a pipe instead, and a thread
copies what comes through, line by line, into the file (0600) with every env and header
value of the client masked (``masked_text``). A line longer than ``_MAX_LINE`` bytes is
left out, as a line the copy would have to cut could halve a secret past the masking.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from tether.security.secret_text import masked_text

_MAX_LINE = 16_384
# How long closing waits for the copy to write what the ended server left in the pipe
# (a child of the server that keeps the pipe open is not waited for).
_DRAIN_SECONDS = 2.0


@asynccontextmanager
async def masked_errlog(path: Path, secrets: Sequence[str]) -> AsyncIterator[TextIO]:
    """A file object for the server's stderr; when the block ends, ``path`` holds what
    was written through it, masked (read it after the server has ended)."""
    file_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(file_fd, 0o600)  # a file an earlier version left readable by others
    read_fd, write_fd = os.pipe()
    copy = threading.Thread(
        target=_copy,
        args=(os.fdopen(read_fd, "rb"), os.fdopen(file_fd, "wb"), list(secrets)),
        name=f"mcp-stderr:{path.name}",
        daemon=True,
    )
    copy.start()
    writer = os.fdopen(write_fd, "w")
    try:
        yield writer
    finally:
        writer.close()  # the server's copy closed with it: the pipe ends
        await asyncio.to_thread(copy.join, _DRAIN_SECONDS)


def _copy(source: BinaryIO, target: BinaryIO, secrets: list[str]) -> None:
    with source, target:
        while line := source.readline(_MAX_LINE):
            if len(line) == _MAX_LINE and not line.endswith(b"\n"):
                while (rest := source.readline(_MAX_LINE)) and not rest.endswith(b"\n"):
                    pass
                line = f"[a line of more than {_MAX_LINE} bytes left out]\n".encode()
            text = masked_text(line.decode("utf-8", "replace"), secrets)
            target.write(text.encode())
            target.flush()
