"""An MCP client's configuration as the API takes and shows it (QwenPaw's shapes).

Values of ``env`` and ``headers`` are secrets as far as Tether knows (API keys travel
there): they are sealed at rest and shown back only as ``MASK``. So is the ``url`` of an
HTTP server (hosted servers put a token in its path or query), shown by scheme, host
and port (``https://mcp.example.com/…``). A client that sends ``MASK`` back for a name,
or the shown form of the URL, keeps the stored value, so a read-modify-write round trip
never erases a secret.
"""

from __future__ import annotations

import re
from typing import Literal, Self
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tether.security.secret_text import MASK, is_shown_url, shown_url

Transport = Literal["stdio", "streamable_http", "sse"]
Status = Literal["connecting", "ready", "failed", "disabled"]
SandboxNetwork = Literal["none", "full"]

#: The validation context of a spec read back from the store (see McpClientSpec).
STORED = {"stored": True}
# Tools reach the model as `<client_key>__<tool>`, so a key may not contain the separator.
TOOL_SEPARATOR = "__"
# What OpenAI-style providers take as a function's name: one tool named otherwise makes
# them refuse the whole request, so every turn. A key is at most 32 characters so that
# `key__tool` leaves a tool name 30; a longer key stored by an earlier version (64 were
# taken) still loads, its tools not offered when their names do not fit.
MODEL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
# How much of an unusable name a message quotes (a server can name a tool with 100 kB).
_QUOTED_NAME = 80
# QwenPaw's routes put these words after /api/mcp/, so a client cannot be named so.
_RESERVED_KEYS = frozenset({"tools", "toggle", "policy", "access-principals"})


def check_key(key: str) -> str | None:
    """Why ``key`` cannot name a client, or None when it can."""
    if not KEY_PATTERN.fullmatch(key):
        return "client_key: 1-32 letters, digits, '-' or '_', starting with a letter or digit"
    if TOOL_SEPARATOR in key:
        return f"client_key: must not contain {TOOL_SEPARATOR!r} (it separates key and tool)"
    if key.lower() in _RESERVED_KEYS:
        return f"client_key: {key!r} is reserved by the MCP routes"
    return None


def offered_name_problem(key: str, tool: str) -> str | None:
    """Why the model cannot be offered ``tool`` of client ``key`` under its name there
    (``key__tool``), or None when it can."""
    name = f"{key}{TOOL_SEPARATOR}{tool}"
    if MODEL_NAME_PATTERN.fullmatch(name):
        return None
    shown = name if len(name) <= _QUOTED_NAME else f"{name[:_QUOTED_NAME]}…"
    return (
        f"not offered to the model: its name there, {shown!r} ({len(name)} characters), "
        "is not 1-64 letters, digits, '_' or '-'"
    )


class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    enabled: bool = True
    transport: Transport = "stdio"
    url: str = Field(default="", max_length=2000)
    headers: dict[str, str] = Field(default_factory=dict)
    command: str = Field(default="", max_length=2000)
    args: list[str] = Field(default_factory=list, max_length=200)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str = Field(default="", max_length=2000)
    http_timeout: float | None = Field(default=None, gt=0, le=86_400)
    tools: list[str] | None = None
    # Tether's own: whether a stdio server runs in the sandbox (when it works here), and
    # its network there (None: TETHER_SANDBOX_NETWORK). HTTP clients ignore both.
    sandbox: bool = True
    sandbox_network: SandboxNetwork | None = None


class McpClientSpec(_Fields):
    """The whole configuration of one client (create, and what is stored)."""

    @field_validator("env", "headers")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or len(name) > 200 or any(c in name for c in "\0\r\n="):
                raise ValueError(f"invalid name {name!r}")
        return value

    @field_validator("headers")
    @classmethod
    def _header_values(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """Surrounding whitespace is not part of a header's value (a pasted key often
        ends with a newline); a control character left inside is refused, without
        quoting the value (it is a secret). Not for a stored spec (``STORED``): one an
        earlier version took is loaded as it is, its failure told when it connects."""
        if info.context == STORED:
            return value
        value = {name: v.strip(" \t\r\n") for name, v in value.items()}
        for name, v in value.items():
            if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in v):
                raise ValueError(f"the value of {name!r} holds a control character")
        return value

    @field_validator("env")
    @classmethod
    def _env_values(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.context == STORED:
            return value
        for name, v in value.items():
            if "\0" in v:
                raise ValueError(f"the value of {name!r} holds a NUL character")
        return value

    @model_validator(mode="after")
    def _endpoint(self) -> Self:
        if self.transport == "stdio":
            if not self.command.strip():
                raise ValueError("command: required for the stdio transport")
        else:
            parsed = urlparse(self.url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f"url: an http(s) URL is required for {self.transport}")
        return self

    def kill_deadline(self, default: float) -> float:
        """Seconds a call of this client may run before it is cancelled."""
        return self.http_timeout or default


class McpClientUpdate(BaseModel):
    """A partial update: only the fields present change (``tools: null`` clears it)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    enabled: bool | None = None
    transport: Transport | None = None
    url: str | None = Field(default=None, max_length=2000)
    headers: dict[str, str] | None = None
    command: str | None = Field(default=None, max_length=2000)
    args: list[str] | None = Field(default=None, max_length=200)
    env: dict[str, str] | None = None
    cwd: str | None = Field(default=None, max_length=2000)
    http_timeout: float | None = Field(default=None, gt=0, le=86_400)
    tools: list[str] | None = None
    sandbox: bool | None = None
    sandbox_network: SandboxNetwork | None = None

    def applied_to(self, spec: McpClientSpec) -> McpClientSpec:
        """The spec with these changes; masked secret values keep the stored ones."""
        changes = self.model_dump(exclude_unset=True)
        for field in ("env", "headers"):
            if changes.get(field) is not None:
                old = getattr(spec, field)
                unknown = [k for k, v in changes[field].items() if v == MASK and k not in old]
                if unknown:
                    raise ValueError(
                        f"{field}: {unknown[0]!r} has no stored value for {MASK!r} to keep; "
                        "send the value itself"
                    )
                changes[field] = {
                    k: (old[k] if v == MASK else v) for k, v in changes[field].items()
                }
        url = changes.get("url")
        if url is not None and spec.url and url == shown_url(spec.url):
            changes["url"] = spec.url
        elif url is not None and is_shown_url(url):
            raise ValueError(
                f"url: {url!r} is how a stored URL is shown, and not this client's: "
                "send the URL itself"
            )
        if changes.get("sandbox", False) is None:
            changes.pop("sandbox")
        if changes.get("http_timeout", 0) is None:
            changes.pop("http_timeout")  # as QwenPaw: once set, an update cannot clear it
        return McpClientSpec.model_validate(spec.model_dump() | changes)


class McpCreateRequest(BaseModel):
    """``POST /api/mcp``: the key and the client."""

    client_key: str
    client: McpClientSpec

    @model_validator(mode="after")
    def _no_mask(self) -> Self:
        for field in ("env", "headers"):
            named = [k for k, v in getattr(self.client, field).items() if v == MASK]
            if named:
                raise ValueError(
                    f"client.{field}: {named[0]!r} is {MASK!r}, which keeps a stored value "
                    "on an update; a new client has none: send the value itself"
                )
        if is_shown_url(self.client.url):
            raise ValueError(
                f"client.url: {self.client.url!r} is how a stored URL is shown; a new "
                "client has none: send the URL itself"
            )
        return self


class McpToolList(BaseModel):
    """``PUT /api/mcp/tools/{key}``: the allow-list, or null for every tool."""

    tools: list[str] | None = None


class McpToolInfo(BaseModel):
    name: str
    description: str = ""
    enabled: bool = True
    input_schema: dict[str, object] = Field(default_factory=dict)
    #: Tether's: why the model is not offered this tool whatever ``enabled`` says (its
    #: name there is one providers refuse); None when nothing stops it.
    unusable: str | None = None


class McpClientInfo(_Fields):
    """A client as the API shows it: secrets masked, live state added (Tether's fields)."""

    model_config = ConfigDict(extra="ignore")

    key: str
    status: Status
    error: str | None = None
    tool_count: int = 0
    # Whether the running stdio server is inside the sandbox (None: not a running stdio
    # server).
    sandboxed: bool | None = None


def masked(values: dict[str, str]) -> dict[str, str]:
    """The names with every value hidden."""
    return dict.fromkeys(values, MASK)
