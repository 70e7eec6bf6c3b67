"""A RunContext for tools run outside a server (file tools, path checks): a workspace,
Tether's state, and what the tool emitted. It starts no process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tether.toolcalls.launcher import LaunchedProcess


@dataclass
class ToolContext:
    workspace: Path
    protected: tuple[Path, ...]
    human_approved: bool = False
    call_id: str = "c1"
    marker: str = "m"
    out: list[str] = field(default_factory=list)

    def emit(self, stream: str, text: str) -> None:
        self.out.append(text)

    async def launch(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> LaunchedProcess:
        raise AssertionError("these tools start no process")
