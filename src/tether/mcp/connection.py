"""One configured MCP server: its session while connected, its live status, its restarts.

A supervisor task owns the transport and the SDK's session for their whole life (the
SDK's context managers must be left by the task that entered them). It connects, lists
the tools, then watches the connection: a failed ping or a call that finds the
connection closed ends the session, and the supervisor connects again after a back-off
that grows to a cap. Calls come from other tasks through :meth:`McpConnection.call`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from tether.mcp import sdk_logs
from tether.mcp.errlog import masked_errlog
from tether.mcp.seams import ServerWrapper, Timing, WrappedServer
from tether.mcp.spec import McpClientSpec, Status, offered_name_problem
from tether.security.secret_text import masked_text
from tether.waits import event_within, within

log = logging.getLogger(__name__)
sdk_logs.install()

LogSink = Callable[[str], None]

_STDERR_TAIL_BYTES = 2000


class McpConnectionLost(RuntimeError):
    """The server went away while a call was waiting for it."""


class McpConnection:
    """A live connection to one MCP server, reconnected for as long as it is enabled."""

    def __init__(
        self,
        key: str,
        spec: McpClientSpec,
        *,
        workspace: Path,
        stderr_path: Path,
        timing: Timing,
        on_tools_changed: Callable[[], None],
        wrap_server: ServerWrapper | None = None,
    ) -> None:
        self.key = key
        self.spec = spec
        self.status: Status = "connecting" if spec.enabled else "disabled"
        self.error: str | None = None
        self.tools: list[types.Tool] = []
        # The listed tools the model cannot be offered, each with why (see
        # spec.offered_name_problem): left out of the turn, shown on the tool list.
        self.unusable: dict[str, str] = {}
        # Whether the stdio server now running is inside the sandbox (None: none runs).
        self.sandboxed: bool | None = None
        self._wrap_server = wrap_server
        self._workspace = workspace
        self._stderr_path = stderr_path
        self._timing = timing
        self._on_tools_changed = on_tools_changed
        self._session: ClientSession | None = None
        self._lost = asyncio.Event()
        self._refresh = asyncio.Event()
        # Set whenever a connection attempt settles (ready or failed).
        self._settled = asyncio.Event()
        self._log_sinks: set[LogSink] = set()
        self._supervisor: asyncio.Task[None] | None = None
        # The supervisor's own scope: a close cancels through it (see close).
        self._scope: anyio.CancelScope | None = None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin connecting (and reconnecting) in the background."""
        if self.spec.enabled and self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"mcp:{self.key}")

    async def close(self) -> None:
        """Disconnect for good (the stdio server process ends with its transport).

        The supervisor is cancelled through its anyio scope, not with a bare
        ``Task.cancel()``: the SDK's transports end their servers in shielded anyio
        scopes, which a bare cancel does not respect. One that landed while a stdio
        transport was ending an attempt cut its shutdown short: the server was never
        stopped, its stdout reader waited on it, and the close with it (one close in
        ten, for a server that never answered)."""
        if self._supervisor is not None:
            if self._scope is not None:
                self._scope.cancel()
            else:  # not started yet: nothing of the SDK's runs in it
                self._supervisor.cancel()
            with contextlib.suppress(BaseException):
                await self._supervisor
            self._supervisor = None
        self._session = None
        self.status = "disabled"

    async def wait_settled(self, seconds: float) -> Status:
        """The status once the attempt under way is ready or has failed (or time is up)."""
        await event_within(self._settled, seconds)
        return self.status

    async def _supervise(self) -> None:
        with anyio.CancelScope() as self._scope:
            await self._keep_connected()

    async def _keep_connected(self) -> None:
        sdk_logs.CLIENT.set(self.key)  # this task's, and the transport tasks' it starts
        delay = self._timing.backoff_first
        while True:
            self.status = "connecting"
            self._settled.clear()
            try:
                await self._connect_once()  # returns only by raising
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # anyio raises groups; any failure means retry
                if _being_cancelled():
                    # A close came while the transport was ending a failed attempt, and
                    # its exit raised the failure instead of the cancel: this loop would
                    # go on for ever, and the close wait on it (a DELETE, the shutdown).
                    raise asyncio.CancelledError from exc
                if self._session is not None:
                    # A session was up (the connection had been ready) and is lost: the
                    # back-off starts over, so a server that crashes once a day does
                    # not wait a minute each time.
                    delay = self._timing.backoff_first
                self.status = "failed"
                self.error = self._describe_failure(exc)
                self._settled.set()
                log.warning(
                    "MCP client %s failed (next attempt in %g s): %s",
                    self.key,
                    delay,
                    _first_line(self.error),
                )
            finally:
                self._session = None
            self._on_tools_changed()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._timing.backoff_max)

    async def _connect_once(self) -> None:
        self._lost.clear()
        wrapped = await self._wrapped_command()
        self.sandboxed = wrapped is not None if self.spec.transport == "stdio" else None
        try:
            await self._session_over(wrapped)
        finally:
            self.sandboxed = None
            if wrapped is not None:
                await asyncio.to_thread(wrapped.release)
        raise McpConnectionLost("the connection to the server was lost")

    async def _wrapped_command(self) -> WrappedServer | None:
        """The stdio server's command inside the sandbox, when it applies."""
        spec = self.spec
        if spec.transport != "stdio" or not spec.sandbox or self._wrap_server is None:
            return None
        command = [spec.command, *spec.args]
        return await self._wrap_server(command, self._cwd(), spec.sandbox_network)

    def _cwd(self) -> Path:
        return Path(self.spec.cwd) if self.spec.cwd else self._workspace

    async def _session_over(self, wrapped: WrappedServer | None) -> None:
        async with (
            self._transport(wrapped) as streams,
            ClientSession(
                streams[0],
                streams[1],
                logging_callback=self._on_log,
                message_handler=self._on_message,
            ) as session,
        ):
            await within(session.initialize(), self._timing.connect_timeout)
            await self._list_tools(session)
            self._session = session
            self.status, self.error = "ready", None
            self._on_tools_changed()
            self._settled.set()
            log.info("MCP client %s ready with %d tool(s)", self.key, len(self.tools))
            await self._watch(session)

    def _transport(self, wrapped: WrappedServer | None) -> AbstractAsyncContextManager[Any]:
        spec = self.spec
        if spec.transport == "stdio":
            argv = wrapped.argv if wrapped is not None else [spec.command, *spec.args]
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], env=spec.env or None, cwd=str(self._cwd())
            )
            return _stdio(params, self._stderr_path, self._secrets())
        if spec.transport == "sse":
            return sse_client(spec.url, headers=spec.headers, timeout=self._timing.connect_timeout)
        return _streamable_http(spec)

    async def _watch(self, session: ClientSession) -> None:
        """Return when the connection is lost; re-list the tools when they change."""
        while True:
            lost = asyncio.ensure_future(self._lost.wait())
            refresh = asyncio.ensure_future(self._refresh.wait())
            try:
                await asyncio.wait(
                    {lost, refresh},
                    timeout=self._timing.ping_interval,
                    return_when="FIRST_COMPLETED",
                )
            finally:
                lost.cancel()
                refresh.cancel()
            if self._lost.is_set():
                return
            if self._refresh.is_set():
                self._refresh.clear()
                await self._list_tools(session)
                self._on_tools_changed()
                continue
            try:
                await within(session.send_ping(), self._timing.connect_timeout)
            except (MCPError, TimeoutError):
                return

    async def _list_tools(self, session: ClientSession) -> None:
        listed = await within(session.list_tools(), self._timing.connect_timeout)
        self.tools = list(listed.tools)
        problems = {t.name: offered_name_problem(self.key, t.name) for t in self.tools}
        self.unusable = {name: why for name, why in problems.items() if why is not None}
        if self.unusable:
            log.warning(
                "MCP client %s: %d tool(s) not offered to the model, their names being "
                "ones providers refuse (see GET /api/mcp/tools/%s)",
                self.key,
                len(self.unusable),
                self.key,
            )

    def _describe_failure(self, exc: BaseException) -> str:
        """What went wrong, with the server's last stderr lines; the spec's secrets (its
        header and env values, the URL past its host) masked wherever they are quoted
        (the text is shown by the API and logged)."""
        text = _first_line(_innermost(exc)) or type(exc).__name__
        tail = _tail(self._stderr_path)
        text = f"{text}\n--- stderr (last lines) ---\n{tail}" if tail else text
        return masked_text(text, self._secrets(), urls=[self.spec.url])

    def _secrets(self) -> list[str]:
        return [*self.spec.headers.values(), *self.spec.env.values()]

    # ----------------------------------------------------------------- notifications

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = params.data
        line = f"[{params.level}] {data}" if isinstance(data, str) else f"[{params.level}] {data!r}"
        for sink in list(self._log_sinks):
            sink(line)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh.set()

    # ----------------------------------------------------------------- calls

    async def call(
        self, tool: str, arguments: dict[str, Any], progress: ProgressFnT, logs: LogSink
    ) -> types.CallToolResult:
        """Call one tool; cancelling the awaiting task sends ``notifications/cancelled``."""
        session = self._session
        if session is None or self.status != "ready":
            raise McpConnectionLost(f"MCP server {self.key!r} is not connected ({self.status})")
        self._log_sinks.add(logs)
        try:
            result = await session.call_tool(tool, arguments, progress_callback=progress)
        except MCPError as exc:
            if "closed" in str(exc).lower():
                self._lost.set()
                raise McpConnectionLost(f"MCP server {self.key!r} closed the connection") from exc
            raise
        finally:
            self._log_sinks.discard(logs)
        assert isinstance(result, types.CallToolResult)
        return result


@asynccontextmanager
async def _stdio(
    params: StdioServerParameters, stderr_path: Path, secrets: list[str]
) -> AsyncIterator[Any]:
    """The server's stdio, its stderr kept in ``stderr_path`` with ``secrets`` masked."""
    async with (
        masked_errlog(stderr_path, secrets) as errlog,
        stdio_client(params, errlog=errlog) as streams,
    ):
        yield streams


@asynccontextmanager
async def _streamable_http(spec: McpClientSpec) -> AsyncIterator[Any]:
    timeout = spec.http_timeout or 30.0
    async with (
        httpx2.AsyncClient(
            headers=spec.headers, timeout=httpx2.Timeout(timeout, read=max(timeout, 300.0))
        ) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


def _innermost(exc: BaseException) -> str:
    """The message of the first leaf exception (anyio wraps failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _tail(path: Path) -> str:
    """The last whole lines of ``path``, up to _STDERR_TAIL_BYTES: a line the cut would
    halve is left out (half a secret would pass the masking)."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            start = max(0, f.tell() - _STDERR_TAIL_BYTES)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    if start > 0:
        data = data.partition(b"\n")[2]
    return data.decode("utf-8", "replace").strip()


def _being_cancelled() -> bool:
    """Whether the running task has been asked to stop (a cancel not yet taken back)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
