"""QwenPaw 2.2.2 wire contract, route by route, written from QwenPaw's own routers.

Each test names the QwenPaw route it checks. Where Tether deliberately differs (see
docs/COMPATIBILITY.md) the test says so and checks Tether's answer instead.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from core_support import (
    Stack,
    chat_body,
    gated,
    new_session,
    open_gate,
    sse_events,
    stack_for_module,
)
from cron_support import wait_runs_finished
from governance_support import first_pending, shell, submit

pytestmark = pytest.mark.integration

PROVIDER_KEYS = {"id", "name", "base_url", "api_key", "chat_model", "models", "extra_models"}
CHAT_SPEC_KEYS = {
    "id",
    "name",
    "session_id",
    "user_id",
    "channel",
    "created_at",
    "updated_at",
    "meta",
    "status",
    "pinned",
    "archived",
    "source",
}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("contract")


@pytest.fixture(autouse=True)
def _no_leftover_replies(stack: Stack) -> None:
    # A test that stops a turn leaves its scripted replies unread; the next test must
    # not get them.
    stack.model.script()


def _iso(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() is not None, value
    return parsed


# ------------------------------------------------------------------ /api/models


def test_models_list_is_a_list_of_provider_info(stack: Stack) -> None:
    resp = stack.api("GET", "/api/models")
    assert resp.status_code == 200
    providers = resp.json()
    assert isinstance(providers, list) and providers
    for provider in providers:
        assert provider.keys() >= PROVIDER_KEYS
        assert provider["chat_model"] == "OpenAIChatModel"


def test_custom_provider_create_configure_delete(stack: Stack) -> None:
    body = {
        "id": "contract-p",
        "name": "Contract",
        "default_base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-contract-key",
        "models": [{"id": "m1", "name": "M1"}],
    }
    created = stack.api("POST", "/api/models/custom-providers", json=body)
    assert created.status_code == 201, created.text
    info = created.json()
    assert info["is_custom"] is True and info["extra_models"] == [{"id": "m1", "name": "M1"}]
    assert info["api_key"] == "******"  # masked, as QwenPaw masks it
    renamed = stack.api("PUT", "/api/models/contract-p/config", json={"name": "Renamed"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"
    missing = stack.api("PUT", "/api/models/nope/config", json={"api_key": "x"})
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Provider 'nope' not found"}
    deleted = stack.api("DELETE", "/api/models/custom-providers/contract-p")
    assert deleted.status_code == 200
    assert "contract-p" not in {p["id"] for p in deleted.json()}  # the remaining providers
    assert stack.api("DELETE", "/api/models/custom-providers/contract-p").status_code == 404


def test_provider_config_takes_the_qwenpaw_consoles_save(stack: Stack) -> None:
    """QwenPaw's console saves a provider with every field of its form, the ones Tether has
    no use for empty (``generate_kwargs: {}``, ``custom_headers: {}``): that is a save."""
    body = {
        "id": "console-save",
        "name": "Console",
        "default_base_url": "http://127.0.0.1:9/v1",
    }
    assert stack.api("POST", "/api/models/custom-providers", json=body).status_code == 201
    saved = stack.api(
        "PUT",
        "/api/models/console-save/config",
        json={
            "enabled": True,
            "api_key": "sk-console-save",
            "name": "Saved",
            "base_url": "http://127.0.0.1:9/v2",
            "chat_model": "OpenAIChatModel",
            "generate_kwargs": {},
            "custom_headers": {},
            "auth_mode": None,
        },
    )
    assert saved.status_code == 200, saved.text
    info = saved.json()
    assert (info["name"], info["base_url"], info["api_key"]) == (
        "Saved",
        "http://127.0.0.1:9/v2",
        "******",
    )
    # What Tether cannot honour is still refused, naming the field, rather than ignored.
    for field, value in (
        ("generate_kwargs", {"temperature": 0.2}),
        ("custom_headers", {"X-A": "b"}),
        ("auth_mode", "auth_token"),
        ("enabled", False),
    ):
        refused = stack.api("PUT", "/api/models/console-save/config", json={field: value})
        assert refused.status_code == 422, (field, refused.text)
        assert refused.json()["detail"][0]["loc"] == ["body", field]
    stack.api("DELETE", "/api/models/custom-providers/console-save")


def test_active_model_answers_active_llm_for_every_scope(stack: Stack) -> None:
    for query in ("", "?scope=effective", "?scope=global", "?scope=agent&agent_id=default"):
        resp = stack.api("GET", f"/api/models/active{query}")
        assert resp.status_code == 200, resp.text
        assert set(resp.json()) == {"active_llm", "effective_max_input_length"}
        assert resp.json()["active_llm"]["model"]
    no_agent = stack.api("GET", "/api/models/active?scope=agent")
    assert no_agent.status_code == 400
    assert no_agent.json() == {"detail": "agent_id is required when scope is 'agent'"}
    assert stack.api("GET", "/api/models/active?scope=team").status_code == 422


def test_provider_test_of_unknown_provider_is_404(stack: Stack) -> None:
    assert stack.api("POST", "/api/models/nope/test").status_code == 404


# ------------------------------------------------------------------ /api/console/chat


def test_chat_task_id_status_and_result(stack: Stack) -> None:
    session_id = new_session()
    resp = stack.api("POST", "/api/console/chat/task", json=chat_body("hello", session_id))
    assert resp.status_code == 200
    assert re.fullmatch(r"task-[0-9a-f]{12}", resp.json()["task_id"])
    assert resp.json()["timeout"] is None
    task = stack.wait_task(resp.json()["task_id"])
    assert task["status"] == "finished" and task["started_at"] > 0
    assert task["result"]["status"] == "completed"
    assert task["result"]["session_id"] == session_id


def test_unknown_task_is_404_with_qwenpaws_detail(stack: Stack) -> None:
    resp = stack.api("GET", "/api/console/chat/task/task-000000000000")
    assert resp.status_code == 404
    assert resp.json() == {"detail": "Task not found: task-000000000000"}


def test_task_timeout_is_accepted_and_enforced(stack: Stack) -> None:
    session_id = new_session()
    stack.model.script({"tool_calls": [shell("sleep 30")]}, {"text": "unreachable"})
    resp = stack.api("POST", "/api/console/chat/task", json=chat_body("go", session_id, timeout=1))
    assert resp.status_code == 200 and resp.json()["timeout"] == 1
    task = stack.wait_task(resp.json()["task_id"], timeout=20)
    assert task["result"]["status"] == "failed"
    assert "timeout" in task["result"]["error"]["message"]
    bad = stack.api("POST", "/api/console/chat/task", json=chat_body("go", session_id, timeout=0))
    assert bad.status_code == 422


def test_chat_stream_is_qwenpaws_runtime_protocol(stack: Stack) -> None:
    session_id = new_session()
    stack.model.script({"tool_calls": [shell("echo streamed")]}, {"text": "all done"})
    with stack.server._client.stream(
        "POST",
        "/api/console/chat",
        json=chat_body("go", session_id),
        headers={"Authorization": f"Bearer {stack.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        frames = [e.data for e in sse_events(resp.iter_lines())]
    assert [f["sequence_number"] for f in frames] == list(range(1, len(frames) + 1))
    assert [(f["object"], f["status"]) for f in frames[:2]] == [
        ("response", "created"),
        ("response", "in_progress"),
    ]
    final = frames[-1]
    assert (final["object"], final["status"], final["session_id"]) == (
        "response",
        "completed",
        session_id,
    )
    done = [(m["type"], m["role"]) for m in final["output"]]
    assert done == [
        ("plugin_call", "assistant"),
        ("plugin_call_output", "tool"),
        ("message", "assistant"),
    ]
    call, output, answer = (m["content"][0] for m in final["output"])
    assert call["data"]["name"] == "execute_shell_command"
    assert output["data"]["call_id"] == call["data"]["call_id"]
    assert "streamed" in output["data"]["output"]
    assert answer == {
        "object": "content",
        "type": "text",
        "delta": False,
        "index": 0,
        "text": "all done",
    }
    deltas = [f for f in frames if f["object"] == "content" and f["delta"] and f["type"] == "text"]
    assert "".join(f["text"] for f in deltas) == "all done"
    text_message = final["output"][2]["id"]
    assert all(f["msg_id"] == text_message for f in deltas)


def test_chat_stop_by_chat_id(stack: Stack) -> None:
    unknown = stack.api("POST", "/api/console/chat/stop?chat_id=no-such-chat")
    assert unknown.status_code == 200 and unknown.json() == {"stopped": False}
    assert stack.api("POST", "/api/console/chat/stop").status_code == 422
    session_id, task_id, call = stack.start_shell(gated("stop-gate", "echo started"))
    stopped = stack.api("POST", f"/api/console/chat/stop?chat_id={session_id}")
    assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
    assert stack.wait_task(task_id)["result"]["status"] == "cancelled"
    assert stack.call(session_id, call["tool_call_id"])["end_state"] == "cancelled"
    open_gate(stack, "stop-gate")


# ------------------------------------------------------------------ /api/chats


def test_chat_create_get_list_delete(stack: Stack) -> None:
    session_id = f"console:contract-{uuid.uuid4().hex[:8]}"
    body = {"name": "Contract chat", "session_id": session_id, "user_id": "alice"}
    created = stack.api("POST", "/api/chats", json=body)
    assert created.status_code == 200, created.text
    spec = created.json()
    assert spec.keys() >= CHAT_SPEC_KEYS
    assert (spec["id"], spec["name"], spec["status"]) == (session_id, "Contract chat", "idle")
    created_at, updated_at = _iso(spec["created_at"]), _iso(spec["updated_at"])
    assert created_at == updated_at

    stack.wait_task(stack.submit("hi there", session_id))
    listed = {c["id"]: c for c in stack.api("GET", "/api/chats").json()}
    assert _iso(listed[session_id]["updated_at"]) > updated_at
    assert _iso(listed[session_id]["created_at"]) == created_at

    history = stack.api("GET", f"/api/chats/{session_id}").json()
    assert history["status"] == "idle"
    first = history["messages"][0]
    assert (first["type"], first["role"]) == ("message", "user")
    assert first["content"] == [{"type": "text", "text": "hi there"}]
    assert history["messages"][-1]["role"] == "assistant"

    assert stack.api("DELETE", f"/api/chats/{session_id}").json() == {"deleted": True}
    gone = stack.api("GET", f"/api/chats/{session_id}")
    assert gone.status_code == 404 and gone.json() == {"detail": f"Chat not found: {session_id}"}
    assert stack.api("DELETE", f"/api/chats/{session_id}").status_code == 404


def test_chat_list_filters_and_create_needs_a_session(stack: Stack) -> None:
    assert stack.api("POST", "/api/chats", json={"user_id": "u"}).status_code == 422
    for chat in stack.api("GET", "/api/chats?user_id=nobody-has-this").json():
        pytest.fail(f"unexpected chat {chat}")


def test_chat_update_renames(stack: Stack) -> None:
    """QwenPaw's PUT /chats/{id} (its console renames a chat with it): the ChatSpec back,
    the new name listed, 404 for an unknown chat."""
    session_id = new_session()
    body = {"session_id": session_id, "user_id": "renamer"}
    created = stack.api("POST", "/api/chats", json=body).json()
    renamed = stack.api("PUT", f"/api/chats/{session_id}", json={"name": "Renamed"})
    assert renamed.status_code == 200, renamed.text
    spec = renamed.json()
    assert spec.keys() >= CHAT_SPEC_KEYS
    assert (spec["id"], spec["name"]) == (session_id, "Renamed")
    assert _iso(spec["updated_at"]) >= _iso(created["updated_at"])
    listed = {c["id"]: c for c in stack.api("GET", "/api/chats?user_id=renamer").json()}
    assert listed[session_id]["name"] == "Renamed"
    # A name past QwenPaw's bound is cut to it, as QwenPaw does.
    long = stack.api("PUT", f"/api/chats/{session_id}", json={"name": "n" * 600})
    assert long.status_code == 200 and long.json()["name"] == "n" * 500
    # null or left out: the name stays; pinned false and no group ask nothing.
    same = stack.api(
        "PUT", f"/api/chats/{session_id}", json={"name": None, "pinned": False, "group_id": None}
    )
    assert same.status_code == 200 and same.json()["name"] == "n" * 500
    # Differs: Tether neither pins chats nor groups them, so asking is 422, not ignored.
    for field, value in (("pinned", True), ("group_id", "work"), ("title", "x")):
        refused = stack.api("PUT", f"/api/chats/{session_id}", json={field: value})
        assert refused.status_code == 422, (field, refused.text)
    other = {"session_id": new_session(), "user_id": "renamer", "name": "m" * 600}
    made = stack.api("POST", "/api/chats", json=other)
    assert made.status_code == 200 and made.json()["name"] == "m" * 500
    stack.api("DELETE", f"/api/chats/{other['session_id']}")
    missing = stack.api("PUT", "/api/chats/no-such-chat", json={"name": "x"})
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Chat not found: no-such-chat"}
    stack.api("DELETE", f"/api/chats/{session_id}")


def test_chat_list_archived_filter(stack: Stack) -> None:
    """QwenPaw's ``archived``: true lists archived chats only, false active ones only.
    Tether archives none, so every chat is active."""
    session_id = new_session()
    body = {"session_id": session_id, "user_id": "archivist"}
    assert stack.api("POST", "/api/chats", json=body).status_code == 200
    assert stack.api("GET", "/api/chats?user_id=archivist&archived=true").json() == []
    active = stack.api("GET", "/api/chats?user_id=archivist&archived=false").json()
    assert [(c["id"], c["archived"]) for c in active] == [(session_id, False)]
    assert stack.api("GET", "/api/chats?archived=maybe").status_code == 422
    stack.api("DELETE", f"/api/chats/{session_id}")


# ------------------------------------------------------------------ /api/approval


def test_approval_unknown_request_and_scope_accepted(stack: Stack) -> None:
    request_id = uuid.uuid4().hex
    for action, extra in (("approve", {"scope": "similar"}), ("deny", {"reason": "no"})):
        body = {"request_id": request_id, "session_id": "s", "user_id": "u", **extra}
        resp = stack.api("POST", f"/api/approval/{action}", json=body)
        assert resp.status_code == 404
        assert resp.json() == {"detail": f"Approval request not found: {request_id[:16]}"}


def test_approval_list_approve_and_wrong_session(stack: Stack) -> None:
    session_id = new_session()
    stack.model.script({"tool_calls": [shell("echo approved-run")]}, {"text": "finished"})
    task_id = submit(stack, session_id, "strict")
    pending = first_pending(stack, session_id)
    for key in ("request_id", "session_id", "root_session_id", "tool_name", "severity"):
        assert key in pending
    assert pending["findings_count"] == len(pending["findings"])
    assert pending["exact_target"] == "echo approved-run"
    assert pending["exact_target"] == pending["patterns"]["exact"]
    generalizes = pending["similar_target"] not in ("", pending["exact_target"])
    assert pending["is_generalized"] == generalizes
    body = {"request_id": pending["request_id"], "session_id": "console:someone-else"}
    other = stack.api("POST", "/api/approval/approve", json=body)
    assert other.status_code == 403
    assert other.json() == {"detail": "Root session mismatch: cannot approve other session trees"}
    body["session_id"] = session_id
    # QwenPaw sends null for "no scope"; Tether reads it as this call only.
    ok = stack.api("POST", "/api/approval/approve", json={**body, "scope": None})
    assert ok.status_code == 200
    assert ok.json() == {
        "success": True,
        "message": f"Tool '{pending['tool_name']}' approved, executing...",
        "tool_name": pending["tool_name"],
        "request_id": pending["request_id"],
        "remembered": None,
    }
    assert stack.wait_task(task_id)["result"]["status"] == "completed"


# ------------------------------------------------------------------ /api/cron


def _qwenpaw_job(session_id: str, **extra: Any) -> dict[str, Any]:
    """A job as QwenPaw's console sends it."""
    return {
        "name": "contract job",
        "enabled": True,
        "schedule": {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"},
        "task_type": "agent",
        "request": {"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        "dispatch": {
            "type": "channel",
            "channel": "console",
            "target": {"user_id": "alice", "session_id": session_id},
            "mode": "final",
        },
        "runtime": {"max_concurrency": 1, "timeout_seconds": 60, "misfire_grace_seconds": 60},
        "meta": {"from": "qwenpaw"},
        **extra,
    }


def test_cron_job_lifecycle_in_qwenpaws_shape(stack: Stack) -> None:
    session_id = new_session()
    created = stack.api("POST", "/api/cron/jobs", json=_qwenpaw_job(session_id))
    assert created.status_code == 200, created.text
    job = created.json()
    uuid.UUID(job["id"])  # server-generated, as QwenPaw's
    assert job["request"]["session_id"] == session_id and job["meta"] == {"from": "qwenpaw"}
    view = stack.api("GET", f"/api/cron/jobs/{job['id']}").json()
    assert view["spec"] == job and set(view["state"]) == {
        "next_run_at",
        "last_run_at",
        "last_status",
        "last_error",
    }
    path = f"/api/cron/jobs/{job['id']}"
    assert stack.api("POST", f"{path}/pause").json() == {"paused": True}
    assert stack.api("POST", f"{path}/resume").json() == {"resumed": True}
    started = stack.api("POST", f"{path}/run").json()
    assert started["started"] is True
    (run,) = wait_runs_finished(stack.server, job["id"])
    assert {"run_at", "status", "error", "trigger"} <= run.keys()
    assert (run["status"], run["trigger"]) == ("success", "manual")
    assert stack.messages(session_id)[-1]["message"]["role"] == "assistant"
    assert stack.api("DELETE", path).json() == {"deleted": True}
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/run"), ("GET", "/state")):
        resp = stack.api(method, f"{path}{suffix}")
        assert resp.status_code == 404 and resp.json() == {"detail": "job not found"}


def test_cron_text_job_is_delivered_to_its_target(stack: Stack) -> None:
    session_id = new_session()
    body = {**_qwenpaw_job(session_id), "task_type": "text", "text": "stand-up in 5"}
    del body["request"]
    job = stack.api("POST", "/api/cron/jobs", json=body).json()
    stack.api("POST", f"/api/cron/jobs/{job['id']}/run")
    (run,) = wait_runs_finished(stack.server, job["id"])
    assert run["status"] == "success"
    (message,) = stack.messages(session_id)
    assert message["message"] == {"role": "assistant", "content": "stand-up in 5"}


def test_cron_unknown_channel_is_an_error_run_that_says_so(stack: Stack) -> None:
    body = _qwenpaw_job(new_session())
    body["dispatch"]["channel"] = "dingtalk"
    job = stack.api("POST", "/api/cron/jobs", json=body).json()
    stack.api("POST", f"/api/cron/jobs/{job['id']}/run")
    (run,) = wait_runs_finished(stack.server, job["id"])
    assert run["status"] == "error"
    assert "dispatch channel 'dingtalk' is not available" in run["error"]
    assert stack.api("GET", "/api/healthz").status_code == 200


def test_cron_bad_spec_is_422_and_dispatch_targets(stack: Stack) -> None:
    body = {**_qwenpaw_job(new_session()), "task_type": "text"}
    resp = stack.api("POST", "/api/cron/jobs", json=body)
    assert resp.status_code == 422
    assert "task_type is text but text is empty" in resp.json()["detail"][0]["msg"]
    targets = stack.api("GET", "/api/cron/dispatch-targets").json()
    assert "console" in targets["channels"]
    assert all(set(i) == {"channel", "user_id", "session_id"} for i in targets["items"])


# ------------------------------------------------------------------ /api/tool-calls


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("GET", "/output"),
        ("GET", "/stream"),
        ("POST", "/cancel"),
        ("POST", "/offload"),
    ],
)
def test_unknown_tool_call_is_404(stack: Stack, method: str, suffix: str) -> None:
    resp = stack.api(method, f"/api/tool-calls/s/call-nope{suffix}")
    assert resp.status_code == 404 and resp.json() == {"detail": "Tool call not found"}


def test_tool_call_stream_frames_are_chunks_then_done(stack: Stack) -> None:
    session_id, task_id, call = stack.start_shell(gated("chunk-gate", "echo streamed-line"))
    open_gate(stack, "chunk-gate")
    stack.wait_task(task_id)
    path = f"/api/tool-calls/{session_id}/{call['tool_call_id']}/stream"
    text = stack.api("GET", path).text
    frames = [line for line in text.splitlines() if line.startswith("data: ")]
    assert '"type":"chunk"' in frames[0] and "streamed-line" in frames[0]
    assert '"type":"done"' in frames[-1]
