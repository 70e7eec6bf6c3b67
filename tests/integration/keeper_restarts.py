"""The restart the keeper tests put a call through: a call printing a numbered line
every 100 ms until its gate file appears, its stream read before the restart and resumed
after it at the last event id, and its task's end."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from core_support import SseEvent, Stack, new_session, shell_call, sse_events, wait_for

from tether.keeper import layout

# Prints a numbered line every 100 ms until the file "gate" appears, then "end".
TICKER = 'i=0; while [ ! -e {gate} ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done; echo end'


def stream(stack: Stack, session: str, call_id: str, last: int | None = None) -> Any:
    headers = {"Authorization": f"Bearer {stack.server.token}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    return stack.server._client.stream(
        "GET", f"/api/tool-calls/{session}/{call_id}/stream", headers=headers
    )


def first_events(stack: Stack, session: str, call_id: str, count: int) -> list[SseEvent]:
    got: list[SseEvent] = []
    with stream(stack, session, call_id) as resp:
        for event in sse_events(resp.iter_lines()):
            got.append(event)
            if len(got) == count:
                break
    return got


def rest(stack: Stack, session: str, call_id: str, last: int) -> list[SseEvent]:
    with stream(stack, session, call_id, last) as resp:
        assert resp.status_code == 200
        return list(sse_events(resp.iter_lines()))


def start_ticker(stack: Stack, gate: str) -> tuple[str, str, str]:
    session = new_session()
    stack.model.script(shell_call(TICKER.format(gate=gate), timeout=120), {"text": "done"})
    task = stack.submit("tick", session)
    call = stack.wait_call(session)
    return session, task, call["tool_call_id"]


def ended_while_down(
    stack: Stack, text: str = "hello", timeout: int | None = None
) -> tuple[str, str, str]:
    """A call that printed ``text``, then ended (printing "bye") while its server was
    down (killed); the server is left down. (session, task, call id). ``timeout``: the
    call's, in seconds."""
    gate = f"gate-{time.monotonic_ns()}"
    session = new_session()
    command = f"echo {text}; while [ ! -e {gate} ]; do sleep 0.05; done; echo bye"
    extra = {} if timeout is None else {"timeout": timeout}
    stack.model.script(shell_call(command, **extra), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    # Listed is not yet started: the runner has the call once it wrote its spec.
    directory = layout.call_dir(stack.server.home, call_id)
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    stack.server.kill()
    (stack.workspace / gate).touch()
    wait_for((directory / layout.STATUS_NAME).exists, what="the call to end under the runner")
    return session, task, call_id


def check_resumed(
    stack: Stack, session: str, call_id: str, before: list[SseEvent], gate: str
) -> None:
    """After a restart: the same call is running; the stream resumed at the last event
    id continues it (the gate lets it finish) with no gap and no duplicate."""
    assert [c["tool_call_id"] for c in stack.live_calls(session)] == [call_id]
    assert stack.call(session, call_id)["status"] == "running"
    (stack.workspace / gate).touch()
    after = rest(stack, session, call_id, before[-1].id or 0)
    events = before + after
    outputs = [e for e in events if e.data["type"] == "chunk"]
    assert [e.id for e in outputs] == list(range(1, len(outputs) + 1))
    text = "".join(e.data["text"] for e in outputs)
    numbers = [int(n) for n in re.findall(r"line (\d+)", text)]
    assert numbers == list(range(1, len(numbers) + 1))
    assert text.endswith("end\n")
    assert events[-1].data == {"type": "done", "end_state": "success", "status": "completed"}


def check_task(stack: Stack, task_id: str) -> None:
    task = stack.wait_task(task_id, timeout=30)
    assert task["result"]["status"] == "completed", task
    assert task["result"]["text"] == "done"
    last = stack.model.requests[-1]["messages"]
    tool = [m for m in last if m["role"] == "tool"][-1]
    assert "line 1\n" in tool["content"] and "end" in tool["content"]


def through_a_restart(
    stack: Stack, restart: Callable[[], None], meanwhile: Callable[[], None] | None = None
) -> None:
    """The ticker through ``restart``, then ``meanwhile`` while it still runs, then its
    end."""
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    before = first_events(stack, session, call_id, 5)
    restart()
    if meanwhile is not None:
        meanwhile()
    check_resumed(stack, session, call_id, before, gate)
    check_task(stack, task)
