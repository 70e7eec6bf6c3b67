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
from pathlib import Path
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
# A header's name as HTTP defines it (RFC 9110's token).
_HTTP_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Seconds below which an HTTP timeout cannot let anything through (1e-9 was taken).
MIN_HTTP_TIMEOUT = 1.0
#: Bounds of an allow-list (MCP bounds a tool's name at 128 characters).
MAX_ALLOWED_TOOLS = 1000
MAX_TOOL_NAME = 128
# How much of an unusable name a message quotes (a server can name a tool with 100 kB).
_QUOTED_NAME = 80
# QwenPaw's routes put these words after /api/mcp/, so a client cannot be named so.
_RESERVED_KEYS = frozenset({"tools", "toggle", "policy", "access-principals"})


#: What a client's view (GET) holds besides its configuration: Tether's live state and
#: QwenPaw's OAuth and access summaries. A client that sends back the view it read
#: (read-modify-write, or a copy under a new key) sends these too; QwenPaw ignores them,
#: and so does Tether. Any other field it does not know is still refused.
SHOWN_ONLY = frozenset(
    {"key", "status", "error", "tool_count", "sandboxed", "oauth_status", "access_summary"}
)


def _without_shown_only(data: object) -> object:
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k not in SHOWN_ONLY}
    return data


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
    """The whole configuration of one client (create, and what is stored).

    A value that could never work (a NUL in a command, a header name HTTP has no room
    for, a port past 65535) is refused where it is given, naming the field and never
    quoting a secret. Not for a stored spec (``STORED``): one an earlier version took
    is loaded as it is, its failure told when it connects.
    """

    @model_validator(mode="before")
    @classmethod
    def _shown_only(cls, data: object) -> object:
        return _without_shown_only(data)

    @field_validator("env", "headers")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or len(name) > 200 or any(c in name for c in "\0\r\n="):
                raise ValueError(f"invalid name {name!r}")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """Surrounding whitespace is not part of a header's value (a pasted key often
        ends with a newline); what HTTP cannot send is refused, without quoting the
        value (it is a secret)."""
        if info.context == STORED:
            return value
        value = {name: v.strip(" \t\r\n") for name, v in value.items()}
        for name, v in value.items():
            if not _HTTP_TOKEN.fullmatch(name):
                raise ValueError(
                    f"the name {name!r} is not an HTTP header name (ASCII letters, digits "
                    "and !#$%&'*+-.^_`|~ only)"
                )
            if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in v):
                raise ValueError(f"the value of {name!r} holds a control character")
            if not v.isascii():
                raise ValueError(f"the value of {name!r} is not ASCII, which HTTP sends")
        return value

    @field_validator("env")
    @classmethod
    def _env_values(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.context == STORED:
            return value
        for name, v in value.items():
            problem = _os_text_problem(name) or _os_text_problem(v)
            if problem:
                raise ValueError(f"{name!r} or its value {problem}")
        return value

    @field_validator("name", "command", "cwd")
    @classmethod
    def _text(cls, value: str, info: ValidationInfo) -> str:
        if info.context == STORED:
            return value
        problem = _os_text_problem(value)
        if info.field_name == "name" and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            problem = "holds a control character"
        if problem:
            raise ValueError(problem)
        if info.field_name == "cwd" and value and not Path(value).is_absolute():
            raise ValueError("must be an absolute path (empty: the workspace)")
        return value

    @field_validator("args")
    @classmethod
    def _args(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if info.context == STORED:
            return value
        for i, arg in enumerate(value):
            problem = _os_text_problem(arg)
            if problem:
                raise ValueError(f"argument {i} {problem}")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        """Checked without quoting it (a URL may carry a token)."""
        if info.context == STORED or not value:
            return value
        if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError("holds a space or a control character (percent-encode it)")
        try:
            urlparse(value).port  # noqa: B018 (it raises for a port past 65535)
        except ValueError:
            raise ValueError("its host or port is not valid") from None
        return value

    @field_validator("http_timeout")
    @classmethod
    def _timeout(cls, value: float | None, info: ValidationInfo) -> float | None:
        if info.context != STORED and value is not None and value < MIN_HTTP_TIMEOUT:
            raise ValueError(f"at least {MIN_HTTP_TIMEOUT:g} second (or null: the default)")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        return value if info.context == STORED else checked_allow_list(value)

    @model_validator(mode="after")
    def _endpoint(self) -> Self:
        if self.transport == "stdio":
            if not self.command.strip():
                raise ValueError("command: required for the stdio transport")
        else:
            try:
                parsed = urlparse(self.url)
            except ValueError as exc:  # "Invalid IPv6 URL"
                raise ValueError(f"url: {exc}") from None
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f"url: an http(s) URL is required for {self.transport}")
        return self

    def kill_deadline(self, default: float) -> float:
        """Seconds a call of this client may run before it is cancelled."""
        return self.http_timeout or default


class McpClientUpdate(BaseModel):
    """A partial update: only the fields present change (``tools: null`` clears it)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _shown_only(cls, data: object) -> object:
        return _without_shown_only(data)

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

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str] | None) -> list[str] | None:
        return checked_allow_list(value)


def checked_allow_list(tools: list[str] | None) -> list[str] | None:
    """``tools`` if it can be an allow-list: at most MAX_ALLOWED_TOOLS names of 1 to
    MAX_TOOL_NAME characters (MCP's bound for a tool name)."""
    if tools is None:
        return None
    if len(tools) > MAX_ALLOWED_TOOLS:
        raise ValueError(f"at most {MAX_ALLOWED_TOOLS} tool names")
    for i, name in enumerate(tools):
        if not 1 <= len(name) <= MAX_TOOL_NAME:
            raise ValueError(f"name {i} is not 1 to {MAX_TOOL_NAME} characters")
    return tools


def _os_text_problem(text: str) -> str | None:
    """Why ``text`` cannot be passed to a process (argument, environment, path), or None."""
    if "\0" in text:
        return "holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    return None


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
