"""Building the server's sandbox from its settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tether.config import Settings
from tether.keeper import layout
from tether.sandbox import enforcers
from tether.sandbox.limits import Limits
from tether.sandbox.service import Sandbox, SandboxConfig, SessionSettings, build_sandbox


def tether_state(settings: Settings) -> tuple[Path, ...]:
    """Where Tether keeps its own state, which no tool call may see or touch: the home,
    a database file kept outside it, a deep home's runner socket. Blocking (resolves)."""
    hidden = [settings.home.resolve()]
    runner_socket = layout.socket_path(settings.home)
    if not runner_socket.is_relative_to(hidden[0]):
        # A deep home's runner listens in the temporary directory (it refuses sandboxed
        # peers anyway; hidden, a call does not even find it).
        hidden.append(runner_socket)
    url = settings.database_url
    if url and url.startswith("sqlite") and "///" in url:
        # A database kept outside TETHER_HOME is hidden too, with its WAL files.
        db_file = Path(url.split("///", 1)[-1]).resolve()
        hidden += [db_file.with_name(db_file.name + s) for s in ("", "-wal", "-shm")]
    return tuple(hidden)


async def sandbox_for(
    settings: Settings, session_settings: SessionSettings, tag: str, *, reap: bool = False
) -> Sandbox:
    """Probe bwrap and choose the limits mechanism (raises SandboxUnavailable when
    TETHER_SANDBOX=bwrap and bwrap does not work). ``tag`` names this server's groups;
    ``reap``: what a previous server on this home left in them is killed (the caller
    holds the home's lock)."""
    config = SandboxConfig(
        mode=settings.sandbox,
        network=settings.sandbox_network,
        limits=Limits(
            settings.call_memory_mb, settings.call_max_processes, settings.call_cpu_seconds
        ),
        workspace=await asyncio.to_thread(settings.resolved_workspace.resolve),
        hidden=await asyncio.to_thread(tether_state, settings),
    )
    enforcer = await asyncio.to_thread(enforcers.choose, tag, reap=reap)
    return await build_sandbox(config, enforcer, session_settings)
