"""Starting the keeper with the server (find or start the runner, settle what to do
with a runner another version of Tether left, build the launcher) and leaving it at a
graceful stop (an idle runner goes with the server, a busy one stays, and says so).

A runner outlives the server by design, so after an upgrade (or a downgrade) the new
server finds the old runner, still running the old code, holding its calls' pipes. A
runner cannot hand those over, so it is never replaced while it runs a call:

- idle: it is retired (or, speaking no protocol we know, stopped: it runs nothing) and
  a runner of the installed version takes its place;
- running calls, with a protocol both know: it is used as is, at the newest number
  both speak, for its calls and new ones alike, until it runs nothing: the first call
  started then replaces it first (see :class:`KeeperLauncher`), and a stop retires it;
- running calls, with no protocol in common: the server cannot follow or stop them,
  so it refuses to start, naming the runner and how to get past it, rather than
  losing the calls.
"""

from __future__ import annotations

import logging

from tether import __version__
from tether.config import Settings
from tether.keeper import client, protocol
from tether.keeper.client import RunnerIncompatible, RunnerInfo
from tether.keeper.hub import KeeperHub
from tether.keeper.launcher import KeeperLauncher
from tether.sandbox.service import Sandbox

log = logging.getLogger(__name__)


async def start_keeper(settings: Settings, sandbox: Sandbox) -> KeeperLauncher:
    """The launcher over this home's runner (started detached if none runs); its calls
    run in ``sandbox``, under limits the runner applies."""
    hub = KeeperHub(settings.home, settings.keeper_idle_exit_seconds)
    info = await hub.open()
    if info.of_another_version:
        try:
            info = await _settle(hub, info)
        except BaseException:
            await hub.close()
            raise
    log.info(
        "keeper on: tool calls run under runner pid %d (Tether %s, protocol %d), apart "
        "from this server, and outlive it; TETHER_KEEPER=0 runs them as its children",
        info.identity.pid,
        info.version,
        hub.client.spoken,
    )
    return KeeperLauncher(
        hub,
        settings.output_store_bytes,
        settings.cancel_grace_seconds,
        sandbox=sandbox,
        kept=info.of_another_version,
    )


async def leave_keeper(launcher: KeeperLauncher) -> None:
    """At a graceful stop, once the coordinator has let go of every call: a runner that
    runs nothing exits with the server (nothing is left behind for nothing); one that
    runs calls is left running them, for the next start to adopt, and the log says so
    (it exits on its own once they have ended and no server has used it for its
    idle time)."""
    hub = launcher.hub
    try:
        # Only this server starts calls on this home (server.lock), and it starts no
        # more now: the count cannot grow between this answer and the retire.
        info = await hub.client.hello()
    except (client.RunnerUnavailable, protocol.ProtocolError) as exc:
        log.warning("keeper: the runner of %s did not answer at the stop: %s", hub.home, exc)
        await hub.close()
        return
    if info.calls == 0:
        log.info("keeper: no call running; runner pid %d exits with the server", info.identity.pid)
        await hub.retire(info)
        return
    await hub.close()
    log.info(
        "leaving %d call(s) running under the keeper (runner pid %d); they are adopted at "
        "the next start (`tether status` lists them; TETHER_ON_SHUTDOWN=stop stops them "
        "at a stop instead)",
        info.calls,
        info.identity.pid,
    )


async def _settle(hub: KeeperHub, info: RunnerInfo) -> RunnerInfo:
    """Replace an idle runner of another version; keep a busy one we can speak to;
    refuse one we cannot (see the module doc)."""
    described = _described(info)
    if info.calls == 0:
        log.info("replacing the idle %s with one of Tether %s", described, __version__)
        return await hub.replace(info)
    if info.spoken is None:
        raise RunnerIncompatible(
            f"the {described} runs {info.calls} call(s), and this server (Tether "
            f"{__version__}) speaks protocols {protocol.OLDEST} to {protocol.PROTOCOL} "
            f"only: start the earlier version until they end (`tether status` lists "
            f"them), or stop them with `kill -TERM {info.identity.pid}`"
        )
    log.warning(
        "the %s runs %d call(s): kept, at protocol %d; the first call started once they "
        "have ended replaces it",
        described,
        info.calls,
        info.spoken,
    )
    return info


def _described(info: RunnerInfo) -> str:
    return (
        f"runner pid {info.identity.pid} (Tether {info.version}, "
        f"protocols {info.oldest} to {info.protocol})"
    )
