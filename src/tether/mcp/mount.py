"""``/mcp`` routed from the first start, built on its first request.

The endpoint needs the MCP SDK's server (about 0.4 s to import and 15 MB), which a
Tether that no agent reaches over MCP never uses. So the route is mounted at once, and
the first request imports the SDK in a worker thread, builds the endpoint and starts its
session manager in a task of its own that lives until the application stops. Requests
that arrive meanwhile wait for that one start; a start that failed is tried again by
the next request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from tether import late_imports
from tether.config import Settings

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from tether.services import Services

log = logging.getLogger(__name__)

PATH = "/mcp"


class LazyEndpoint:
    """The ``/mcp`` route; :meth:`serving` spans the application's lifetime."""

    def __init__(self, services_of: Callable[[], Services], settings: Settings) -> None:
        self._services_of = services_of
        self._settings = settings
        self._start: asyncio.Future[BaseRoute] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def route(self) -> Route:
        return Route(PATH, endpoint=self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._start is None:
            self._start = asyncio.ensure_future(self._build())
            self._start.add_done_callback(self._forget_failed)
        # Shielded: a client that gives up does not cancel the start others wait on.
        route = await asyncio.shield(self._start)
        await route.handle(scope, receive, send)

    def _forget_failed(self, start: asyncio.Future[BaseRoute]) -> None:
        if start.cancelled() or start.exception() is not None:
            self._start = None

    async def _build(self) -> BaseRoute:
        await late_imports.load("tether.mcp.endpoint")
        from tether.mcp import endpoint  # imported just above, off the loop

        if self._stop.is_set():
            raise RuntimeError("the server is stopping")
        server = endpoint.build_endpoint(self._services_of)
        (route,) = endpoint.endpoint_routes(server, self._settings)
        started = asyncio.get_running_loop().create_future()
        self._runner = asyncio.create_task(self._run(server, started))
        await asyncio.wait({started, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            await self._runner  # raises what stopped the session manager
        return route

    async def _run(self, server: MCPServer[Any], started: asyncio.Future[None]) -> None:
        from tether.mcp import endpoint

        async with endpoint.serving(server):
            started.set_result(None)
            await self._stop.wait()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Stop the endpoint's session manager, if a request started it, on the way out."""
        try:
            yield
        finally:
            self._stop.set()
            if self._start is not None and not self._start.done():
                self._start.cancel()  # a build under way starts nothing now
                await asyncio.wait({self._start})
            if self._runner is not None:
                try:
                    await self._runner
                except Exception:
                    log.exception("the /mcp endpoint's session manager failed")
