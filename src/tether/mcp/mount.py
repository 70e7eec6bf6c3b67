"""``/mcp`` routed from the first start, built on its first request.

The endpoint needs the MCP SDK's server (about 0.4 s to import and 15 MB), which a
Tether that no agent reaches over MCP never uses. So the route is mounted at once, and
the first request imports and builds the endpoint in a worker thread, then starts its
session manager in a task of its own that lives until the application stops. Requests
that arrive meanwhile wait for that one start.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from tether.services import Services

if TYPE_CHECKING:
    from types import ModuleType

PATH = "/mcp"


class LazyEndpoint:
    """The ``/mcp`` route; :meth:`serving` spans the application's lifetime."""

    def __init__(self, services_of: Callable[[], Services]) -> None:
        self._services_of = services_of
        self._start: asyncio.Future[BaseRoute] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def route(self) -> Route:
        return Route(PATH, endpoint=self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._start is None:
            self._start = asyncio.ensure_future(self._build())
        # Shielded: a client that gives up does not cancel the start others wait on.
        route = await asyncio.shield(self._start)
        await route.handle(scope, receive, send)

    async def _build(self) -> BaseRoute:
        module: ModuleType = await asyncio.to_thread(importlib.import_module, "tether.mcp.endpoint")
        server = module.build_endpoint(self._services_of)
        (route,) = module.endpoint_routes(server)
        running = asyncio.Event()
        self._runner = asyncio.create_task(self._run(module, server, running))
        ready = asyncio.ensure_future(running.wait())
        await asyncio.wait({ready, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if not running.is_set():
            ready.cancel()
            await self._runner  # raises what stopped the session manager
        return route  # type: ignore[no-any-return]

    async def _run(self, module: ModuleType, server: object, running: asyncio.Event) -> None:
        async with module.serving(server):
            running.set()
            await self._stop.wait()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Stop the endpoint's session manager, if a request started it, on the way out."""
        try:
            yield
        finally:
            self._stop.set()
            # A runner that ended early failed its start, and told the request then.
            if self._runner is not None and not self._runner.done():
                await self._runner
