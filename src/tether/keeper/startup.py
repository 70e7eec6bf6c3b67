"""Starting the keeper with the server: find or start the runner, settle what to do
with a runner another version of Tether left, and build the launcher.

A runner outlives the server by design, so after an upgrade (or a downgrade) the new
server finds the old runner, still running the old code, holding its calls' pipes. A
runner cannot hand those over, so it is never replaced while it runs a call:

- idle: it is retired (or, speaking no protocol we know, stopped: it runs nothing) and
  a runner of the installed version takes its place;
- running calls, with a protocol both know: it is used as is, at the newest number
  both speak, for its calls and new ones alike; a later start that finds it idle
  replaces it;
- running calls, with no protocol in common: the server cannot follow or stop them,
  so it refuses to start, naming the runner and how to get past it, rather than
  losing the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tether import __version__
from tether.config import Settings
from tether.keeper import client, protocol
from tether.keeper.client import RunnerIncompatible, RunnerInfo
from tether.keeper.hub import KeeperHub
from tether.keeper.launcher import KeeperLauncher
from tether.sandbox.service import Sandbox

log = logging.getLogger(__name__)

# How long an idle runner asked to leave may take to exit.
_RETIRE_TIMEOUT = 10.0


async def start_keeper(settings: Settings, sandbox: Sandbox) -> KeeperLauncher:
    """The launcher over this home's runner (started detached if none runs); its calls
    run in ``sandbox``, under limits the runner applies."""
    hub = KeeperHub(settings.home)
    info = await hub.open()
    if _of_another_version(info):
        try:
            info = await _settle(hub, info)
        except BaseException:
            await hub.close()
            raise
    log.info(
        "keeper: runner pid %d (Tether %s, protocol %d)",
        info.identity.pid,
        info.version,
        hub.client.spoken,
    )
    return KeeperLauncher(
        hub, settings.output_store_bytes, settings.cancel_grace_seconds, sandbox=sandbox
    )


def _of_another_version(info: RunnerInfo) -> bool:
    return (info.version, info.protocol, info.oldest) != (
        __version__,
        protocol.PROTOCOL,
        protocol.OLDEST,
    )


async def _settle(hub: KeeperHub, info: RunnerInfo) -> RunnerInfo:
    """Replace an idle runner of another version; keep a busy one we can speak to;
    refuse one we cannot (see the module doc)."""
    described = _described(info)
    if info.calls == 0:
        log.info("replacing the idle %s with one of Tether %s", described, __version__)
        await _retire(hub, info)
        return await hub.open()
    if info.spoken is None:
        raise RunnerIncompatible(
            f"the {described} runs {info.calls} call(s), and this server (Tether "
            f"{__version__}) speaks protocols {protocol.OLDEST} to {protocol.PROTOCOL} "
            f"only: start the earlier version until they end (`tether status` lists "
            f"them), or stop them with `kill -TERM {info.identity.pid}`"
        )
    log.warning(
        "the %s runs %d call(s): kept, at protocol %d; it is replaced once a start finds it idle",
        described,
        info.calls,
        info.spoken,
    )
    return info


async def _retire(hub: KeeperHub, info: RunnerInfo) -> None:
    """Have the idle runner exit and wait until it has."""
    await hub.close()
    if info.spoken is not None:
        # It exits at once (it runs no call), perhaps before its answer is out.
        with contextlib.suppress(client.RunnerUnavailable):
            await hub.request("retire")
        hub.client.close()
        if await asyncio.to_thread(client.wait_gone, info.identity, _RETIRE_TIMEOUT):
            return
    # Speaking no protocol we know, or slow to go: SIGTERM stops what it runs (nothing).
    await asyncio.to_thread(client.stop_runner, hub.home, _RETIRE_TIMEOUT)


def _described(info: RunnerInfo) -> str:
    return (
        f"runner pid {info.identity.pid} (Tether {info.version}, "
        f"protocols {info.oldest} to {info.protocol})"
    )
