"""A disk that fills up: a small tmpfs of its own (mounting one needs root), and a file
that takes every byte left on it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: For the modules whose tests all need a disk of their own.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@contextmanager
def small_disk(mount: Path, size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (``2m``) mounted on ``mount``, unmounted after."""
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file (more each call); returns it
    (delete it to give the room back)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    block = b"\0" * (1 << 16)
    try:
        while True:
            os.write(fd, block)
    except OSError:
        pass  # full
    finally:
        os.close(fd)
    return filler
