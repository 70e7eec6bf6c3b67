"""Which sandbox a call gets: the session's settings over the server's, and the
escalations a call asks for (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tether.sandbox.limits import Limits

Network = Literal["none", "full"]
SandboxMode = Literal["auto", "bwrap", "off"]

SANDBOX_ESCAPE = "sandbox.escape"
SANDBOX_NETWORK = "sandbox.network"


@dataclass(frozen=True)
class SessionSandbox:
    """A session's own settings; None means the server's default. A limit of 0 means
    no limit of that kind for the session."""

    network: Network | None = None
    memory_mb: int | None = None
    max_processes: int | None = None
    cpu_seconds: float | None = None

    @classmethod
    def from_stored(cls, value: Mapping[str, Any] | None) -> SessionSandbox:
        if not value:
            return cls()
        return cls(
            network=value.get("network"),
            memory_mb=value.get("memory_mb"),
            max_processes=value.get("max_processes"),
            cpu_seconds=value.get("cpu_seconds"),
        )


def _override(default: Any, session: Any) -> Any:
    if session is None:
        return default
    return None if session == 0 else session


def effective_limits(defaults: Limits, session: SessionSandbox) -> Limits:
    """The limits a call in ``session`` runs under."""
    return Limits(
        memory_mb=_override(defaults.memory_mb, session.memory_mb),
        max_processes=_override(defaults.max_processes, session.max_processes),
        cpu_seconds=_override(defaults.cpu_seconds, session.cpu_seconds),
    )


@dataclass(frozen=True)
class Containment:
    """How one shell call would run: in the sandbox or not, with which network and
    limits, and what it asks beyond the session's sandbox (rule id, why)."""

    sandboxed: bool
    network: Network
    limits: Limits
    escalations: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"sandboxed": self.sandboxed, "network": self.network, **self.limits.as_dict()}


def containment(
    available: bool, session_network: Network, limits: Limits, arguments: Mapping[str, Any]
) -> Containment:
    """How a shell call with ``arguments`` runs, given whether the sandbox works here."""
    if not available:
        return Containment(False, "full", limits)
    escalations: list[tuple[str, str]] = []
    sandboxed = arguments.get("sandbox", True) is not False
    if not sandboxed:
        escalations.append((SANDBOX_ESCAPE, "asks to run outside the sandbox (sandbox: false)"))
    wants_network = arguments.get("network", False) is True
    network: Network = session_network
    if sandboxed and wants_network and session_network == "none":
        escalations.append(
            (SANDBOX_NETWORK, "asks for the network in a session whose sandbox has none")
        )
        network = "full"
    if not sandboxed:
        network = "full"
    return Containment(sandboxed, network, limits, tuple(escalations))
