"""Answering the calls a restart left open, right after the message that asked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from strict_order import request_problems
from tether.llm.capabilities import Capabilities
from tether.llm.wire import to_wire
from tether.model_texts import INTERRUPTED, NOT_STARTED
from tether.store.records import ToolCallRecord
from tether.tasks.resume import answers, open_calls

ASSISTANT = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "a",
            "type": "function",
            "function": {"name": "x", "arguments": "{}"},
            "x_tether_call_id": "a~2",
        },
        {"id": "b", "type": "function", "function": {"name": "x", "arguments": "{}"}},
        {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}},
        {"id": "d", "type": "function", "function": {"name": "x", "arguments": "{}"}},
    ],
}
BASE = ToolCallRecord(
    id="",
    session_id="s",
    task_id="t",
    agent_id="default",
    tool_name="x",
    arguments={},
    status="completed",
    end_state="success",
    end_reason=None,
    force_cancelled=False,
    offload_reason=None,
    max_timeout=None,
    result=None,
    started_at=1.0,
    finished_at=2.0,
)


def test_open_calls_are_those_of_the_last_assistant_message_without_an_answer() -> None:
    user = {"role": "user", "content": "go"}
    answered = {"role": "tool", "tool_call_id": "a", "content": "ok"}
    assert open_calls([user, ASSISTANT, answered]) == [("b", None), ("c", None), ("d", None)]
    assert open_calls([user, ASSISTANT, answered, {"role": "assistant", "content": "x"}]) == []
    assert open_calls([user]) == []


def test_each_open_call_gets_the_best_result_there_is() -> None:
    records = [
        replace(BASE, id="a~2", started_at=3.0),  # adopted: the outcome wins
        replace(BASE, id="a", started_at=1.0),
        replace(BASE, id="b", result="stored result"),
        replace(BASE, id="c", status="completed", end_state="cancelled"),
    ]
    asked = open_calls([ASSISTANT])
    assert asked[0] == ("a", "a~2")
    got = answers(asked, records, {"a~2": "adopted outcome"})
    assert [m["content"] for m in got] == [
        "adopted outcome",
        "stored result",
        INTERRUPTED,
        NOT_STARTED,
    ]
    assert [m.get("x_tether_call_id") for m in got] == ["a~2", "b", "c", None]
    history = [{"role": "user", "content": "go"}, *(public(m) for m in (ASSISTANT, *got))]
    assert request_problems(history) == []


def public(message: dict[str, Any]) -> dict[str, Any]:
    """The message as a provider receives it (Tether's x_ keys removed)."""
    return to_wire(message, "any", Capabilities())
