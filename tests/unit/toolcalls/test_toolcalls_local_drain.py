"""The server's own launcher (``TETHER_KEEPER=0``): a background child that keeps the
call's output open holds the call's end for the drain time only, not until it exits."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import psutil

from tether import model_texts
from tether.toolcalls.launcher import MARKER_VAR, LaunchSpec
from tether.toolcalls.local_launcher import LocalLauncher


def _marked(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARKER_VAR) == marker:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def test_a_background_child_holding_the_output_holds_the_end_for_the_drain_only(
    tmp_path: Path,
) -> None:
    marker = f"local-drain-{os.getpid()}"
    spec = LaunchSpec(
        ["/bin/sh", "-c", "sleep 300 & echo started"],
        tmp_path,
        {"PATH": os.environ["PATH"]},
        marker,
        time.time(),
    )
    launcher = LocalLauncher()
    tree = await launcher.start(spec)
    got: dict[str, str] = {"stdout": "", "stderr": ""}

    def sink(stream: str, text: str) -> None:
        got[stream] += text

    try:
        # Before: follow (and wait) returned only when `sleep 300` exited.
        await asyncio.wait_for(tree.follow(sink), timeout=30)
        assert await asyncio.wait_for(tree.wait(), timeout=5) == 0
        assert got == {"stdout": "started\n", "stderr": model_texts.OUTPUT_KEPT_OPEN}
        assert [p.name() for p in _marked(marker)] == ["sleep"], "the child ran on"
    finally:
        await launcher.stop([tree], grace=0.0, force=True)
    assert _marked(marker) == []
