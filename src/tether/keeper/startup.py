"""Starting the keeper with the server: find or start the runner, replace an idle
runner of an older protocol, and build the launcher."""

from __future__ import annotations

import logging

from tether.config import Settings
from tether.keeper import protocol
from tether.keeper.hub import KeeperHub
from tether.keeper.launcher import KeeperLauncher
from tether.sandbox.service import Sandbox

log = logging.getLogger(__name__)


async def start_keeper(settings: Settings, sandbox: Sandbox) -> KeeperLauncher:
    """The launcher over this home's runner (started detached if none runs); its calls
    run in ``sandbox``, under limits the runner applies."""
    hub = KeeperHub(settings.home)
    await hub.open()
    info = await hub.client.hello()
    if info.protocol != protocol.PROTOCOL:
        # Requests stay within what both know. Replacing it (``retire``, then a new
        # runner) is only safe once it runs no call; not done automatically yet.
        log.warning(
            "the runner (pid %d) speaks protocol %d, this server %d",
            info.identity.pid,
            info.protocol,
            protocol.PROTOCOL,
        )
    log.info("keeper: runner pid %d (Tether %s)", info.identity.pid, info.version)
    return KeeperLauncher(
        hub, settings.output_store_bytes, settings.cancel_grace_seconds, sandbox=sandbox
    )
