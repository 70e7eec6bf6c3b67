"""The sandbox as the server sees it: what works here, and the launch of one call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.sandbox import bwrap, syscall_filter
from tether.sandbox.enforcers import new_group
from tether.sandbox.groups import Enforcer
from tether.sandbox.limits import Limits
from tether.sandbox.policy import (
    Containment,
    Network,
    SandboxMode,
    SessionSandbox,
    containment,
    effective_limits,
)
from tether.sandbox.servers import SandboxedServer, server_limits, wrap_server
from tether.sandbox.tree import LimitedTree
from tether.sandbox.watch import Watcher
from tether.shared_reads import SharedReads
from tether.toolcalls.launcher import LaunchSpec
from tether.tools.shell import SHELL_TOOL

log = logging.getLogger(__name__)

SessionSettings = Callable[[str], Awaitable[Mapping[str, Any] | None]]


class SandboxUnavailable(RuntimeError):
    """TETHER_SANDBOX=bwrap, and bwrap does not work here."""


@dataclass(frozen=True)
class SandboxConfig:
    mode: SandboxMode
    network: Network
    limits: Limits
    workspace: Path
    # Never visible inside the sandbox (TETHER_HOME, a database kept elsewhere).
    hidden: tuple[Path, ...]
    bwrap: str = "bwrap"


@dataclass(frozen=True)
class Plan:
    """How one call is to run: its argv (inside bwrap unless it runs outside the
    sandbox) and its containment (network, limits)."""

    argv: list[str]
    containment: Containment
    # The seccomp filter bwrap reads from the descriptor its argv's slot names (see
    # syscall_filter.attached), or None: not sandboxed, or no filter for this machine.
    syscall_filter: bytes | None = None

    @property
    def supervised(self) -> bool:
        """Whether the root process is bwrap, which ends when the command does: a
        graceful stop spares it so that the command's own SIGTERM handlers get to run."""
        return self.containment.sandboxed


@dataclass(frozen=True)
class Launch:
    """One call's way to start in this server: its plan and its limits group."""

    plan: Plan
    tree: LimitedTree

    @property
    def supervised(self) -> bool:
        return self.plan.supervised


class Sandbox:
    """What the sandbox can do on this machine, and the launches it hands out."""

    def __init__(
        self,
        config: SandboxConfig,
        probe: bwrap.Probe | None,
        enforcer: Enforcer,
        session_settings: SessionSettings,
    ) -> None:
        self._config = config
        self._probe = probe
        self._enforcer = enforcer
        # The calls of one model reply are planned together: one read serves them all.
        self._session_settings = SharedReads(session_settings)
        self._watcher = Watcher()
        # By whether the call has the network: without it, unix sockets are refused too.
        filtered = probe is not None and probe.filtered
        self._filters = {
            network: syscall_filter.program(deny_unix_sockets=not network) if filtered else None
            for network in (False, True)
        }

    async def close(self) -> None:
        """Release this server's groups (at shutdown, after every call has ended)."""
        await self._watcher.close()
        await asyncio.to_thread(self._enforcer.close)

    @property
    def state_paths(self) -> tuple[Path, ...]:
        """Tether's own state, which calls never see (``setup.tether_state``, read once
        at start): what the file tools must not touch either."""
        return self._config.hidden

    @property
    def available(self) -> bool:
        return self._probe is not None and self._probe.works

    def status(self) -> dict[str, Any]:
        """For /api/healthz: the sandbox's state, whether its calls run under the
        system call filter, and the limit mechanism in force."""
        if self._config.mode == "off":
            state = "off"
        else:
            state = "bwrap" if self.available else "unavailable"
        filtered = self._filters[False] is not None
        return {"sandbox": state, "syscall_filter": filtered, "limits": self._enforcer.mechanism}

    async def containment(self, session_id: str, arguments: Mapping[str, Any]) -> Containment:
        """How a shell call in ``session_id`` with ``arguments`` would run."""
        session = SessionSandbox.from_stored(await self._session_settings(session_id))
        limits = effective_limits(self._config.limits, session)
        network = session.network or self._config.network
        return containment(self.available, network, limits, arguments)

    async def containment_of(self, call: Any) -> Containment | None:
        """Governance's view of an invocation: its containment if it is a shell call."""
        if call.tool_name != SHELL_TOOL:
            return None
        return await self.containment(call.session_id, call.arguments)

    async def plan(self, spec: LaunchSpec) -> Plan:
        """How one call runs: wrapped in bwrap unless it runs outside the sandbox, under
        its session's limits either way (whoever starts it applies them: this server's
        :meth:`prepare`, or the keeper's runner). In the containment governance judged
        (``spec.judged``, which a person may have approved; a setting changed since
        applies from the next call), else in the session's settings read now."""
        contained: Containment | None = spec.judged
        if contained is None:
            contained = await self.containment(spec.session_id, spec.arguments)
        if not contained.sandboxed:
            return Plan(list(spec.argv), contained)
        assert self._probe is not None and self._probe.path is not None
        conf = bwrap.Confinement(
            workspace=self._config.workspace,
            hidden=self._config.hidden,
            cwd=spec.cwd,
            network=contained.network == "full",
        )
        program = self._filters[conf.network]
        argv = bwrap.wrap(self._probe.path, conf, spec.argv, filtered=program is not None)
        return Plan(argv, contained, program)

    async def prepare(self, spec: LaunchSpec) -> Launch:
        """A launch for one call in this server: its plan and a fresh limits group."""
        plan = await self.plan(spec)
        limits = plan.containment.limits
        group = await asyncio.to_thread(new_group, self._enforcer, limits)
        return Launch(plan, LimitedTree(group, limits, self._watcher))

    async def wrap_server(
        self, command: Sequence[str], cwd: Path, network: Network | None
    ) -> SandboxedServer | None:
        """A long-lived server's command (an MCP stdio server) inside the shell calls'
        boundary, with ``network`` (None: the server's default); None when bwrap does
        not work here. The caller releases it once the server has ended."""
        if not self.available:
            return None
        assert self._probe is not None and self._probe.path is not None
        group = await asyncio.to_thread(
            new_group, self._enforcer, server_limits(self._config.limits)
        )
        conf = bwrap.Confinement(
            workspace=self._config.workspace,
            hidden=self._config.hidden,
            cwd=cwd,
            network=(network or self._config.network) == "full",
        )
        program = self._filters[conf.network]
        return await asyncio.to_thread(wrap_server, self._probe.path, conf, group, command, program)


async def build_sandbox(
    config: SandboxConfig, enforcer: Enforcer, session_settings: SessionSettings
) -> Sandbox:
    """Probe bwrap per ``config.mode``; refuse (SandboxUnavailable) when it is required
    and does not work, warn loudly when it is wanted and does not."""
    probe = None
    if config.mode != "off":
        probe = await asyncio.to_thread(bwrap.probe, config.bwrap)
        if not probe.works and config.mode == "bwrap":
            raise SandboxUnavailable(f"TETHER_SANDBOX=bwrap but {probe.reason}")
        if probe.works and not probe.filtered:
            log.warning(
                "SANDBOX WITHOUT ITS SYSTEM CALL FILTER: %s. Calls keep the kernel keyring, "
                "user namespaces and, with the network off, local services' sockets at "
                "paths they can see.",
                probe.reason,
            )
        if not probe.works:
            log.warning(
                "SANDBOX UNAVAILABLE: shell calls run without a sandbox (%s). "
                "Install bubblewrap, or set TETHER_SANDBOX=off to silence this.",
                probe.reason,
            )
    return Sandbox(config, probe, enforcer, session_settings)
