"""History repair and the strict role-order check."""

from __future__ import annotations

from typing import Any

from tether.agent.history import INTERRUPTED, model_message, order_problems, repair


def _assistant(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in ids
        ],
    }


def _tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


USER = {"role": "user", "content": "hi"}


def test_valid_history_is_unchanged() -> None:
    history = [
        USER,
        _assistant("a", "b"),
        _tool("a"),
        _tool("b"),
        {"role": "assistant", "content": "x"},
    ]
    assert repair(history) == history
    assert order_problems(history) == []


def test_a_call_without_a_result_gets_the_interrupted_note() -> None:
    fixed = repair([USER, _assistant("a", "b"), _tool("b"), USER])
    assert fixed[2:4] == [
        {"role": "tool", "tool_call_id": "a", "content": INTERRUPTED},
        _tool("b"),
    ]
    assert order_problems(fixed) == []


def test_trailing_unanswered_call_is_closed() -> None:
    fixed = repair([USER, _assistant("a")])
    assert fixed[-1]["content"] == INTERRUPTED
    assert order_problems(fixed) == []


def test_orphan_and_late_tool_messages_are_dropped() -> None:
    history = [_tool("zzz"), USER, _assistant("a"), USER, _tool("a", "late")]
    fixed = repair(history)
    assert [m["role"] for m in fixed] == ["user", "assistant", "tool", "user"]
    assert fixed[2]["content"] == INTERRUPTED
    assert order_problems(fixed) == []


def test_a_call_answered_twice_keeps_one_answer() -> None:
    fixed = repair([USER, _assistant("a"), _tool("a", "one"), _tool("a", "two")])
    assert [m.get("content") for m in fixed if m["role"] == "tool"] == ["two"]
    assert order_problems(fixed) == []


def test_model_message_drops_private_keys() -> None:
    msg = {"role": "tool", "tool_call_id": "a", "content": "x", "x_tether_call_id": "a~2"}
    assert model_message(msg) == _tool("a", "x")


def test_order_problems_finds_each_kind_of_break() -> None:
    assert order_problems([USER, _tool("a")])  # answers nothing
    assert order_problems([_assistant("a"), USER, _tool("a")])  # something in between
    assert order_problems([_assistant("a")])  # never answered
    assert order_problems([_assistant("a"), _tool("a"), _tool("a")])  # answered twice
    assert order_problems([_assistant("a", "a"), _tool("a")])  # repeated id
