"""MCP clients: their stored configuration, their live connections, their tools.

The database holds each client's configuration with the values of ``env`` and
``headers``, and its ``url``, sealed by the key box (the row keeps the URL's shown form);
this service is the only place they are opened, to start a connection. Every change of
configuration replaces the client's connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from tether import late_imports
from tether.errors import Conflict, Invalid, NotFound, TetherError, Unavailable
from tether.mcp.seams import ServerWrapper, Timing
from tether.mcp.spec import (
    STORED,
    McpClientInfo,
    McpClientSpec,
    McpClientUpdate,
    McpToolInfo,
    check_key,
    masked,
)
from tether.security.keybox import KeyBox
from tether.security.secret_text import MASK, shown_url
from tether.store.mcp import McpClientRepository
from tether.store.records import McpClientRecord
from tether.tools.base import Tool

if TYPE_CHECKING:
    from tether.mcp.connection import McpConnection

log = logging.getLogger(__name__)

_SECRET_FIELDS = ("env", "headers")


class McpError(TetherError):
    """Base of the MCP configuration errors; each also has the kind the API maps."""


class McpClientNotFound(McpError, NotFound):
    def __init__(self, key: str) -> None:
        super().__init__(f"MCP client '{key}' not found")


class McpClientExists(McpError, Conflict):
    def __init__(self, key: str) -> None:
        super().__init__(f"MCP client '{key}' already exists. Use PUT to update.")


class McpInvalid(McpError, Invalid):
    """A key or configuration the service refuses (the message names the field)."""


class McpUnavailable(McpError, Unavailable):
    """The server could not be asked (not connected)."""


class McpUnreadable(McpError, Conflict):
    """A stored client this server cannot read (its secrets sealed with another key, or
    a configuration no longer valid): listed as failed, never connected; it can only be
    deleted (and added again)."""

    def __init__(self, key: str, why: str) -> None:
        self.why = why
        super().__init__(
            f"MCP client '{key}' cannot be read on this server: {why}; delete it and add it again"
        )


class McpService:
    """CRUD over client configurations, and the connections they describe."""

    def __init__(
        self,
        repo: McpClientRepository,
        keybox: KeyBox,
        *,
        workspace: Path,
        state_dir: Path,
        default_timeout: float,
        timing: Timing | None = None,
        wrap_server: ServerWrapper | None = None,
    ) -> None:
        self._repo = repo
        self._keybox = keybox
        self._workspace = workspace
        self._state_dir = state_dir
        self._default_timeout = default_timeout
        self._timing = timing or Timing()
        # Puts stdio servers in the sandbox (None: they run as Tether's children).
        self._wrap_server = wrap_server
        self._connections: dict[str, McpConnection] = {}
        self._tools: dict[str, tuple[Tool, McpConnection, str]] = {}
        self._lock = asyncio.Lock()

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Connect every enabled client: start-up waits for the MCP SDK's import (in a
        worker thread) if there is one, not for the connections."""
        self._state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        records = await self._repo.list()
        # Left by clients deleted before a delete removed them (earlier versions).
        kept = {self._stderr_path(r.key) for r in records}
        for path in self._state_dir.glob("*.stderr.log"):
            if path not in kept:
                path.unlink(missing_ok=True)
        if records:
            await _load_client_sdk()
        for record in records:
            try:
                spec = self._spec_of(record)
            except McpUnreadable as exc:
                log.warning("MCP client %r is not connected: %s", record.key, exc.why)
                continue
            if record.spec.get("url") != _listed_url(spec.url):
                # Stored by a version that kept the URL in plain text: sealed now.
                await self._repo.reseal(self._record(record.key, spec), record)
            self._connect(record.key, spec)

    async def close(self) -> None:
        """Disconnect every client (stdio servers end with their transports)."""
        await asyncio.gather(*(c.close() for c in self._connections.values()))
        self._connections.clear()
        self._tools.clear()

    def _connect(self, key: str, spec: McpClientSpec) -> None:
        from tether.mcp.connection import McpConnection  # loaded by _load_client_sdk

        conn = McpConnection(
            key,
            spec,
            workspace=self._workspace,
            stderr_path=self._stderr_path(key),
            timing=self._timing,
            on_tools_changed=self._rebuild_tools,
            wrap_server=self._wrap_server,
        )
        self._connections[key] = conn
        conn.start()
        self._rebuild_tools()

    def _stderr_path(self, key: str) -> Path:
        return self._state_dir / f"{key}.stderr.log"

    async def _disconnect(self, key: str) -> None:
        conn = self._connections.pop(key, None)
        if conn is not None:
            await conn.close()
        self._rebuild_tools()

    # ----------------------------------------------------------------- tools

    def tools(self) -> list[Tool]:
        """The tools of every ready client that its allow-list lets through."""
        return [tool for tool, _conn, _name in self._tools.values()]

    def annotations_of(self, name: str) -> dict[str, object] | None:
        """What an MCP tool declares about itself (``{}`` if nothing); None if ``name`` is
        not an MCP tool."""
        entry = self._tools.get(name)
        if entry is None:
            return None
        _tool, conn, tool_name = entry
        for listed in conn.tools:
            if listed.name == tool_name and listed.annotations is not None:
                return listed.annotations.model_dump(by_alias=True, exclude_none=True)
        return {}

    def _rebuild_tools(self) -> None:
        tools: dict[str, tuple[Tool, McpConnection, str]] = {}
        if not self._connections:
            self._tools = tools
            return
        from tether.mcp.tools import as_tether_tool  # loaded by _load_client_sdk

        for conn in self._connections.values():
            if conn.status != "ready":
                continue
            for listed in conn.tools:
                if listed.name in conn.unusable:
                    continue
                if conn.spec.tools is None or listed.name in conn.spec.tools:
                    tool = as_tether_tool(conn, listed, self._default_timeout)
                    tools[tool.name] = (tool, conn, listed.name)
        self._tools = tools

    # ----------------------------------------------------------------- configuration

    async def list_clients(self) -> list[McpClientInfo]:
        return [self._listed(r) for r in await self._repo.list()]

    async def get_client(self, key: str) -> McpClientInfo:
        return self._listed(await self._stored(key))

    def _listed(self, record: McpClientRecord) -> McpClientInfo:
        try:
            return self._info(record.key, self._spec_of(record))
        except McpUnreadable as exc:
            return _unreadable_info(record, str(exc))

    async def create(self, key: str, spec: McpClientSpec) -> McpClientInfo:
        problem = check_key(key)
        if problem:
            raise McpInvalid(problem)
        await _load_client_sdk()  # before the write: nothing stored that cannot connect
        async with self._lock:
            if not await self._repo.insert(self._record(key, spec)):
                raise McpClientExists(key)
            self._connect(key, spec)
        return self._info(key, spec)

    async def update(self, key: str, changes: McpClientUpdate) -> McpClientInfo:
        async with self._lock:
            spec = _apply(changes, await self._load(key))
            return await self._replace(key, spec)

    async def toggle(self, key: str) -> McpClientInfo:
        async with self._lock:
            spec = await self._load(key)
            return await self._replace(key, spec.model_copy(update={"enabled": not spec.enabled}))

    async def delete(self, key: str) -> dict[str, str]:
        async with self._lock:
            if not await self._repo.delete(key):
                raise McpClientNotFound(key)
            await self._disconnect(key)
            # The server's stderr, masked but still what it said, goes with the client.
            self._stderr_path(key).unlink(missing_ok=True)
        return {"message": f"MCP client '{key}' deleted successfully"}

    async def list_tools(self, key: str) -> list[McpToolInfo]:
        """The server's tools with their allow-list state ([] while disabled)."""
        spec = await self._load(key)
        if not spec.enabled:
            return []
        conn = self._connections.get(key)
        if conn is None or await conn.wait_settled(self._timing.connect_timeout) != "ready":
            if conn is None:
                detail = "not connected"
            else:  # no error yet: still connecting when the wait ran out
                detail = conn.error or (
                    f"still connecting after {self._timing.connect_timeout:g} s "
                    "(the server has not finished its start)"
                )
            raise McpUnavailable(f"Failed to query tools from MCP server: {detail}")
        return [
            McpToolInfo(
                name=t.name,
                description=t.description or "",
                enabled=spec.tools is None or t.name in spec.tools,
                input_schema=t.input_schema,
                unusable=conn.unusable.get(t.name),
            )
            for t in conn.tools
        ]

    async def set_allow_list(self, key: str, tools: list[str] | None) -> list[McpToolInfo]:
        async with self._lock:
            spec = await self._load(key)
            await self._replace(key, spec.model_copy(update={"tools": tools}))
        try:
            return await self.list_tools(key)
        except McpUnavailable:
            return []

    # ----------------------------------------------------------------- helpers

    async def _replace(self, key: str, spec: McpClientSpec) -> McpClientInfo:
        await _load_client_sdk()  # before the write, as in create
        if not await self._repo.replace(self._record(key, spec)):
            raise McpClientNotFound(key)
        conn = self._connections.get(key)
        if conn is not None and _same_connection(conn.spec, spec):
            # Its name, description or allow-list: the connection, and the calls in
            # flight over it, go on (a new description ended them with an error).
            conn.spec = spec
            self._rebuild_tools()
        else:
            await self._disconnect(key)
            self._connect(key, spec)
        return self._info(key, spec)

    async def _load(self, key: str) -> McpClientSpec:
        return self._spec_of(await self._stored(key))

    async def _stored(self, key: str) -> McpClientRecord:
        record = await self._repo.get(key)
        if record is None:
            raise McpClientNotFound(key)
        return record

    def _record(self, key: str, spec: McpClientSpec) -> McpClientRecord:
        secrets: dict[str, object] = {f: getattr(spec, f) for f in _SECRET_FIELDS}
        public = spec.model_dump(exclude=set(_SECRET_FIELDS))
        public["secret_names"] = {f: sorted(getattr(spec, f)) for f in _SECRET_FIELDS}
        if spec.url:
            secrets["url"] = spec.url
            public["url"] = _listed_url(spec.url)
        sealed = self._keybox.seal(json.dumps(secrets)) if any(secrets.values()) else None
        return McpClientRecord(key=key, spec=public, secrets_encrypted=sealed)

    def _spec_of(self, record: McpClientRecord) -> McpClientSpec:
        """The stored client, secrets opened; McpUnreadable if this server cannot."""
        try:
            return self._opened(record)
        except ValidationError as exc:
            said = _first_problem(exc)
            raise McpUnreadable(
                record.key, f"its stored configuration no longer holds ({said})"
            ) from None
        except ValueError:
            # Most often a server with another key than the one that sealed it: a second
            # TETHER_HOME on the same database, or a lost secret.key.
            raise McpUnreadable(
                record.key,
                "its secrets were sealed with another key than this server's (servers "
                "sharing a database must share TETHER_SECRET_KEY)",
            ) from None

    def _opened(self, record: McpClientRecord) -> McpClientSpec:
        public = dict(record.spec)
        public.pop("secret_names", None)
        secrets = (
            json.loads(self._keybox.open(record.secrets_encrypted))
            if record.secrets_encrypted
            else {}
        )
        # A row from before URLs were sealed holds the URL itself.
        public["url"] = secrets.get("url", public.get("url", ""))
        return McpClientSpec.model_validate(
            public | {f: secrets.get(f, {}) for f in _SECRET_FIELDS}, context=STORED
        )

    def _info(self, key: str, spec: McpClientSpec) -> McpClientInfo:
        conn = self._connections.get(key)
        status = conn.status if conn is not None else "disabled"
        if not spec.enabled:
            status = "disabled"
        tool_count = sum(1 for _t, c, _n in self._tools.values() if c is conn) if conn else 0
        fields = spec.model_dump() | {f: masked(getattr(spec, f)) for f in _SECRET_FIELDS}
        fields["url"] = _listed_url(spec.url)
        return McpClientInfo(
            key=key,
            status=status,
            error=conn.error if conn is not None else None,
            tool_count=tool_count,
            sandboxed=conn.sandboxed if conn is not None else None,
            **fields,
        )


#: What a change of leaves a client's connection as it is.
_NOT_THE_CONNECTION = {"name", "description", "tools"}


def _same_connection(old: McpClientSpec, new: McpClientSpec) -> bool:
    """Whether ``new`` connects as ``old`` does (differing at most in what is shown and
    in which tools are offered)."""
    return old.model_dump(exclude=_NOT_THE_CONNECTION) == new.model_dump(
        exclude=_NOT_THE_CONNECTION
    )


def _listed_url(url: str) -> str:
    """How a client's URL is stored in the open and shown ("" for a stdio client)."""
    return shown_url(url) if url else ""


def _unreadable_info(record: McpClientRecord, error: str) -> McpClientInfo:
    """A client this server cannot read, shown from what is stored in the open: failed,
    saying why, its secrets by name only."""
    public = dict(record.spec)
    names = public.pop("secret_names", None) or {}
    try:
        url = _listed_url(str(public.get("url") or ""))
    except ValueError:  # too broken to show even its host
        url = ""
    shown = public | {f: dict.fromkeys(names.get(f, ()), MASK) for f in _SECRET_FIELDS}
    state = {"key": record.key, "status": "failed", "error": error}
    try:
        return McpClientInfo.model_validate(shown | {"url": url} | state)
    except ValidationError:
        return McpClientInfo.model_validate({"name": record.key[:200]} | state)


async def _load_client_sdk() -> None:
    """The MCP client SDK (about 0.4 s, 15 MB), when a client is first configured."""
    await late_imports.load("tether.mcp.tools")


def _apply(changes: McpClientUpdate, spec: McpClientSpec) -> McpClientSpec:
    """The updated spec, or McpInvalid naming the first field that does not hold."""
    try:
        return changes.applied_to(spec)
    except ValidationError as exc:
        raise McpInvalid(_first_problem(exc)) from None
    except ValueError as exc:
        raise McpInvalid(str(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    """The first error of ``exc`` as ``field: message`` (``client`` for the whole)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "client"
    return f"{where}: {str(first.get('msg', 'invalid')).removeprefix('Value error, ')}"
