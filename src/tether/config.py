"""Tether's settings: one object, read from the environment (prefix ``TETHER_``)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tether.governance.levels import parse_level
from tether.sandbox.limit_fields import CpuSeconds, MemoryMb, Processes
from tether.webhooks.egress import DEFAULT_DENIED, parse_networks


def _default_home() -> Path:
    return Path.home() / ".tether"


class Settings(BaseSettings):
    """Everything an operator can tune. Each field maps to ``TETHER_<NAME>``."""

    # Infinity and NaN are no number of seconds or bytes (an approval that could never
    # expire was listed with no expiry at all).
    model_config = SettingsConfigDict(env_prefix="TETHER_", extra="ignore", allow_inf_nan=False)

    home: Path = Field(default_factory=_default_home, description="State directory.")
    host: str = Field("127.0.0.1", description="Address `tether serve` binds to.")
    port: int = Field(8088, ge=0, le=65535, description="Port `tether serve` binds to.")
    token: SecretStr | None = Field(None, description="API bearer token; generated if unset.")
    no_auth: bool = Field(False, description="Run without a token (loopback binds only).")
    database_url: str | None = Field(
        None, description="SQLAlchemy async URL; default is SQLite under `home`."
    )
    node_id: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="This node's id in a cluster; default `hostname:port`.",
    )
    node_lease_seconds: float = Field(
        # With a renewal every fifth of it, a silent node is declared dead within 14.4 s.
        12.0,
        ge=1,
        description="A node that has not renewed its lease for this long is dead.",
    )
    redis_url: SecretStr | None = Field(
        None,
        description="Redis for several nodes (`redis://host:6379/0`): live output and "
        "requests between nodes. Unset: one node, no Redis.",
    )
    redis_prefix: str = Field(
        "tether",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Prefix of every Redis key this cluster uses (clusters may share a Redis).",
    )
    node_answer_seconds: float = Field(
        5.0, gt=0, description="How long a node waits for another to answer a routed request."
    )
    secret_key: SecretStr | None = Field(
        None,
        description="Fernet key sealing secrets at rest; set the same on every node of a "
        "cluster. Default: a key file in `home` (secret.key).",
    )
    workspace: Path | None = Field(
        None, description="Directory the file and shell tools work in; default `home/workspace`."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Extra Host header values accepted besides loopback."
    )
    default_approval_level: str = Field("auto", description="off | auto | smart | strict.")
    approval_timeout_seconds: float = Field(300.0, gt=0)
    when_unattended: Literal["deny", "wait"] | None = Field(
        None,
        description="When a call needs approval and nobody follows the turn: deny | wait. "
        "Unset: cron runs deny, other unattended turns wait.",
    )
    webhook_retry_first_seconds: float = Field(
        5.0, gt=0, description="Wait before a failed webhook delivery's first retry."
    )
    webhook_retry_max_seconds: float = Field(
        21_600.0, gt=0, description="Longest wait between retries (it doubles up to this)."
    )
    webhook_give_up_seconds: float = Field(
        86_400.0, gt=0, description="A delivery not made within this long is given up."
    )
    webhook_timeout_seconds: float = Field(10.0, gt=0, description="Per delivery attempt.")
    webhook_deny_networks: str = Field(
        DEFAULT_DENIED,
        description="Networks webhook deliveries may not reach (comma-separated; empty: "
        "none). Default: link-local, where clouds serve instance metadata.",
    )
    shell_default_timeout: float = Field(60.0, gt=0, description="Shell tool timeout (s).")
    shell_max_timeout: float = Field(3600.0, gt=0, description="Cap on a shell call's deadline.")
    mcp_call_timeout: float = Field(
        600.0, gt=0, description="Kill deadline of an MCP call whose client sets no http_timeout."
    )
    mcp_ping_interval: float = Field(
        5.0, gt=0, description="How often a connected MCP server is pinged to notice a loss."
    )
    mcp_max_sessions: int = Field(
        256,
        ge=1,
        description="MCP sessions clients may hold open on /mcp at once; one more is "
        "refused with 503 until one ends or idles out.",
    )
    mcp_session_idle_seconds: float = Field(
        1800.0, gt=0, description="An /mcp session with no request this long is closed."
    )
    offload_after_seconds: float | None = Field(
        None, gt=0, description="Move a running call to the background after this long."
    )
    cancel_grace_seconds: float = Field(2.0, ge=0, description="SIGTERM -> SIGKILL grace.")
    model_output_chars: int = Field(
        16_000, ge=1_000, description="Tool output sent to the model (head and tail kept)."
    )
    output_memory_bytes: int = Field(
        1_048_576, ge=4096, description="Per-call output kept in memory for live readers."
    )
    max_steps: int = Field(24, ge=1, description="Model calls per turn before giving up.")
    llm_max_retries: int = Field(
        2, ge=0, description="Retries of a model request the provider refused with 429 or 5xx."
    )
    llm_timeout_seconds: float = Field(
        120.0,
        gt=0,
        description="Longest wait for a model provider to connect, or between two pieces "
        "of its reply.",
    )
    llm_reply_deadline_seconds: float = Field(
        # 128k output tokens (the largest reply current models write) at 40 tokens a
        # second take 53 minutes: no real reply is cut, and a stream that never ends
        # (keep-alives, a byte now and then) holds its turn an hour at most.
        3600.0,
        ge=0,
        description="Longest one model reply may take in all, retries and their waits "
        "included (0: no limit).",
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest request body accepted (larger: 413)."
    )
    max_concurrent_tasks: int = Field(
        256, ge=1, description="Chat tasks running at once (more: 429)."
    )
    max_calls_per_session: int = Field(
        64, ge=1, description="Tool calls in flight per session (more: a tool error)."
    )
    max_calls_total: int = Field(
        2048, ge=1, description="Tool calls in flight on the server (more: a tool error)."
    )
    output_store_bytes: int = Field(
        16 * 1_048_576,
        ge=4096,
        description="Output stored per tool call; beyond it the rest is dropped, with a note.",
    )
    secret_env_vars: list[str] = Field(
        default_factory=list,
        description="Extra environment variable names the shell tool must never see "
        "(TETHER_*, and names with TOKEN, SECRET, PASSWORD, API_KEY, ... always are hidden).",
    )
    keeper: bool = Field(
        True,
        description="Run shell calls under the detached per-home runner, so they outlive "
        "the server (restart, upgrade, kill -9) and are adopted at the next start. "
        "0: they run as the server's children and end with it.",
    )
    on_shutdown: Literal["detach", "stop"] = Field(
        "detach",
        description="With the keeper: leave calls running at a graceful stop (detach) or "
        "stop them as without it (stop).",
    )
    keeper_idle_exit_seconds: float = Field(
        60.0,
        gt=0,
        description="A runner that has run no call and had no server connected for this "
        "long exits (a stop with no call running ends it at once).",
    )
    call_retention_days: float = Field(
        7.0, gt=0, description="Days the keeper's files of an ended call are kept."
    )

    sandbox: Literal["auto", "bwrap", "off"] = Field(
        "auto", description="Shell calls in bubblewrap: auto (when it works) | bwrap | off."
    )
    sandbox_network: Literal["none", "full"] = Field(
        "none", description="Network inside the sandbox for sessions that do not set it."
    )
    call_memory_mb: MemoryMb | None = Field(
        2048, description="Memory per shell call (MB; 0: no limit)."
    )
    call_max_processes: Processes | None = Field(
        512, description="Processes per shell call (reaching it ends the call; 0: no limit)."
    )
    call_cpu_seconds: CpuSeconds | None = Field(
        None, description="CPU seconds per shell call (unset or 0: no limit)."
    )

    @field_validator("call_memory_mb", "call_max_processes", "call_cpu_seconds", mode="before")
    @classmethod
    def _zero_lifts(cls, value: object) -> object:
        # 0 is no limit, as in a session's settings (the bounds then check the rest).
        return None if isinstance(value, int | float | str) and _is_zero(value) else value

    @field_validator("webhook_deny_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        parse_networks(value)
        return value

    @field_validator("default_approval_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        return parse_level(value)

    @property
    def detaches_at_exit(self) -> bool:
        """Whether a graceful stop leaves calls running and turns unfinished, for the
        next start to adopt and resume (the keeper with ``on_shutdown=detach``)."""
        return self.keeper and self.on_shutdown == "detach"

    @property
    def resolved_workspace(self) -> Path:
        """The workspace directory, defaulting to ``home/workspace``."""
        return self.workspace or self.home / "workspace"

    @property
    def resolved_node_id(self) -> str:
        """This node's id, defaulting to ``hostname:port``."""
        return self.node_id or f"{socket.gethostname()}:{self.port}"

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to a SQLite file under ``home``."""
        return self.database_url or f"sqlite+aiosqlite:///{self.home / 'tether.db'}"


def _is_zero(value: int | float | str) -> bool:
    try:
        return float(value) == 0
    except ValueError:
        return False
