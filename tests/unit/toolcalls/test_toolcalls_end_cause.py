"""How a call's end is recorded when its launcher can tell what ended the tree (the
keeper's runner records whether it stopped it, and why): its word beats the
coordinator's guess from its own timers and requests, both ways."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import coordinator_on
from test_toolcalls_extend_while_starting import HeldProcess
from test_toolcalls_limits import SlowWritingStore

from tether.toolcalls.call import CallOutcome, Invocation
from tether.toolcalls.launcher import EndCause, LaunchedProcess, LaunchSpec
from tether.tools.base import RunContext, Tool, ToolResult
from tether.tools.shell import describe_exit


class EndingProcess(HeldProcess):
    """A tree that ends with ``code`` when told to, its launcher saying why."""

    def __init__(self, code: int, cause: EndCause | None) -> None:
        super().__init__()
        self.code, self.cause = code, cause

    async def wait(self) -> int:
        await self.done.wait()
        return self.code

    def end_cause(self) -> EndCause | None:
        return self.cause if self.done.is_set() else None


class OneTreeLauncher:
    def __init__(self, process: EndingProcess, stop_ends_it: bool) -> None:
        self.process, self.stop_ends_it = process, stop_ends_it
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()

    async def start(self, spec: LaunchSpec) -> LaunchedProcess:
        self.started.set()
        return self.process

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        self.stopped.set()
        if self.stop_ends_it:
            self.process.done.set()


async def _run(
    tmp_path: Path, process: EndingProcess, cancel: bool, stop_ends_it: bool = True
) -> CallOutcome:
    launcher = OneTreeLauncher(process, stop_ends_it)
    store: Any = SlowWritingStore()
    coordinator = coordinator_on(store, tmp_path, launcher)

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        tree = await ctx.launch(("/bin/true",), tmp_path, {})
        return describe_exit(await tree.wait())

    # Its own deadline is a minute away: the coordinator's timer never fires here.
    tool = Tool("tree", "", {"type": "object"}, run, timeout_of=lambda _args: 60.0)
    work = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s", "t1", "default", "tree", {}), tool)
    )
    await asyncio.wait_for(launcher.started.wait(), 5)
    if cancel:
        await coordinator.cancel("s", "c1", force=False)
        await asyncio.wait_for(launcher.stopped.wait(), 5)
    process.done.set()
    return await asyncio.wait_for(work, 5)


async def test_a_tree_its_launcher_killed_at_the_deadline_timed_out(tmp_path: Path) -> None:
    """The runner's timer fired before the coordinator's (they are set for the same
    moment): the call timed out, it did not fail on a SIGTERM."""
    outcome = await _run(tmp_path, EndingProcess(-15, "deadline"), cancel=False)
    assert outcome.end_state == "timeout"


async def test_a_command_that_exited_by_itself_as_it_was_cancelled_keeps_its_result(
    tmp_path: Path,
) -> None:
    outcome = await _run(tmp_path, EndingProcess(0, "itself"), cancel=True, stop_ends_it=False)
    assert outcome.end_state == "success"
    assert "cancelled" not in outcome.model_text


@pytest.mark.parametrize(("code", "cause"), [(0, None), (-15, "request")])
async def test_a_cancel_the_launcher_cannot_tell_from_an_exit_is_a_cancel(
    tmp_path: Path, code: int, cause: EndCause | None
) -> None:
    """A launcher that cannot tell (the server's own), or one that says the stop ended
    the tree: cancelled, as a graceful program exiting 0 at SIGTERM must be."""
    outcome = await _run(tmp_path, EndingProcess(code, cause), cancel=True)
    assert outcome.end_state == "cancelled"
