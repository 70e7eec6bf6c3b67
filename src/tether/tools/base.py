"""What a tool is, and what it is given while it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.errors import Invalid
from tether.toolcalls.launcher import LaunchedProcess


class ToolInputError(Invalid):
    """Arguments the tool cannot use; the model is told what was wrong."""


@dataclass(frozen=True)
class ToolResult:
    """How a call ended. What it printed is in its output buffer, not here."""

    is_error: bool = False
    summary: str = ""


class RunContext(Protocol):
    """What a running tool may do besides computing its result."""

    call_id: str
    workspace: Path
    # Paths the tools must never touch (Tether's own state).
    protected: tuple[Path, ...]
    # Whether a person approved this call (lets file tools leave the workspace).
    human_approved: bool

    def emit(self, stream: str, text: str) -> None:
        """Append output (``stdout`` or ``stderr``) that readers see at once."""

    async def launch(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> LaunchedProcess:
        """Start the call's process tree; the coordinator can then cancel it, time it out
        and find it again after a crash."""


@dataclass(frozen=True)
class Tool:
    """A named tool: its model-facing spec and the coroutine that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[Mapping[str, Any], RunContext], Awaitable[ToolResult]]
    # The most a call may run, whatever deadline it is given (None: no cap).
    max_timeout: float | None = None
    # Reads the call's requested timeout from its arguments (None: no timeout).
    timeout_of: Callable[[Mapping[str, Any]], float | None] = field(default=lambda _args: None)
    # Refuses (ToolInputError) arguments the tool could never run, before governance
    # weighs the call: nobody is asked to approve what would fail at once.
    check: Callable[[Mapping[str, Any]], object] = field(default=lambda _args: None)

    def openai_spec(self) -> dict[str, Any]:
        """The tool as OpenAI's chat API expects it in ``tools``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }
