"""The application factory: mounts the routers and runs the services for the lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from tether import __version__, loop_errors
from tether.api import (
    approvals,
    chats,
    cluster,
    console_chat,
    cron,
    errors,
    governance,
    health,
    mcp_clients,
    providers,
    toolcalls,
    webhooks,
)
from tether.config import Settings
from tether.keeper import home_lock
from tether.keeper.startup import leave_keeper
from tether.llm.provider_service import ModelFactory
from tether.mcp.mount import LazyEndpoint
from tether.scheduler.clock import Clock
from tether.security.perimeter import Perimeter, PerimeterPolicy, allowed_host_names
from tether.security.token import resolve_token
from tether.services import Services
from tether.startup import start_services
from tether.web.routes import mount_console


def create_app(
    settings: Settings,
    factory: ModelFactory | None = None,
    clock: Clock | None = None,
    *,
    settle_heap: bool = False,
) -> Any:
    """The ASGI application: the FastAPI app behind the perimeter middleware.

    ``clock`` (tests) replaces the real one for the cron scheduler. ``settle_heap`` (the
    ``tether serve`` process, which runs one app for its whole life): exempt what start-up
    built from later garbage collections (see heap.py)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop_errors.install(asyncio.get_running_loop())
        # One server per home: a second one would adopt, reap and resume the same calls.
        lock = home_lock.hold(settings.home)
        try:
            async with _serving(app):
                yield
        finally:
            home_lock.release(lock)

    # With the keeper and TETHER_ON_SHUTDOWN=detach, calls and their tasks (and the cron
    # runs waiting on them) are left running and unfinished at an exit, for the next
    # start to adopt and resume.
    detach = settings.detaches_at_exit

    def begin_exit() -> None:
        """The server was asked to exit (its first SIGINT or SIGTERM): from now on a
        turn or cron run cancelled treats its calls as this exit will, even if the
        lifespan's shutdown never runs (see cli/signalled_server.py). Sets flags only."""
        services = getattr(app.state, "services", None)
        if services is not None:
            services.cron.scheduler.begin_shutdown(detach)
            _treat_calls_as_exiting(services, detach)
            # The one thing not a flag: the loop sets it, when this handler has returned.
            app.state.loop.call_soon_threadsafe(services.exiting.set)

    @asynccontextmanager
    async def _serving(app: FastAPI) -> AsyncIterator[None]:
        services = await start_services(
            settings, factory, clock=clock, settle_heap=settle_heap, join=True
        )
        app.state.loop = asyncio.get_running_loop()
        app.state.services = services
        if services.bus is not None:
            services.bus.start()
        services.webhooks.start()
        services.cron.scheduler.start()
        await services.mcp.start()
        try:
            async with mcp_endpoint.serving():
                yield
        finally:
            services.exiting.set()
            # No new cron runs; the runs in progress stop their turns unless detached.
            await services.cron.scheduler.shutdown(detach)
            # Turns first (their calls are recorded as stopped by the shutdown), then
            # whatever still runs in the background.
            _treat_calls_as_exiting(services, detach)
            await services.tasks.shutdown(detach)
            await services.coordinator.shutdown()
            if services.bus is not None:
                await services.bus.close()
            await services.mcp.close()
            if services.keeper is not None:
                await leave_keeper(services.keeper)
            await services.sandbox.close()
            # Last: what the shutdown itself notified is queued for the next start.
            await services.webhooks.shutdown()
            await services.lease.stop()
            await services.store.db.close()
            if services.store.owner is not None:
                # Everything this server started has stopped, or, detached, is left
                # for the next start to adopt: its lock file, left unlocked, is what
                # proves to that start that these rows are a dead owner's.
                services.store.owner.release(left_unfinished=detach)

    # No /docs or /redoc: FastAPI's pages load unpinned scripts from a CDN, on the
    # origin whose cookie drives the agent. The schema stays at /openapi.json.
    app = FastAPI(
        title="Tether", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.begin_exit = begin_exit
    mcp_endpoint = LazyEndpoint(lambda: app.state.services, settings)
    app.router.routes.append(mcp_endpoint.route())
    errors.install(app)
    for module in (
        health,
        providers,
        console_chat,
        chats,
        toolcalls,
        approvals,
        governance,
        cron,
        mcp_clients,
        webhooks,
        cluster,
    ):
        app.include_router(module.router)
    token = (
        None
        if settings.no_auth
        else resolve_token(
            settings.token.get_secret_value() if settings.token else None, settings.home
        )
    )
    mount_console(app, token)
    policy = PerimeterPolicy(
        token=token,
        allowed_hosts=allowed_host_names(settings.host, settings.allowed_hosts),
        max_body_bytes=settings.max_body_bytes,
    )
    return Perimeter(app, policy)


def begin_exit(served: Perimeter) -> None:
    """Tell the application ``create_app`` made that the server was asked to exit (at
    its first SIGINT or SIGTERM; see cli/signalled_server.py)."""
    app = served.app
    assert isinstance(app, FastAPI)
    app.state.begin_exit()


def _treat_calls_as_exiting(services: Services, detach: bool) -> None:
    """From now on a call stopped with its turn is recorded as this exit leaves it: with
    ``detach``, running calls and requests awaiting approval are left for the next start
    (adopted; denied as after a crash), else recorded stopped by the shutdown."""
    services.coordinator.begin_shutdown(detach)
    services.approvals.detaching = detach
