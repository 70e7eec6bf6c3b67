"""What the sandbox adds to a shell call's start: the real shell tool runs `true` with no
sandbox, with limits only (sandbox: false), and in bwrap with limits, in-process.

Each figure is one whole call (limits group made, process started, command run, figures
read, group released), so the difference from the plain call bounds what the sandbox
adds to the start. Run: python bench/bench_sandbox.py [rounds]   (target: < 10 ms added)
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from _support import median, pct, report

from tether.sandbox import enforcers
from tether.sandbox.limits import Limits
from tether.sandbox.service import SandboxConfig, build_sandbox
from tether.tools.base import Tool
from tether.tools.shell import make_shell_tool


class _Context:
    """Just enough of a RunContext for the shell tool."""

    def __init__(self, workspace: Path) -> None:
        self.call_id = "bench"
        self.session_id = "bench"
        self.workspace = workspace
        self.marker = "tether-bench:bench"
        self.protected: tuple[Path, ...] = ()
        self.human_approved = False

    def emit(self, stream: str, text: str) -> None:
        return None

    def attach_process(self, pid: int, pgid: int, supervisor: bool = False) -> None:
        return None


async def _no_settings(_session: str) -> Mapping[str, Any] | None:
    return None


async def _time_calls(tool: Tool, ctx: _Context, args: dict[str, Any], rounds: int) -> list[float]:
    await tool.run(args, ctx)  # warm-up
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = await tool.run(args, ctx)
        times.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result
    return times


async def main(rounds: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="tether-bench-sandbox-"))
    workspace = home / "workspace"
    workspace.mkdir()
    config = SandboxConfig("bwrap", "none", Limits(), workspace, (home,))
    enforcer = await asyncio.to_thread(enforcers.choose, f"tether-bench-{os.getpid()}")
    sandbox = await build_sandbox(config, enforcer, _no_settings)
    env = lambda: dict(os.environ)  # noqa: E731
    plain = make_shell_tool(60, 60, env)
    sandboxed = make_shell_tool(60, 60, env, sandbox=sandbox)
    ctx = _Context(workspace)
    try:
        base = await _time_calls(plain, ctx, {"command": "true"}, rounds)
        limits = await _time_calls(sandboxed, ctx, {"command": "true", "sandbox": False}, rounds)
        boxed = await _time_calls(sandboxed, ctx, {"command": "true"}, rounds)
    finally:
        await sandbox.close()
    note = f"{rounds} calls each; {enforcer.mechanism}; plain call {median(base):.1f} ms"
    added_limits = median(limits) - median(base)
    report("limits group: added per call (median)", added_limits, "ms", "(info)", True, note)
    added = median(boxed) - median(base)
    note += f"; sandboxed p90 {pct(boxed, 90):.1f} ms"
    report("sandbox + limits: added per call (median)", added, "ms", "< 10", added < 10, note)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
