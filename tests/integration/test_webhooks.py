"""Webhooks against a real receiver on loopback: signed deliveries, retries with back-off
and an attempt log, a delivery pending across a restart, and secrets kept secret."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from core_support import Stack, new_session, stack_for_module, wait_for
from governance_support import CLOCK, decide, first_pending, script, submit
from webhook_support import Receiver, delivered, endless_receiver, fresh_receiver, subscribe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Retries within a tenth of a second keep the test fast; the schedule's shape is
    # unit-tested with the real defaults.
    yield from stack_for_module(
        "webhooks",
        TETHER_WEBHOOK_RETRY_FIRST_SECONDS="0.05",
        TETHER_WEBHOOK_RETRY_MAX_SECONDS="0.2",
    )


@pytest.fixture
def receiver(stack: Stack) -> Iterator[Receiver]:
    with fresh_receiver(stack) as receiver:
        yield receiver


def _deliveries(stack: Stack, webhook_id: str) -> list[dict[str, Any]]:
    resp = stack.api("GET", f"/api/webhooks/{webhook_id}/deliveries")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def _settled(stack: Stack, webhook_id: str) -> list[dict[str, Any]]:
    """The deliveries once none is pending (the receiver's answer is recorded after it
    was sent)."""
    return wait_for(
        lambda: (
            (d := _deliveries(stack, webhook_id)) and all(x["status"] != "pending" for x in d) and d
        ),
        what="the deliveries to settle",
    )


@pytest.mark.p0
def test_a_delivery_is_signed_retried_after_failures_and_logged(
    stack: Stack, receiver: Receiver
) -> None:
    hook = subscribe(stack, receiver, "approval.requested")
    receiver.script = [500, 500]
    session = new_session()
    script(stack, CLOCK)
    task_id = submit(stack, session, "strict")
    approval = first_pending(stack, session)

    got = receiver.wait(lambda r: any(x.answered == 200 for x in r))

    assert [r.answered for r in got] == [500, 500, 200]
    assert all(r.signature_ok for r in got)
    assert len({r.message_id for r in got}) == 1  # one delivery id on every attempt
    body = got[-1].body
    assert body["type"] == "approval.requested"
    assert body["data"]["request_id"] == approval["request_id"]
    assert body["data"]["patterns"]["exact"] == "get_current_time"
    (delivery,) = _settled(stack, hook["id"])
    assert delivery["id"] == got[0].message_id
    assert (delivery["status"], delivery["attempts"]) == ("delivered", 3)
    log = delivery["attempt_log"]
    assert [a["status_code"] for a in log] == [500, 500, 200]
    assert [a["error"] for a in log] == ["HTTP 500", "HTTP 500", None]
    decide(stack, "approve", approval)
    stack.wait_task(task_id)


def test_a_delivery_pending_across_a_restart_is_still_delivered(
    stack: Stack, receiver: Receiver
) -> None:
    hook = subscribe(stack, receiver, "task.finished")
    receiver.default = 500  # the receiver is down until the server has restarted
    stack.model.script({"text": "all done"})
    task_id = stack.submit("hello", new_session())
    first = receiver.wait(lambda r: len(r) >= 1)[0]

    stack.server.stop()
    receiver.default = 200
    stack.server.start()

    got = receiver.wait(delivered(first.message_id))
    assert all(r.signature_ok for r in got)
    assert got[-1].body["data"]["task_id"] == task_id
    assert got[-1].body["data"]["result"]["status"] == "completed"
    (delivery,) = _settled(stack, hook["id"])
    assert delivery["status"] == "delivered"
    assert delivery["attempt_log"][-1]["status_code"] == 200
    assert len([r for r in got if r.answered == 200]) == 1


def test_the_secret_and_the_url_are_never_stored_listed_or_logged_in_plain_text(
    stack: Stack, receiver: Receiver
) -> None:
    hook = subscribe(stack, receiver, "task.finished")
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    host = receiver.url.removesuffix(f"/hook/{receiver.token}")
    assert hook["url"] == f"{host}/…"
    listed = stack.api("GET", "/api/webhooks").json()
    assert listed["count"] == 1
    assert "secret" not in listed["items"][0]
    assert listed["items"][0]["url"] == f"{host}/…"
    stack.model.script({"text": "ok"})
    stack.submit("hello", new_session())
    receiver.wait(lambda r: any(x.answered == 200 for x in r))

    for path in stack.server.home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data, path
            assert secret.removeprefix("whsec_").encode() not in data, path
            assert receiver.token.encode() not in data, path
    log = stack.server.log_path.read_text(errors="replace")
    assert receiver.token not in log


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://127.0.0.1/hook", "events": ["task.finished"]},
        {"url": "file:///etc/passwd", "events": ["task.finished"]},
        {"url": "http://", "events": ["task.finished"]},
        {"url": "127.0.0.1:9/hook", "events": ["task.finished"]},
        {"url": "http://127.0.0.1:9/hook", "events": ["no.such.event"]},
        {"url": "http://127.0.0.1:9/hook", "events": []},
        {"url": "http://127.0.0.1:9/hook", "events": ["task.finished"], "extra": 1},
        # Where clouds serve instance metadata (TETHER_WEBHOOK_DENY_NETWORKS' default).
        {"url": "http://169.254.169.254/latest/meta-data/", "events": ["task.finished"]},
        {"url": "http://[::ffff:169.254.169.254]/", "events": ["task.finished"]},
        {"url": "http://[fd00:ec2::254]/", "events": ["task.finished"]},
        # What urlsplit takes and the delivering client cannot use: every attempt failed
        # unrecorded, claimed again for ever.
        {"url": "http://ex\u200bample.com/hook", "events": ["task.finished"]},
        {"url": "http://exa mple.com/hook", "events": ["task.finished"]},
        {"url": "http://a\x00b.com/hook", "events": ["task.finished"]},
        # Credentials would be stored and listed in plain text.
        {"url": "http://user:pass@127.0.0.1:9/hook", "events": ["task.finished"]},
        {"url": "http://token@127.0.0.1:9/hook", "events": ["task.finished"]},
    ],
)
def test_bad_subscriptions_are_refused_and_change_nothing(
    stack: Stack, body: dict[str, Any]
) -> None:
    resp = stack.api("POST", "/api/webhooks", json=body)
    assert resp.status_code == 422, resp.text
    assert stack.api("GET", "/api/webhooks").json()["count"] == 0


def test_a_receiver_answering_an_endless_body_is_not_read(stack: Stack) -> None:
    """Only the status counts: a body of 100 GB was read into memory until the timeout
    (1.3 GB of server memory for one delivery)."""
    with endless_receiver() as (url, sent):
        hook = stack.api("POST", "/api/webhooks", json={"url": url, "events": ["task.finished"]})
        assert hook.status_code == 201, hook.text
        stack.model.script({"text": "ok"})
        stack.submit("hello", new_session())
        [delivery] = _settled(stack, hook.json()["id"])
        assert delivery["status"] == "delivered"
        assert delivery["attempt_log"][-1]["status_code"] == 200
        # What the receiver could push before the server hung up: socket buffers only.
        assert sent.wait_closed() < 64 << 20
        stack.api("DELETE", f"/api/webhooks/{hook.json()['id']}")


def test_a_changed_url_gets_the_next_deliveries_signed_with_the_same_secret(
    stack: Stack, receiver: Receiver
) -> None:
    """A URL is sealed and never shown again: changing it is how a receiver moves."""
    hook = subscribe(stack, receiver, "task.finished")
    with fresh_receiver(stack) as moved:
        moved.secret = receiver.secret
        resp = stack.api(
            "PATCH",
            f"/api/webhooks/{hook['id']}",
            json={"url": moved.url, "events": ["task.finished", "approval.requested"]},
        )
        assert resp.status_code == 200, resp.text
        changed = resp.json()
        assert changed["url"] == moved.url.removesuffix(f"/hook/{moved.token}") + "/…"
        assert changed["events"] == ["approval.requested", "task.finished"]
        assert "secret" not in changed
        assert stack.api("GET", "/api/webhooks").json()["items"] == [changed]
        stack.model.script({"text": "ok"})
        task_id = stack.submit("hello", new_session())

        got = moved.wait(lambda r: any(x.answered == 200 for x in r))
        assert got[-1].signature_ok
        assert got[-1].body["data"]["task_id"] == task_id
        assert receiver.received == []
        for path in stack.server.home.rglob("*"):
            if path.is_file():
                assert moved.token.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"url": None},
        {"events": []},
        {"events": ["no.such.event"]},
        {"url": "ftp://127.0.0.1/hook"},
        {"url": "http://user:pass@127.0.0.1:9/hook"},
        {"url": "http://169.254.169.254/latest/meta-data/"},
        {"description": "x" * 501},
        {"secret": "whsec_bXlvd24="},
    ],
)
def test_bad_changes_are_refused_and_change_nothing(
    stack: Stack, receiver: Receiver, body: dict[str, Any]
) -> None:
    hook = subscribe(stack, receiver, "task.finished")
    before = stack.api("GET", "/api/webhooks").json()
    resp = stack.api("PATCH", f"/api/webhooks/{hook['id']}", json=body)
    assert resp.status_code == 422, resp.text
    assert stack.api("GET", "/api/webhooks").json() == before


def test_unknown_webhooks_are_404(stack: Stack) -> None:
    for method, path, body in (
        ("DELETE", "/api/webhooks/wh-nope", None),
        ("GET", "/api/webhooks/wh-nope/deliveries", None),
        ("PATCH", "/api/webhooks/wh-nope", {"description": "moved"}),
    ):
        resp = stack.api(method, path, json=body)
        assert (resp.status_code, resp.json()) == (404, {"detail": "webhook 'wh-nope' not found"})
