"""Tether as an MCP server, at ``/mcp`` (streamable HTTP), for other agents.

Its shell is Tether's governed shell: each ``execute_shell_command`` is a tool call like
the model's (same gate, approvals that wait for a person, same coordinator, listed under
``/api/tool-calls``), its output is sent live as progress notifications, and the client
cancelling the request kills the whole process tree. The perimeter guards ``/mcp`` with
the same bearer token and Host checks as ``/api``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import AfterValidator, Field
from starlette.routing import BaseRoute

from tether import __version__
from tether.agent.calls import run_tool_call
from tether.config import Settings
from tether.mcp.mount import PATH
from tether.services import Services
from tether.session_ids import routable
from tether.store.records import OutputChunk
from tether.store.tables import SESSION_ID_CHARS
from tether.toolcalls.call import MCP_CLIENT_AGENT, CallInfo, Invocation
from tether.toolcalls.errors import ToolCallConflict, ToolCallNotFound
from tether.toolcalls.ids import new_call_id
from tether.waits import unless_set, within

DEFAULT_SESSION = "mcp:shell"
AGENT_ID = MCP_CLIENT_AGENT  # never moved to the background: the client waits for it
SHELL_TOOL = "execute_shell_command"


#: A session id as the HTTP API takes it: a longer one's approvals could never
#: be answered there.
SessionId = Annotated[
    str, Field(min_length=1, max_length=SESSION_ID_CHARS), AfterValidator(routable)
]


class _Progress:
    """Forwards a call's output and approval waits to the MCP client, in order."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._count = 0
        self._pump = asyncio.ensure_future(self._send_all())

    # CallObserver
    def started(self, info: CallInfo) -> None:
        self.say(f"[tether] tool call {info.tool_call_id} in session {info.session_id}\n")

    def output(self, call_id: str, chunk: OutputChunk) -> None:
        self.say(chunk.text)

    def ended(self, info: CallInfo) -> None:
        pass

    # TurnEvents
    def emit(self, event: dict[str, Any]) -> None:
        if event.get("type") == "approval_requested":
            request_id = (event.get("approval") or {}).get("request_id", "?")
            self.say(
                f"[tether] waiting for a person to approve this call "
                f"(request {request_id}; the console or /api/approval)\n"
            )

    def say(self, text: str) -> None:
        self._queue.put_nowait(text)

    async def _send_all(self) -> None:
        while (text := await self._queue.get()) is not None:
            self._count += 1
            with contextlib.suppress(Exception):  # the client may be gone; the call goes on
                await self._ctx.report_progress(self._count, None, text)

    async def close(self) -> None:
        self._queue.put_nowait(None)
        with contextlib.suppress(BaseException):
            await within(self._pump, 5)


def build_endpoint(services_of: Callable[[], Services]) -> MCPServer[Any]:
    """The MCP server with Tether's tools. The services are built by the app's start-up,
    after the routes exist, so each call asks for them."""
    server: MCPServer[Any] = MCPServer(
        "tether",
        version=__version__,
        instructions=(
            "Tether's supervised shell: commands are checked by its governance (some wait "
            "for a person to approve), run in its workspace, and can be listed and "
            "cancelled. Output arrives as progress notifications while a command runs."
        ),
    )

    @server.tool(name=SHELL_TOOL, annotations=ToolAnnotations(destructiveHint=True))
    async def execute_shell_command(
        command: str,
        ctx: Context,
        timeout: float | None = None,  # noqa: ASYNC109 (the shell tool's argument name)
        cwd: str | None = None,
        session_id: SessionId = DEFAULT_SESSION,
    ) -> str:
        """Run a shell command in Tether's workspace under its governance and deadlines.

        Its output streams as progress notifications; cancelling the request kills the
        command's whole process tree. ``session_id`` groups calls for list/cancel."""
        services = services_of()
        arguments: dict[str, Any] = {"command": command}
        if timeout is not None:
            arguments["timeout"] = timeout
        if cwd is not None:
            arguments["cwd"] = cwd
        inv = Invocation(new_call_id(), session_id, None, AGENT_ID, SHELL_TOOL, arguments)
        level = await services.tasks.resolve_level(session_id, None)
        progress = _Progress(ctx)
        try:
            # A server asked to exit answers now rather than hold its exit until its
            # grace runs out: the call goes on (a detaching exit) or is stopped.
            outcome = await unless_set(
                services.exiting,
                run_tool_call(
                    inv,
                    services.tools,
                    services.gate,
                    services.coordinator,
                    level,
                    progress,
                    progress,
                ),
            )
        finally:
            await progress.close()
        if outcome is None:
            raise ToolError(await _left_at_exit(services, inv))
        if outcome.end_state not in ("success", None):
            raise ToolError(outcome.model_text)
        return outcome.model_text

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def list_tool_calls(session_id: SessionId = DEFAULT_SESSION) -> str:
        """The tool calls in flight in a session, as JSON."""
        calls = await services_of().calls.list_live(session_id)
        return json.dumps([asdict(i) for i in calls])

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def get_tool_call_output(
        tool_call_id: str, session_id: SessionId = DEFAULT_SESSION
    ) -> str:
        """The output of a call so far (or all of it, once it ended)."""
        try:
            output = await services_of().calls.output(session_id, tool_call_id)
        except ToolCallNotFound:
            raise ToolError(f"no tool call {tool_call_id!r} in session {session_id!r}") from None
        return output.text

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    async def cancel_tool_call(
        tool_call_id: str, session_id: SessionId = DEFAULT_SESSION, force: bool = False
    ) -> str:
        """Cancel a running call: SIGTERM to its whole tree, SIGKILL after a grace (at
        once with ``force``)."""
        try:
            await services_of().calls.cancel(session_id, tool_call_id, force)
        except ToolCallNotFound:
            raise ToolError(f"no tool call {tool_call_id!r} in session {session_id!r}") from None
        except ToolCallConflict as exc:
            raise ToolError(str(exc)) from None
        return f"cancel requested for {tool_call_id}"

    return server


async def _left_at_exit(services: Services, inv: Invocation) -> str:
    """What a client whose call was cut short by the server's exit is told: where the
    call stands, and how to reach it once a server is back."""
    where = f"tool call {inv.call_id} in session {inv.session_id}"
    try:
        info = await services.calls.info(inv.session_id, inv.call_id)
    except ToolCallNotFound:
        return "Tether is shutting down; the command was not run."
    if info.status in ("running", "offloaded"):
        return (
            f"Tether is restarting; the command goes on as {where}: read its output with "
            "get_tool_call_output once the server is back (list_tool_calls lists it while "
            "it runs)."
        )
    if info.status == "awaiting_approval":
        return (
            f"Tether is restarting before anyone answered the approval of {where}; the next "
            "start denies it. Ask again once the server is back."
        )
    return f"Tether is shutting down; {where} was stopped ({info.end_state})."


def endpoint_routes(server: MCPServer[Any], settings: Settings) -> list[BaseRoute]:
    """The route serving ``/mcp``. Host, Origin and token checks are the perimeter's, so
    the SDK's own DNS-rebinding check (loopback names only) is not doubled here. Open
    sessions are bounded (each holds memory until it ends or idles out)."""
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_sessions=settings.mcp_max_sessions,
        session_idle_timeout=settings.mcp_session_idle_seconds,
    )
    return list(app.routes)


@asynccontextmanager
async def serving(server: MCPServer[Any]) -> AsyncIterator[None]:
    """Run the endpoint's session manager for the application's lifetime."""
    async with server.session_manager.run():
        yield
