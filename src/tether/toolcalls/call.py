"""The words for a tool call that every layer shares.

Governance, the agent, the API and the coordinator all import these types from here, so
none of them needs the coordinator itself to name a call, its admission or its outcome.
"Admission" is the one family for "may it run": how it is decided (``AdmissionMode``),
what governance plans for one call (``AdmissionPlan``) and the answer (``Admission``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tether.store.records import OutputChunk
from tether.toolcalls.state import EndState, Status

# allow: runs at once; ask: a person decides first; deny: refused without running.
AdmissionMode = Literal["allow", "ask", "deny"]
# Who settled an admission: policy at once, a person, a person's remembered decision,
# expiry, cancellation, a restart.
DecidedBy = Literal["policy", "user", "remembered", "timeout", "cancel", "restart"]

#: The agent id of calls a client makes over Tether's own ``/mcp`` endpoint. That client
#: waits on its request for the result, and no turn is there to carry on without the
#: call and take its result later, so these calls are never moved to the background.
MCP_CLIENT_AGENT = "mcp"


@dataclass(frozen=True)
class Invocation:
    """One tool call the model asked for."""

    call_id: str
    session_id: str
    task_id: str | None
    agent_id: str
    tool_name: str
    arguments: dict[str, Any]
    #: How governance judged it would run (the sandbox's containment of a shell call),
    #: set once it is admitted: its launch runs it so, as a person may have approved it.
    judged: Any = field(default=None, compare=False)

    @property
    def offloadable(self) -> bool:
        """Whether its caller can go on without it and take its result later: a turn
        can; an MCP client waiting on its request cannot (see ``MCP_CLIENT_AGENT``)."""
        return can_offload(self.agent_id)


def can_offload(agent_id: str) -> bool:
    """Whether calls made by ``agent_id`` can be moved to the background (see
    :attr:`Invocation.offloadable`)."""
    return agent_id != MCP_CLIENT_AGENT


@dataclass(frozen=True)
class Admission:
    """The answer to whether a call may run, and who gave it."""

    allowed: bool
    reason: str = ""
    decided_by: DecidedBy = "policy"

    @property
    def by_human(self) -> bool:
        """Whether a person gave this answer, now or by a remembered decision (a person's
        yes widens what tools may touch)."""
        return self.decided_by in ("user", "remembered")


@dataclass(frozen=True)
class AdmissionPlan:
    """Governance's plan for one call.

    ``allow`` runs it, ``deny`` refuses it with ``reason`` (the text the model sees),
    ``ask`` runs ``ask`` (which waits on a person) before it may run.
    """

    mode: AdmissionMode
    reason: str = ""
    ask: Callable[[], Awaitable[Admission]] | None = None
    #: How the call would run, as judged (see ``Invocation.judged``).
    judged: Any = None


@dataclass(frozen=True)
class CallInfo:
    """What the API shows of a call, live or finished (QwenPaw's ToolCallInfo fields)."""

    tool_call_id: str
    tool_name: str
    session_id: str
    agent_id: str
    status: Status
    started_at: float
    elapsed: float
    offload_remaining: float | None
    kill_remaining: float | None
    extra: dict[str, Any]
    end_state: EndState | None
    force_cancelled: bool
    max_internal_timeout_secs: float | None
    offload_reason: str | None
    # What the call's processes used, once it ended (see tether.sandbox.limits.Resources).
    resources: dict[str, Any] | None = None


@dataclass(frozen=True)
class CallOutput:
    """What a call has printed so far, as the pieces it came in, and whether it ended."""

    pieces: list[str]
    closed: bool
    end_state: str | None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def tail(self, chars: int) -> tuple[str, int]:
        """The last ``chars`` characters, and how many came before them; only the pieces
        that hold the end are joined (a poll of a 16 MiB output wants a screenful)."""
        kept: list[str] = []
        held = 0
        for piece in reversed(self.pieces):
            if held >= chars:
                break
            kept.append(piece)
            held += len(piece)
        end = "".join(reversed(kept))[-chars:]
        return end, sum(map(len, self.pieces)) - len(end)


@dataclass(frozen=True)
class CallOutcome:
    """The tool message content for the model, and how the call ended (None: offloaded);
    ``lost`` says why its result is not known, when it could not be followed to its end
    (a task resumed after a restart fails with it)."""

    end_state: EndState | None
    offloaded: bool
    model_text: str
    lost: str | None = None


class ResultLost(Exception):
    """A call's work could not follow it to its end (its files, or its keeper, are
    gone): how it ended is not known. The message says exactly what was lost."""


class CallObserver(Protocol):
    """Receives a call's life events (the chat stream uses this)."""

    def started(self, info: CallInfo) -> None: ...
    def output(self, call_id: str, chunk: OutputChunk) -> None: ...
    def ended(self, info: CallInfo) -> None: ...
