"""Tether's turn events as QwenPaw runtime frames (tether.api.runtime_stream)."""

from __future__ import annotations

from typing import Any

from tether.api.runtime_stream import RuntimeStream


def run(*events: dict[str, Any]) -> list[dict[str, Any]]:
    stream = RuntimeStream("console:s", "task-000000000001")
    frames = stream.start()
    for event in events:
        frames += stream.feed(event)
    return frames


def test_a_failed_turn_ends_the_response_failed_with_its_message() -> None:
    frames = run({"type": "final", "result": {"status": "failed", "error": "model down"}})
    final = frames[-1]
    assert (final["object"], final["status"]) == ("response", "failed")
    assert final["error"] == {"code": "error", "message": "model down"}
    assert final["task_id"] == "task-000000000001" and final["output"] == []


def test_a_stopped_turn_keeps_the_text_written_so_far() -> None:
    frames = run(
        {"type": "text_delta", "text": "half an "},
        {"type": "text_delta", "text": "answer"},
        {"type": "final", "result": {"status": "cancelled", "error": "the task was stopped"}},
    )
    final = frames[-1]
    assert final["status"] == "cancelled"
    (message,) = final["output"]
    assert message["content"][0]["text"] == "half an answer"


def test_tether_only_events_make_no_frames() -> None:
    stream = RuntimeStream("s", "t")
    for kind in ("task_started", "tool_call_started", "tool_call_ended", "approval_requested"):
        assert stream.feed({"type": kind}) == []


def test_an_answer_without_deltas_still_opens_its_message() -> None:
    frames = run({"type": "message", "kind": "assistant", "message": {"content": "whole"}})
    envelope, text, done = frames[2:]
    assert (envelope["object"], envelope["status"]) == ("message", "in_progress")
    assert text["msg_id"] == envelope["id"] and text["text"] == "whole"
    assert (done["status"], done["content"][0]["text"]) == ("completed", "whole")


def test_reasoning_is_its_own_message_ended_before_the_answer() -> None:
    frames = run(
        {"type": "reasoning_delta", "text": "think "},
        {"type": "reasoning_delta", "text": "hard"},
        {"type": "text_delta", "text": "42"},
        {"type": "message", "kind": "assistant", "message": {"content": "42"}},
        {"type": "final", "result": {"status": "completed"}},
    )
    output = frames[-1]["output"]
    assert [m["type"] for m in output] == ["reasoning", "message"]
    assert output[0]["content"][0]["text"] == "think hard"
    assert output[1]["content"][0]["text"] == "42"


def test_text_a_turn_streamed_before_it_failed_or_stopped_stays_marked_as_qwenpaw_does() -> None:
    """QwenPaw's envelope: the text of a stopped turn is ``cancelled``, that of a failed
    one ``completed`` (the response says it failed)."""
    for end, marked in (("failed", "completed"), ("cancelled", "cancelled")):
        frames = run(
            {"type": "text_delta", "text": "half"},
            {"type": "final", "result": {"status": end, "error": "cut"}},
        )
        (message,) = frames[-1]["output"]
        assert (message["status"], message["content"][0]["text"]) == (marked, "half")
    frames = run(
        {"type": "text_delta", "text": "whole"},
        {"type": "message", "kind": "assistant", "message": {"content": "whole"}},
        {"type": "final", "result": {"status": "completed"}},
    )
    assert [m["status"] for m in frames[-1]["output"]] == ["completed"]
