"""The schema, as SQLAlchemy Core tables.

Timestamps are epoch seconds (floats) so they compare and serialise cheaply and mean
the same on SQLite and Postgres.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

#: The longest session id stored (and so the longest any route or tool takes).
SESSION_ID_CHARS = 512

providers = sa.Table(
    "providers",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("base_url", sa.Text, nullable=False),
    # Fernet ciphertext; never returned by the API.
    sa.Column("api_key_encrypted", sa.Text, nullable=True),
    sa.Column("chat_model", sa.String(200), nullable=True),
    sa.Column("models", sa.JSON, nullable=False),
    sa.Column("is_custom", sa.Boolean, nullable=False, default=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

app_settings = sa.Table(
    "app_settings",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.JSON, nullable=False),
)

chat_sessions = sa.Table(
    "chat_sessions",
    metadata,
    sa.Column("id", sa.String(SESSION_ID_CHARS), primary_key=True),
    sa.Column("user_id", sa.String(512), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("title", sa.Text, nullable=True),
    sa.Column("approval_level", sa.String(16), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # deny | wait; NULL: the server's policy for unattended turns.
    sa.Column("when_unattended", sa.String(8), nullable=True),
    # {network, memory_mb, max_processes, cpu_seconds}, each optional.
    sa.Column("sandbox", sa.JSON, nullable=True),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("task_id", sa.String(64), nullable=True),
    # user | assistant | tool | notification
    sa.Column("kind", sa.String(32), nullable=False),
    # The message as the model sees it (OpenAI chat format).
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("user_id", sa.String(512), nullable=False),
    # pending | running | finished
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("trigger", sa.String(32), nullable=False),
    sa.Column("approval_level", sa.String(16), nullable=True),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("finished_at", sa.Float, nullable=True),
    # Times the task was taken up again after a restart (a turn is retried once).
    sa.Column("resumes", sa.Integer, nullable=False, server_default="0"),
    # The server that runs it (store/owners.py); NULL on rows from before owners.
    sa.Column("owner", sa.String(64), nullable=True),
    # deny | wait: the policy the task was started with (a cron job's), kept for a
    # resume; NULL: the session's, else the server's.
    sa.Column("when_unattended", sa.String(8), nullable=True),
)

tool_calls = sa.Table(
    "tool_calls",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("task_id", sa.String(64), nullable=True),
    sa.Column("agent_id", sa.String(128), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("arguments", sa.JSON, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("end_state", sa.String(16), nullable=True),
    sa.Column("end_reason", sa.Text, nullable=True),
    sa.Column("force_cancelled", sa.Boolean, nullable=False, default=False),
    sa.Column("offload_reason", sa.String(32), nullable=True),
    sa.Column("max_timeout", sa.Float, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    # Process group of a running shell call, so a restart can reap what a crash left.
    sa.Column("pgid", sa.Integer, nullable=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
    # {peak_memory_bytes, cpu_seconds, processes_peak, killed_by} once measured.
    sa.Column("resources", sa.JSON, nullable=True),
    # The server whose processes these are (store/owners.py); NULL on rows from before.
    sa.Column("owner", sa.String(64), nullable=True),
    # While it runs: its kill and offload deadlines (epoch seconds; NULL: none), kept so
    # that every node can show them, not only the one running it.
    sa.Column("kill_at", sa.Float, nullable=True),
    sa.Column("offload_at", sa.Float, nullable=True),
)

tool_output = sa.Table(
    "tool_output",
    metadata,
    sa.Column("tool_call_id", sa.String(128), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("stream", sa.String(8), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("tool_call_id", sa.String(128), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("delivered_at", sa.Float, nullable=True),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("request_id", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("tool_call_id", sa.String(128), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("arguments", sa.JSON, nullable=False),
    sa.Column("level", sa.String(16), nullable=False),
    # [{rule_id, severity, description}]
    sa.Column("findings", sa.JSON, nullable=False),
    # pending | approved | denied
    sa.Column("status", sa.String(16), nullable=False, index=True),
    # user | timeout | cancel | restart | node_lost
    sa.Column("decided_by", sa.String(32), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("decided_at", sa.Float, nullable=True),
    # The call's similar pattern (words, null for the wildcard), shown before deciding.
    sa.Column("similar_pattern", sa.JSON, nullable=True),
)

governance_audit = sa.Table(
    "governance_audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=False, index=True),
    sa.Column("tool_call_id", sa.String(128), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("arguments", sa.JSON, nullable=False),
    sa.Column("level", sa.String(16), nullable=False),
    sa.Column("findings", sa.JSON, nullable=False),
    # What the policy said: allow | ask | deny.
    sa.Column("verdict", sa.String(8), nullable=False),
    # What happened in the end: allowed | denied.
    sa.Column("outcome", sa.String(8), nullable=False),
    # policy | user | timeout | cancel | restart
    sa.Column("decided_by", sa.String(32), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    # The remembered rule that decided, when one did.
    sa.Column("rule_id", sa.String(64), nullable=True),
    # {sandboxed, network, memory_mb, max_processes, cpu_seconds} for shell calls.
    sa.Column("sandbox", sa.JSON, nullable=True),
)

# A person's decision kept for later calls: for one session, or always (session_id NULL).
remembered_rules = sa.Table(
    "remembered_rules",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    # approve | deny
    sa.Column("action", sa.String(8), nullable=False),
    # exact | similar
    sa.Column("scope", sa.String(8), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    # exact: the canonical call text; similar: JSON words (null = wildcard).
    sa.Column("match", sa.JSON, nullable=False),
    sa.Column("pattern", sa.Text, nullable=False),
    # Rule ids of the findings the person saw; an approval covers no others.
    sa.Column("finding_ids", sa.JSON, nullable=False),
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), nullable=True, index=True),
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    # The URL as it is listed (scheme and host: address.shown); the URL itself is sealed
    # below, as a URL may be its receiver's credential. Rows from before hold it here in
    # plain text until a server seals it (WebhookService.load).
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", sa.JSON, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    # Fernet ciphertext of the signing secret; never returned after creation.
    sa.Column("secret_encrypted", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # Fernet ciphertext of the URL; never returned.
    sa.Column("url_encrypted", sa.Text, nullable=True),
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    # The Standard Webhooks message id (webhook-id header): the same on every attempt.
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("webhook_id", sa.String(64), nullable=False, index=True),
    sa.Column("event", sa.String(64), nullable=False),
    # The exact body sent on every attempt.
    sa.Column("body", sa.Text, nullable=False),
    # pending | delivered | failed
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
)

webhook_attempts = sa.Table(
    "webhook_attempts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("delivery_id", sa.String(64), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("duration_seconds", sa.Float, nullable=False),
    # The receiver's HTTP status, or NULL when there was no answer (see error).
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
)

cron_jobs = sa.Table(
    "cron_jobs",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    # The validated JobSpec as JSON, in QwenPaw's shape (id and dispatch filled in).
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    # Bumped by every change; a scheduler claims a tick only at the revision it planned
    # from, which is what makes each tick fire once across processes.
    sa.Column("revision", sa.Integer, nullable=False),
    # When the current schedule came into force (creation, a schedule edit, a resume):
    # cron ticks at or before it are never due.
    sa.Column("schedule_since", sa.Float, nullable=False),
    # The scheduled time of the last tick handled (run or skipped).
    sa.Column("last_fire", sa.Float, nullable=True),
    sa.Column("next_run_at", sa.Float, nullable=True, index=True),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

cron_runs = sa.Table(
    "cron_runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("job_id", sa.String(128), nullable=False, index=True),
    # scheduled | manual
    sa.Column("trigger", sa.String(16), nullable=False),
    # The tick this run is for; NULL for manual runs (NULLs never collide in the index).
    sa.Column("scheduled_for", sa.Float, nullable=True),
    # running | success | error | timeout | skipped
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
    sa.Column("task_id", sa.String(64), nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.UniqueConstraint("job_id", "scheduled_for", name="uq_cron_runs_tick"),
)

# The node whose turn a session is in (several nodes: one turn per session at a time,
# cluster-wide). A claim is free to take once the process that made it is gone (its
# lease removed or taken back by a new run of its node: SessionTurnRepository.try_claim).
session_turns = sa.Table(
    "session_turns",
    metadata,
    sa.Column("session_id", sa.String(SESSION_ID_CHARS), primary_key=True),
    sa.Column("task_id", sa.String(64), nullable=False),
    sa.Column("node_id", sa.String(255), nullable=False),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("claimed_at", sa.Float, nullable=False),
)

mcp_clients = sa.Table(
    "mcp_clients",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    # The client's configuration with the values of env and headers left out, and its
    # URL by scheme, host and port.
    sa.Column("spec", sa.JSON, nullable=False),
    # Fernet ciphertext of {"env": {...}, "headers": {...}, "url": ...}; never returned
    # by the API.
    sa.Column("secrets_encrypted", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

nodes = sa.Table(
    "nodes",
    metadata,
    # TETHER_NODE_ID (default hostname:port).
    sa.Column("id", sa.String(255), primary_key=True),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    # The lease: a node whose renewal is older than the lease time is dead to the others.
    sa.Column("renewed_at", sa.Float, nullable=False),
    # What the node reported at its last renewal, so any node can show every node's load.
    sa.Column("live_calls", sa.Integer, nullable=False),
    sa.Column("running_tasks", sa.Integer, nullable=False),
    # The owner id (store/owners.py) of the process holding the lease: the ``owner`` of
    # the calls and tasks it runs. NULL on leases taken before it was recorded.
    sa.Column("owner", sa.String(64), nullable=True),
)
