"""The agent loop in-process: a scripted model, real tools and a real (temporary) store."""

from __future__ import annotations

import json

import pytest
from agent_fakes import SESSION, AgentEnv, Events, calls

from tether.agent.history import order_problems
from tether.agent.turn import StepLimitReached, TurnRequest
from tether.llm.client import AssistantReply, ModelError

REQ = TurnRequest(SESSION, "task-1", "auto")


def _shell(command: str) -> str:
    return json.dumps({"command": command})


async def _stored(env: AgentEnv) -> list[dict[str, object]]:
    return [m.payload for m in await env.services.store.chats.history(SESSION)]


async def test_a_text_reply_ends_the_turn_and_is_stored(env: AgentEnv) -> None:
    await env.say("hello")
    env.model.replies = [AssistantReply(text="hi there")]
    events = Events()
    result = await env.services.agent.run_turn(REQ, events)
    assert (result.text, result.steps) == ("hi there", 1)
    assert env.model.requests[0][0]["role"] == "system"
    assert env.model.requests[0][1:] == [{"role": "user", "content": "hello"}]
    assert [e["text"] for e in events.of_type("text_delta")] == ["hi there"]
    assert await _stored(env) == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi there"},
    ]


async def test_parallel_calls_run_together_and_keep_the_model_order(env: AgentEnv) -> None:
    await env.say("two things")
    env.model.replies = [
        calls(
            # The first call cannot end before the second: it waits for its file.
            (
                "c_slow",
                "execute_shell_command",
                _shell("while [ ! -e fast.done ]; do sleep 0.01; done; sleep 0.05; echo slow"),
            ),
            ("c_fast", "execute_shell_command", _shell("echo fast; touch fast.done")),
        ),
        AssistantReply(text="both done"),
    ]
    events = Events()
    result = await env.services.agent.run_turn(REQ, events)
    assert result.text == "both done"
    # The fast call ended first, so they really ran at the same time...
    ended = [e["tool_call"]["tool_call_id"] for e in events.of_type("tool_call_ended")]
    assert ended == ["c_fast", "c_slow"]
    # ...yet the model gets the results in the order it asked for them.
    tools = [m for m in env.model.requests[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c_slow", "c_fast"]
    assert tools[0]["content"].startswith("slow\n") and tools[1]["content"].startswith("fast\n")
    assert "x_tether_call_id" not in tools[0]
    assert order_problems(await _stored(env)) == []


async def test_output_events_stream_while_the_call_runs(env: AgentEnv) -> None:
    await env.say("print")
    env.model.replies = [
        calls(("c1", "execute_shell_command", _shell("echo one; echo two >&2"))),
        AssistantReply(text="ok"),
    ]
    events = Events()
    await env.services.agent.run_turn(REQ, events)
    kinds = [e["type"] for e in events.items]
    assert kinds.index("tool_call_started") < kinds.index("tool_call_output")
    assert kinds.index("tool_call_output") < kinds.index("tool_call_ended")
    streams = {(e["stream"], e["text"]) for e in events.of_type("tool_call_output")}
    assert ("stdout", "one\n") in streams and ("stderr", "two\n") in streams


async def test_step_limit_stops_a_model_that_never_stops_calling(env: AgentEnv) -> None:
    await env.say("loop")
    env.model.replies = [calls((f"c{i}", "get_current_time", "{}")) for i in range(5)]
    with pytest.raises(StepLimitReached, match="after 3 steps"):
        await env.services.agent.run_turn(REQ, Events())
    assert len(env.model.requests) == 3
    stored = await _stored(env)
    assert order_problems(stored) == []
    assert sum(1 for m in stored if m["role"] == "tool") == 3


async def test_bad_calls_are_answered_and_the_turn_goes_on(env: AgentEnv) -> None:
    await env.say("bad")
    env.model.replies = [
        calls(
            ("c1", "no_such_tool", "{}"),
            ("c2", "execute_shell_command", "{not json"),
            ("c3", "execute_shell_command", "[1]"),
            ("c4", "execute_shell_command", json.dumps({"command": ""})),
        ),
        AssistantReply(text="sorry"),
    ]
    result = await env.services.agent.run_turn(REQ, Events())
    assert result.text == "sorry"
    tools = {m["tool_call_id"]: m["content"] for m in env.model.requests[1] if m["role"] == "tool"}
    assert "no tool named 'no_such_tool'" in tools["c1"]
    assert "not valid JSON" in tools["c2"]
    assert "must be a JSON object" in tools["c3"]
    assert "command must be a non-empty string" in tools["c4"]


async def test_a_reused_call_id_gets_a_unique_coordinator_id(env: AgentEnv) -> None:
    await env.say("again")
    env.model.replies = [
        calls(("same", "get_current_time", "{}")),
        calls(("same", "get_current_time", "{}")),
        AssistantReply(text="ok"),
    ]
    await env.services.agent.run_turn(REQ, Events())
    stored = await _stored(env)
    ids = [m["x_tether_call_id"] for m in stored if m["role"] == "tool"]
    assert ids == ["same", "same~2"]
    assert order_problems(stored) == []


async def test_background_results_arrive_as_a_notification_at_a_step_boundary(
    env: AgentEnv,
) -> None:
    await env.say("hello")
    await env.services.store.deliveries.add(SESSION, "c_bg", "exit code 0")
    env.model.replies = [AssistantReply(text="noted")]
    await env.services.agent.run_turn(REQ, Events())
    last = env.model.requests[0][-1]
    assert last["role"] == "user"
    assert "'c_bg'" in last["content"] and "exit code 0" in last["content"]
    assert await env.services.store.deliveries.pending(SESSION) == []


async def test_a_model_error_propagates(env: AgentEnv) -> None:
    await env.say("boom")

    def fail() -> AssistantReply:
        raise ModelError("the model provider answered 500: nope")

    env.model.replies = [fail]
    with pytest.raises(ModelError, match="500"):
        await env.services.agent.run_turn(REQ, Events())
    assert await _stored(env) == [{"role": "user", "content": "boom"}]
