"""What the sandbox adds to a shell call's start: the real shell tool runs `echo started`
through the local launcher (no sandbox), and through the sandboxing launcher with limits
only (sandbox: false) and in bwrap with limits, in-process.

A call's start is timed from the tool being called to its first output arriving (limits
group made, process started and moved into it, sandbox built, command running); the
whole call (figures read, group released) is reported beside it.
Run: python bench/bench_sandbox.py [rounds]   (target: < 10 ms added to the start)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _support import median, pct, report

from tether.sandbox import enforcers
from tether.sandbox.launcher import SandboxLauncher
from tether.sandbox.limits import Limits
from tether.sandbox.service import SandboxConfig, build_sandbox
from tether.toolcalls.launcher import LaunchedProcess, Launcher, LaunchSpec
from tether.toolcalls.local_launcher import LocalLauncher
from tether.tools.base import Tool
from tether.tools.shell import make_shell_tool


class _Context:
    """Just enough of a RunContext for the shell tool, launching through ``launcher``."""

    def __init__(self, workspace: Path, launcher: Launcher) -> None:
        self.first_output: float | None = None
        self.call_id = "bench"
        self.workspace = workspace
        self.protected: tuple[Path, ...] = ()
        self.human_approved = False
        self.launcher = launcher
        self.arguments: Mapping[str, Any] = {}

    def emit(self, stream: str, text: str) -> None:
        if text and self.first_output is None:
            self.first_output = time.perf_counter()

    async def launch(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> LaunchedProcess:
        spec = LaunchSpec(
            argv,
            cwd,
            env,
            "tether-bench:bench",
            time.time(),
            call_id="bench",
            session_id="bench",
            arguments=self.arguments,
        )
        return await self.launcher.start(spec)


async def _no_settings(_session: str) -> Mapping[str, Any] | None:
    return None


async def _time_call(tool: Tool, ctx: _Context, args: dict[str, Any]) -> tuple[float, float]:
    """(ms to the first output, ms for the whole call)."""
    ctx.first_output, ctx.arguments = None, args
    began = time.perf_counter()
    result = await tool.run(args, ctx)
    ended = time.perf_counter()
    assert not result.is_error and ctx.first_output is not None, result
    return (ctx.first_output - began) * 1000, (ended - began) * 1000


async def _interleaved(
    variants: dict[str, tuple[_Context, dict[str, Any]]], tool: Tool, rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """Each variant once per round, in turn, so that a busy moment hits all alike."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for round_ in range(rounds + 1):
        for name, (ctx, args) in variants.items():
            timing = await _time_call(tool, ctx, args)
            if round_:  # the first round warms up
                times[name].append(timing)
    return times


async def main(rounds: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="tether-bench-sandbox-"))
    workspace = home / "workspace"
    workspace.mkdir()
    config = SandboxConfig("bwrap", "none", Limits(), workspace, (home,))
    enforcer = await asyncio.to_thread(enforcers.choose, f"tether-bench-{os.getpid()}")
    sandbox = await build_sandbox(config, enforcer, _no_settings)
    tool = make_shell_tool(60, 60, lambda: dict(os.environ))
    plain, sandboxed = (
        _Context(workspace, LocalLauncher()),
        _Context(workspace, SandboxLauncher(sandbox)),
    )
    command = "echo started"
    variants = {
        "plain": (plain, {"command": command}),
        "limits": (sandboxed, {"command": command, "sandbox": False}),
        "sandbox": (sandboxed, {"command": command}),
    }
    try:
        times = await _interleaved(variants, tool, rounds)
    finally:
        await sandbox.close()
        shutil.rmtree(home, ignore_errors=True)
    base, limits, boxed = ([t[0] for t in times[n]] for n in variants)
    base_whole, boxed_whole = ([t[1] for t in times[n]] for n in ("plain", "sandbox"))
    note = f"{rounds} calls each; {enforcer.mechanism}; plain start {median(base):.1f} ms"
    added_limits = median(limits) - median(base)
    report(
        "limits only: added to a call's start (median)", added_limits, "ms", "(info)", True, note
    )
    added = median(boxed) - median(base)
    note += (
        f"; p25 {pct(boxed, 25) - pct(base, 25):.1f} ms added; whole call "
        f"{median(base_whole):.1f} -> {median(boxed_whole):.1f} ms; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    report(
        "sandbox + limits: added to a call's start (median)", added, "ms", "< 10", added < 10, note
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
