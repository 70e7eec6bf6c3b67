"""Secrets end to end: a provider key and the API token never leave the server, and the
shell tool's environment carries no credential."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import temporary_server, wait_for
from helpers import MockLLMHandler
from mcp_support import FIXTURE
from security_support import (
    call_ids,
    finished_task,
    mock_model,
    output_text,
    submit,
    tool_reply,
    use_model,
)

from database_support import on_postgresql, stored_rows

pytestmark = [pytest.mark.integration, pytest.mark.p0]

PROVIDER_KEY = f"sk-canary-{uuid.uuid4().hex}"
ENV_SECRETS = {
    "GITHUB_TOKEN": f"gh-canary-{uuid.uuid4().hex}",
    "ANTHROPIC_API_KEY": f"ant-canary-{uuid.uuid4().hex}",
    "CORP_VAULT_ADDR": f"vault-canary-{uuid.uuid4().hex}",
}


class KeyRecordingHandler(MockLLMHandler):
    """The fake model, also noting the Authorization header each request carried."""

    def do_POST(self) -> None:
        srv: Any = self.server
        srv.auth_headers = [*getattr(srv, "auth_headers", []), self.headers.get("Authorization")]
        super().do_POST()


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with temporary_server(
        "secrets",
        TETHER_LOG_LEVEL="debug",
        TETHER_SECRET_ENV_VARS='["CORP_VAULT_ADDR"]',
        **ENV_SECRETS,
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def turn(server: Any) -> Iterator[dict[str, Any]]:
    """One turn in which the model runs `env` through the shell tool."""
    with mock_model(KeyRecordingHandler) as (model, url):
        use_model(server, url, api_key=PROVIDER_KEY)
        model.replies = [tool_reply(("execute_shell_command", {"command": "env"})), {"text": "ok"}]
        task_id, session_id = submit(server, "show me the environment")
        task = finished_task(server, task_id)
        assert task["result"]["status"] == "completed", task
        (call_id,) = call_ids(server, session_id)
        yield {
            "task_id": task_id,
            "session_id": session_id,
            "call_id": call_id,
            "model": model,
        }


def test_the_key_reaches_the_provider(turn: dict[str, Any]) -> None:
    # Proves the canary below is a real, used key, not one the server never touched.
    assert f"Bearer {PROVIDER_KEY}" in turn["model"].auth_headers


def test_shell_environment_is_scrubbed(server: Any, turn: dict[str, Any]) -> None:
    env = output_text(server, turn["session_id"], turn["call_id"])
    assert "PATH=" in env
    names = {line.split("=", 1)[0] for line in env.splitlines() if "=" in line}
    assert {n for n in names if n.startswith("TETHER_")} <= {"TETHER_TOOL_CALL"}
    for secret in (server.token, PROVIDER_KEY, *ENV_SECRETS.values()):
        assert secret not in env
    for name in ENV_SECRETS:
        assert name not in names
    # Nor did the model get any of it.
    sent = repr(turn["model"].requests)
    for secret in (server.token, PROVIDER_KEY, *ENV_SECRETS.values()):
        assert secret not in sent


def _get_routes(server: Any, ids: dict[str, str]) -> list[str]:
    schema = server.api_request("GET", "/openapi.json").json()
    paths = []
    for template, item in schema["paths"].items():
        if "get" not in item:
            continue
        path = template
        for name, value in ids.items():
            path = path.replace("{" + name + "}", value)
        assert "{" not in path, f"no id known for {template}"
        paths.append(path)
    return paths


def _a_cron_job(server: Any) -> str:
    body = {
        "name": "secrets probe",
        "enabled": False,
        "schedule": {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"},
        "task_type": "text",
        "text": "hello",
    }
    resp = server.api_request("POST", "/api/cron/jobs", json=body)
    assert resp.status_code in (200, 201), resp.text
    return str(resp.json()["id"])


def _an_mcp_client(server: Any, state: Path) -> str:
    """A connected MCP client whose environment holds the secrets (sealed, never shown)."""
    spec = {
        "name": "secrets probe",
        "command": sys.executable,
        "args": [FIXTURE, "stdio", str(state)],
        "env": ENV_SECRETS,
    }
    resp = server.api_request("POST", "/api/mcp", json={"client_key": "probe", "client": spec})
    assert resp.status_code == 201, resp.text
    wait_for(
        lambda: server.api_request("GET", "/api/mcp/probe").json()["status"] == "ready",
        what="the MCP client to connect",
    )
    return "probe"


def _a_webhook(server: Any) -> tuple[str, str]:
    """(id, signing secret) of a webhook to a closed loopback port (nothing is delivered)."""
    body = {"url": "http://127.0.0.1:9/hook", "events": ["task.finished"]}
    resp = server.api_request("POST", "/api/webhooks", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"]), str(resp.json()["secret"])


def test_no_response_carries_a_secret(server: Any, turn: dict[str, Any], tmp_path: Path) -> None:
    webhook_id, signing_secret = _a_webhook(server)
    ids = {
        "client_key": _an_mcp_client(server, tmp_path),
        "webhook_id": webhook_id,
        "job_id": _a_cron_job(server),
        "session_id": turn["session_id"],
        "chat_id": turn["session_id"],
        "task_id": turn["task_id"],
        "tool_call_id": turn["call_id"],
        "provider_id": "integ-mock-llm",
    }
    routes = _get_routes(server, ids)
    assert len(routes) >= 10
    for path in routes:
        resp = server.api_request("GET", path, timeout=15)
        assert resp.status_code == 200, (path, resp.status_code, resp.text[:200])
        for secret in (PROVIDER_KEY, server.token, signing_secret, *ENV_SECRETS.values()):
            assert secret not in resp.text, path
            assert secret not in str(resp.headers), path
    # The connection test uses the stored key; its answer must not show it.
    with mock_model(KeyRecordingHandler) as (_, url):
        use_model(server, url, api_key=PROVIDER_KEY)
        probe = server.api_request("POST", "/api/models/integ-mock-llm/test")
    assert probe.status_code == 200, probe.text
    assert PROVIDER_KEY not in probe.text
    providers = server.api_request("GET", "/api/models").json()
    mock = next(p for p in providers if p["id"] == "integ-mock-llm")
    assert mock["has_api_key"] is True


STORED_TABLES = ("providers", "messages", "tool_calls", "tool_output", "mcp_clients")


def test_no_file_under_home_holds_a_secret(server: Any, turn: dict[str, Any]) -> None:
    """Database (and its WAL), logs, key file: the plaintext is nowhere on disk."""
    server.stop()  # flush the database and the log
    try:
        files = [p for p in server.home.rglob("*") if p.is_file()]
        assert server.log_path in files
        if on_postgresql():
            files_text = [stored_rows(server.home, t) for t in STORED_TABLES]
            for secret in (PROVIDER_KEY, server.token, *ENV_SECRETS.values()):
                assert not any(secret in text for text in files_text), secret[:12]
        else:
            assert any(p.name.startswith("tether.db") for p in files)
        log = server.log_path.read_text(errors="replace")
        assert " DEBUG tether." in log  # the server really ran at debug level
        for path in files:
            data = path.read_bytes()
            for secret in (PROVIDER_KEY, server.token, *ENV_SECRETS.values()):
                assert secret.encode() not in data, f"{secret[:12]}... found in {path.name}"
    finally:
        server.start()
