"""History repair, checked with the tests' own strict request validator."""

from __future__ import annotations

from typing import Any

from strict_order import request_problems
from tether.agent.history import repair
from tether.model_texts import INTERRUPTED


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
    assert request_problems(history) == []


def test_a_call_without_a_result_gets_the_interrupted_note() -> None:
    fixed = repair([USER, _assistant("a", "b"), _tool("b"), USER])
    assert fixed[2:4] == [
        {"role": "tool", "tool_call_id": "a", "content": INTERRUPTED},
        _tool("b"),
    ]
    assert request_problems(fixed) == []


def test_trailing_unanswered_call_is_closed() -> None:
    fixed = repair([USER, _assistant("a")])
    assert fixed[-1]["content"] == INTERRUPTED
    assert request_problems(fixed) == []


def test_orphan_tool_messages_are_dropped() -> None:
    fixed = repair([_tool("zzz"), USER, _assistant("a"), _tool("a"), _tool("zzz")])
    assert [m["role"] for m in fixed] == ["user", "assistant", "tool"]
    assert request_problems(fixed) == []


def test_a_message_sent_while_calls_ran_follows_their_results() -> None:
    """A message sent during another turn's calls is stored at once, before their
    results: it must not cut them off (their results were replaced by a note)."""
    queued = {"role": "user", "content": "and then B"}
    history = [USER, _assistant("a", "b"), _tool("a", "A"), queued, _tool("b", "B")]
    fixed = repair(history)
    assert fixed == [USER, _assistant("a", "b"), _tool("a", "A"), _tool("b", "B"), queued]
    assert request_problems(fixed) == []
    # One whose calls never got a result (a crash) still gets the note, before it.
    fixed = repair([USER, _assistant("a"), queued, {"role": "assistant", "content": "x"}])
    assert [m["role"] for m in fixed] == ["user", "assistant", "tool", "user", "assistant"]
    assert fixed[2]["content"] == INTERRUPTED


def test_a_call_answered_twice_keeps_its_first_answer() -> None:
    fixed = repair([USER, _assistant("a"), _tool("a", "one"), _tool("a", "two")])
    assert [m.get("content") for m in fixed if m["role"] == "tool"] == ["one"]
    assert request_problems(fixed) == []


def test_the_validator_finds_each_kind_of_break() -> None:
    assert request_problems([USER, _tool("a")])  # answers nothing
    assert request_problems([_assistant("a"), USER, _tool("a")])  # something in between
    assert request_problems([_assistant("a")])  # never answered
    assert request_problems([_assistant("a"), _tool("a"), _tool("a")])  # answered twice
    assert request_problems([_assistant("a", "a"), _tool("a")])  # repeated id
    assert request_problems([_assistant("a"), _tool("a"), _assistant("a"), _tool("a")])
    assert request_problems([{"role": "assistant", "content": None}])  # null content
    assert request_problems([{"role": "assistant", "content": None, "tool_calls": []}])
    truncated = _assistant("a")
    truncated["tool_calls"][0]["function"]["arguments"] = '{"command": "ec'
    assert request_problems([truncated, _tool("a")])
    assert request_problems([{**_assistant("a"), "x_echo": {}}, _tool("a")])  # private key
    assert request_problems([{**_assistant("a"), "reasoning_content": "r"}, _tool("a")])
    assert not request_problems(
        [{**_assistant("a"), "reasoning_content": "r"}, _tool("a")],
        message_fields=["reasoning_content"],
    )


# Histories stored by earlier versions, which strict providers refuse on every turn.


def test_a_null_content_without_calls_becomes_an_empty_string() -> None:
    fixed = repair([USER, {"role": "assistant", "content": None}, USER])
    assert fixed[1] == {"role": "assistant", "content": ""}
    assert request_problems(fixed) == []


def test_an_empty_call_list_is_dropped() -> None:
    fixed = repair([USER, {"role": "assistant", "content": None, "tool_calls": []}])
    assert fixed[1] == {"role": "assistant", "content": ""}


def test_truncated_arguments_become_an_empty_object() -> None:
    poisoned = _assistant("a")
    poisoned["tool_calls"][0]["function"]["arguments"] = '{"command": "echo \\"hi'
    fixed = repair([USER, poisoned, _tool("a", "[tether] The call was not run")])
    assert fixed[1]["tool_calls"][0]["function"] == {"name": "t", "arguments": "{}"}
    assert fixed[2]["content"] == "[tether] The call was not run"
    assert request_problems(fixed) == []


def test_repeated_ids_in_one_message_get_new_ids_with_their_results_in_order() -> None:
    fixed = repair([USER, _assistant("a", "a"), _tool("a", "one"), _tool("a", "two")])
    assert [c["id"] for c in fixed[1]["tool_calls"]] == ["a", "a_2"]
    assert [(m["tool_call_id"], m["content"]) for m in fixed[2:]] == [("a", "one"), ("a_2", "two")]
    assert request_problems(fixed) == []


def test_an_id_reused_by_a_later_message_is_renamed_there() -> None:
    history = [USER, _assistant("a"), _tool("a", "one"), USER, _assistant("a"), _tool("a", "two")]
    fixed = repair(history)
    assert fixed[4]["tool_calls"][0]["id"] == "a_2"
    assert fixed[5] == _tool("a_2", "two")
    assert request_problems(fixed) == []


def test_tether_keys_survive_repair() -> None:
    msg = {**_assistant("a"), "x_reasoning": "r"}
    msg["tool_calls"][0]["x_tether_call_id"] = "call_1"
    fixed = repair([USER, msg, {**_tool("a"), "x_tether_call_id": "call_1"}])
    assert fixed[1]["x_reasoning"] == "r"
    assert fixed[1]["tool_calls"][0]["x_tether_call_id"] == "call_1"
    assert fixed[2]["x_tether_call_id"] == "call_1"


def test_a_message_sent_during_a_turn_comes_after_that_turns_answer() -> None:
    """Sent while turn T1 ran, "second" is stored among T1's messages; the request for
    its own turn must end on it, not on T1's answer."""
    from tether.agent.history import by_turn
    from tether.store.records import MessageRecord

    second = {"role": "user", "content": "second"}
    done = {"role": "assistant", "content": "done1"}
    text = {"role": "assistant", "content": "a scheduled text"}
    stored = [
        (USER, "T1"),
        (_assistant("a"), "T1"),
        (second, "T2"),
        (_tool("a"), "T1"),
        (text, None),
        (done, "T1"),
    ]
    records = [
        MessageRecord(i, "s", task, "k", payload, 0.0) for i, (payload, task) in enumerate(stored)
    ]
    ordered = repair(by_turn(records, "T2"))
    assert ordered == [USER, _assistant("a"), _tool("a"), done, text, second]
    assert request_problems(ordered) == []
    # Without a turn to put last, turns keep the order they began in.
    assert repair(by_turn(records))[-2:] == [second, text]
