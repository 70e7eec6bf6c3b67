"""The seam between a tool call and the processes that do its work.

A launcher starts a call's process tree, stops trees, and hands back a handle to follow
the tree's output and await its end. The coordinator only ever talks to this interface;
today one launcher sits behind it (``local_launcher.LocalLauncher``: a child of the
server in its own session). Others slot in beside it without touching the coordinator:
a detached keeper that outlives the server, a sandbox, MCP calls, calls on another node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from tether.sandbox.limits import Resources

# Environment variable set on every process a call starts, so its whole tree can be found
# (even a child that called setsid and was orphaned).
MARKER_VAR = "TETHER_TOOL_CALL"

# What ended a tree, as its launcher saw it: its kill deadline, a stop asked for, or
# nothing but the command itself (it exited before any stop reached it).
EndCause = Literal["deadline", "request", "itself"]

# Receives output as it comes: (stream name, text), stream being "stdout" or "stderr".
OutputSink = Callable[[str, str], None]


@dataclass(frozen=True)
class LaunchSpec:
    """What to start for one call."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str]
    # This call's value of MARKER_VAR.
    marker: str
    # Epoch seconds the call started; no process of the call can be older.
    started_at: float
    # The call's id, and seconds until its kill deadline (None: none): a durable
    # launcher names the call's files by the id and enforces the deadline itself.
    call_id: str = ""
    kill_after: float | None = None
    # The call's session and arguments: a sandboxing launcher reads the session's
    # settings and what the call asks of the sandbox (``sandbox``, ``network``).
    session_id: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    # How governance judged the call would run (``Invocation.judged``; None: not judged).
    judged: Any = None


class LaunchedProcess(Protocol):
    """A call's running process tree."""

    @property
    def pgid(self) -> int:
        """The tree's process group (recorded, so a later start can reap it)."""

    async def follow(self, sink: OutputSink) -> None:
        """Pass output to ``sink`` as it comes; return when the output has ended.

        If the caller is cancelled before the tree has exited, the tree is killed.
        """

    async def wait(self) -> int:
        """Await the end: the exit code, or minus the signal number that ended it."""

    async def set_kill_deadline(self, kill_after: float | None) -> None:
        """The call's kill deadline moved (seconds from now; None: none). A launcher
        whose trees outlive the server enforces it itself; others may ignore it."""

    async def resources(self) -> Resources | None:
        """What the tree used, once it has ended (None: this launcher does not measure)."""

    def end_cause(self) -> EndCause | None:
        """What ended the tree, once :meth:`wait` has returned (None: this launcher
        cannot tell a command that exited on its own just as a stop was sent from one
        the stop ended)."""


class Launcher(Protocol):
    """Starts and stops process trees for tool calls."""

    # Whether trees outlive the server (then a graceful stop may leave them running).
    durable: bool

    async def start(self, spec: LaunchSpec) -> LaunchedProcess:
        """Start ``spec``'s process tree."""

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        """Signal every process of ``trees``: SIGTERM, then SIGKILL to what is left after
        ``grace`` seconds (``force``: SIGKILL at once). One call stops many trees, so a
        task's or the server's calls stop together."""
