"""The file tools on a real file system: what they open is what was checked (a link
swapped in after the check is refused), only regular files, and never more of a file
in memory than they can use."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tether.tools.base import ToolInputError
from tether.tools.confinement import confine
from tether.tools.files import FILE_TOOLS
from tether.tools.pinned import open_file
from tool_context import ToolContext

TOOLS = {tool.name: tool for tool in FILE_TOOLS}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    home = tmp_path / "home"
    workspace = tmp_path / "workspace"
    for directory in (home, workspace / "d"):
        directory.mkdir(parents=True)
    (home / "token").write_text("SECRET-TOKEN")
    return ToolContext(workspace, (home,))


def run(ctx: ToolContext, tool: str, **args: Any) -> Any:
    return asyncio.run(TOOLS[tool].run(args, ctx))  # type: ignore[arg-type]


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(ctx: ToolContext) -> None:
    (ctx.workspace / "d" / "token").write_text("harmless")
    checked = confine("d/token", ctx)  # type: ignore[arg-type]
    # What a background shell call can do between the check and the open.
    (ctx.workspace / "d").rename(ctx.workspace / "d-old")
    (ctx.workspace / "d").symlink_to(ctx.protected[0])
    with pytest.raises(ToolInputError, match="changed while it was being opened"):
        open_file(checked, os.O_RDONLY)
    with pytest.raises(ToolInputError, match="changed while it was being opened"):
        open_file(checked.with_name("planted"), os.O_WRONLY | os.O_CREAT, create_dirs=True)
    assert not (ctx.protected[0] / "planted").exists()


def test_a_final_component_swapped_for_a_link_is_refused(ctx: ToolContext) -> None:
    checked = confine("d/notes", ctx)  # type: ignore[arg-type]
    (ctx.workspace / "d" / "notes").symlink_to(ctx.protected[0] / "token")
    with pytest.raises(ToolInputError, match="changed while it was being opened"):
        open_file(checked, os.O_RDONLY)


def test_fifos_are_refused_without_blocking(ctx: ToolContext) -> None:
    os.mkfifo(ctx.workspace / "fifo")
    finished = threading.Event()

    def attempt() -> None:
        for tool, args in (
            ("write_file", {"path": "fifo", "content": "x"}),
            ("read_file", {"path": "fifo"}),
            ("edit_file", {"path": "fifo", "old_text": "a", "new_text": "b"}),
        ):
            with pytest.raises(ToolInputError, match="not a regular file"):
                run(ctx, tool, **args)
        finished.set()

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    if not finished.is_set():
        # Unblock the worker (a reader for its writer) before failing.
        os.close(os.open(ctx.workspace / "fifo", os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("a file tool blocked on a FIFO")


def test_a_huge_sparse_file_is_read_only_as_far_as_shown(ctx: ToolContext) -> None:
    big = ctx.workspace / "big.txt"
    with big.open("wb") as f:
        f.write(b"start\n")
        f.truncate(8 << 30)  # 8 GiB that take no disk
    result = run(ctx, "read_file", path="big.txt")
    assert result.summary == f"file truncated at 200000 characters of {8 << 30} bytes"
    assert ctx.out[0].startswith("start\n") and len(ctx.out[0]) == 200_000
    with pytest.raises(ToolInputError, match="over the 16777216 an edit reads"):
        run(ctx, "edit_file", path="big.txt", old_text="start", new_text="x")


def test_writes_and_edits_still_work_and_make_directories(ctx: ToolContext) -> None:
    run(ctx, "write_file", path="new/deeper/f.txt", content="one two")
    run(ctx, "edit_file", path="new/deeper/f.txt", old_text="two", new_text="2")
    assert (ctx.workspace / "new/deeper/f.txt").read_text() == "one 2"
    run(ctx, "write_file", path="new/deeper/f.txt", content="x")
    assert (ctx.workspace / "new/deeper/f.txt").read_text() == "x"
    run(ctx, "read_file", path="new/deeper/f.txt")
    assert ctx.out[-1] == "x"


def test_a_process_own_files_are_refused_even_when_approved(ctx: ToolContext) -> None:
    ctx.human_approved = True  # a person approved reading "envlink", outside the workspace
    (ctx.workspace / "envlink").symlink_to("/proc/self/environ")
    with pytest.raises(ToolInputError, match="a process's own file"):
        run(ctx, "read_file", path="envlink")
    with pytest.raises(ToolInputError, match="a process's own file"):
        run(ctx, "read_file", path="/proc/1/environ")
    run(ctx, "read_file", path="/proc/version")  # the system's files stay readable


def test_a_file_in_place_of_a_directory_is_said_as_such(ctx: ToolContext) -> None:
    (ctx.workspace / "a.txt").write_text("x")
    with pytest.raises(ToolInputError, match="a part of it is a file, not a directory"):
        run(ctx, "write_file", path="a.txt/b.txt", content="y")


def test_a_file_that_would_wait_for_data_fails_at_once(ctx: ToolContext) -> None:
    """A /proc file such as kmsg is regular but waits for data; stand in for it with a
    FIFO that has a writer and no data, read through the same non-blocking descriptor."""
    fifo = ctx.workspace / "waits"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    try:
        from tether.tools.files import _at_most

        with os.fdopen(os.dup(reader), "rb") as f, pytest.raises(ToolInputError, match="wait"):
            _at_most(f, fifo, 100)
    finally:
        os.close(reader)
        os.close(writer)
