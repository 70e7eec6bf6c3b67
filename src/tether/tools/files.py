"""File tools: read, write and edit text files in the workspace."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from tether.tools.base import RunContext, Tool, ToolInputError, ToolResult
from tether.tools.confinement import confine
from tether.tools.pinned import open_file

_MAX_READ_CHARS = 200_000
# UTF-8 takes at most 4 bytes a character: this many bytes hold every character shown.
_READ_BYTES = _MAX_READ_CHARS * 4
# An edit reads and rewrites the whole file in the server's memory.
_MAX_EDIT_BYTES = 16 * 1024 * 1024


def resolve_path(raw: object, ctx: RunContext) -> Path:
    """The real path a tool argument names, with symlinks resolved.

    Tether's own state is never reachable; anything outside the workspace needs a
    person's approval of the call (see :func:`tether.tools.confinement.confine`).
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ToolInputError("path must be a non-empty string")
    return confine(raw, ctx)


def _text_arg(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string")
    return value


def _read(path: Path, limit: int) -> tuple[bytes, int]:
    """At most ``limit`` bytes of the file, and its size."""
    with os.fdopen(open_file(path, os.O_RDONLY), "rb") as f:
        return _at_most(f, path, limit), os.fstat(f.fileno()).st_size


def _at_most(f: BinaryIO, path: Path, limit: int) -> bytes:
    try:
        data = f.read(limit)
    except BlockingIOError:
        data = None
    if data is None:  # nothing to read yet, on a descriptor that does not wait
        raise ToolInputError(f"{path} has nothing to read now (it would wait for data)")
    return data


async def _read_file(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
    path = await asyncio.to_thread(resolve_path, args.get("path"), ctx)
    # Never more than can be shown: a sparse file of 20 GB costs no disk to make.
    data, size = await asyncio.to_thread(_read, path, _READ_BYTES)
    text = data.decode("utf-8", errors="replace")
    ctx.emit("stdout", text[:_MAX_READ_CHARS])
    if size > len(data):
        return ToolResult(summary=f"file truncated at {_MAX_READ_CHARS} characters of {size} bytes")
    if len(text) > _MAX_READ_CHARS:
        return ToolResult(summary=f"file truncated at {_MAX_READ_CHARS} of {len(text)} chars")
    return ToolResult()


def _write(path: Path, content: str) -> None:
    with os.fdopen(open_file(path, os.O_WRONLY | os.O_CREAT, create_dirs=True), "wb") as f:
        f.truncate()
        f.write(content.encode("utf-8"))


async def _write_file(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
    path = await asyncio.to_thread(resolve_path, args.get("path"), ctx)
    content = _text_arg(args, "content")
    await asyncio.to_thread(_write, path, content)
    ctx.emit("stdout", f"wrote {len(content)} characters to {path}")
    return ToolResult()


def _edit(path: Path, old: str, new: str) -> None:
    with os.fdopen(open_file(path, os.O_RDWR), "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if size > _MAX_EDIT_BYTES:
            raise ToolInputError(
                f"{path} is {size} bytes, over the {_MAX_EDIT_BYTES} an edit reads; "
                "use the shell for it"
            )
        # Read no more than the bound, whatever the file grew to since it was measured.
        data = _at_most(f, path, _MAX_EDIT_BYTES + 1)
        if len(data) > _MAX_EDIT_BYTES:
            raise ToolInputError(f"{path} grew past {_MAX_EDIT_BYTES} bytes while being read")
        text = data.decode("utf-8", errors="replace")
        count = text.count(old)
        if count != 1:
            raise ToolInputError(
                f"old_text must occur exactly once in {path}; it occurs {count} times"
            )
        f.seek(0)
        f.truncate()
        f.write(text.replace(old, new, 1).encode("utf-8"))


async def _edit_file(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
    path = await asyncio.to_thread(resolve_path, args.get("path"), ctx)
    old = _text_arg(args, "old_text")
    if not old:
        raise ToolInputError("old_text must not be empty")
    await asyncio.to_thread(_edit, path, old, _text_arg(args, "new_text"))
    ctx.emit("stdout", f"edited {path}")
    return ToolResult()


def _schema(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": d} for name, d in props.items()},
        "required": list(props),
        "additionalProperties": False,
    }


_PATH = "Path relative to the workspace."

FILE_TOOLS = (
    Tool("read_file", "Read a UTF-8 text file.", _schema(path=_PATH), _read_file),
    Tool(
        "write_file",
        "Create or overwrite a UTF-8 text file.",
        _schema(path=_PATH, content="The whole new content."),
        _write_file,
    ),
    Tool(
        "edit_file",
        "Replace one exact occurrence of old_text with new_text in a file.",
        _schema(path=_PATH, old_text="Text to replace (must occur once).", new_text="Replacement."),
        _edit_file,
    ),
)
