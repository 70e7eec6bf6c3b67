"""Plain records the repositories return, so callers never touch SQLAlchemy rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProviderRecord:
    id: str
    name: str
    base_url: str
    api_key_encrypted: str | None
    chat_model: str | None
    models: list[dict[str, str]]
    is_custom: bool


@dataclass(frozen=True)
class SessionRecord:
    id: str
    user_id: str
    channel: str
    title: str | None
    approval_level: str | None
    created_at: float
    updated_at: float
    when_unattended: str | None = None
    # The session's sandbox settings (network, limits); None: the server's defaults.
    sandbox: dict[str, Any] | None = None


@dataclass(frozen=True)
class MessageRecord:
    id: int
    session_id: str
    task_id: str | None
    kind: str
    payload: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class TaskRecord:
    id: str
    session_id: str
    user_id: str
    status: str
    trigger: str
    approval_level: str | None
    result: dict[str, Any] | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    resumes: int = 0
    # The server that runs it (store/owners.py).
    owner: str | None = None
    # The unattended policy it was started with (None: the session's, else the server's).
    when_unattended: str | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    id: str
    session_id: str
    task_id: str | None
    agent_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str
    end_state: str | None
    end_reason: str | None
    force_cancelled: bool
    offload_reason: str | None
    max_timeout: float | None
    result: str | None
    started_at: float
    finished_at: float | None
    resources: dict[str, Any] | None = None
    # The server that runs it (store/owners.py); set by the repository on insert.
    owner: str | None = None
    # Deadlines while it runs, epoch seconds (None: none).
    kill_at: float | None = None
    offload_at: float | None = None


@dataclass(frozen=True)
class OutputChunk:
    seq: int
    stream: str
    text: str


@dataclass(frozen=True)
class DeliveryRecord:
    id: int
    session_id: str
    tool_call_id: str
    content: str
    created_at: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApprovalRecord:
    """A request for a person's decision on one tool call."""

    request_id: str
    session_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    level: str
    findings: list[dict[str, str]]
    status: str
    decided_by: str | None
    reason: str | None
    created_at: float
    expires_at: float
    decided_at: float | None
    similar_pattern: list[str | None] | None = None


@dataclass(frozen=True)
class AuditEntry:
    """One governance decision on one tool call, as it is written."""

    session_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    level: str
    findings: list[dict[str, str]]
    verdict: str
    outcome: str
    decided_by: str
    reason: str | None
    request_id: str | None
    # The remembered rule that decided, when one did.
    rule_id: str | None
    # How a shell call would run: sandboxed or not, network, limits (None: not a shell call).
    sandbox: dict[str, Any] | None


@dataclass(frozen=True)
class AuditRecord(AuditEntry):
    """A stored decision, with its id and time."""

    id: int
    created_at: float


@dataclass(frozen=True)
class AuditQuery:
    """Filters of an audit export: [since, until) in epoch seconds, one session, one
    outcome (allowed | denied); None leaves a filter out."""

    since: float | None = None
    until: float | None = None
    session_id: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class RememberedRule:
    """A person's decision applied to later calls (see governance.memory)."""

    id: str
    action: str
    scope: str
    tool_name: str
    match: Any
    pattern: str
    finding_ids: list[str]
    session_id: str | None
    request_id: str | None
    created_at: float


@dataclass(frozen=True)
class WebhookRecord:
    id: str
    # As listed (address.shown); the URL itself is ``url_encrypted`` (None: a row from
    # before URLs were sealed, holding the URL here until it is).
    url: str
    events: list[str]
    description: str
    secret_encrypted: str
    created_at: float
    url_encrypted: str | None = None


@dataclass(frozen=True)
class WebhookDeliveryRecord:
    id: str
    webhook_id: str
    event: str
    body: str
    status: str
    attempts: int
    next_attempt_at: float | None
    created_at: float
    finished_at: float | None


@dataclass(frozen=True)
class WebhookAttemptRecord:
    delivery_id: str
    attempt: int
    started_at: float
    duration_seconds: float
    status_code: int | None
    error: str | None


@dataclass(frozen=True)
class CronJobRecord:
    id: str
    spec: dict[str, Any]
    enabled: bool
    revision: int
    schedule_since: float
    last_fire: float | None
    next_run_at: float | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class CronRunRecord:
    id: str
    job_id: str
    trigger: str
    scheduled_for: float | None
    status: str
    started_at: float
    finished_at: float | None
    task_id: str | None
    error: str | None


@dataclass(frozen=True)
class McpClientRecord:
    key: str
    spec: dict[str, Any]
    secrets_encrypted: str | None


@dataclass(frozen=True)
class NodeRecord:
    id: str
    version: str
    started_at: float
    renewed_at: float
    live_calls: int
    running_tasks: int
    #: The owner id of the process holding the lease (None: taken before it was recorded).
    owner: str | None = None
