"""The agent loop in-process: a scripted model, real tools and a real (temporary) store."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from agent_fakes import SESSION, AgentEnv, Events, calls

from strict_order import request_problems
from tether.agent.turn import StepLimitReached, TurnEndedElsewhere, TurnRequest
from tether.llm.capabilities import DEFAULT
from tether.llm.client import AssistantReply, ModelError
from tether.llm.wire import to_wire

REQ = TurnRequest(SESSION, "task-1", "auto")


def _shell(command: str) -> str:
    return json.dumps({"command": command})


async def _stored(env: AgentEnv) -> list[dict[str, Any]]:
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
    workspace = env.services.settings.resolved_workspace
    env.model.replies = [
        calls(
            # The first call cannot end before the second has: it waits for a file the
            # test creates when the second call's end is reported.
            (
                "c_slow",
                "execute_shell_command",
                _shell("while [ ! -e fast.ended ]; do sleep 0.01; done; echo slow"),
            ),
            ("c_fast", "execute_shell_command", _shell("echo fast")),
        ),
        AssistantReply(text="both done"),
    ]

    class GateOnFastEnd(Events):
        def emit(self, event: dict[str, Any]) -> None:
            super().emit(event)
            if event["type"] != "tool_call_ended":
                return
            # Tether names calls its own way; the command tells the fast one.
            if event["tool_call"]["extra"]["arguments"]["command"] == "echo fast":
                (workspace / "fast.ended").touch()

    events = GateOnFastEnd()
    result = await env.services.agent.run_turn(REQ, events)
    assert result.text == "both done"
    # The fast call ended first, so they really ran at the same time...
    model_ids = await _model_ids(env)
    ended = [model_ids[e["tool_call"]["tool_call_id"]] for e in events.of_type("tool_call_ended")]
    assert ended == ["c_fast", "c_slow"]
    # ...yet the model gets the results in the order it asked for them.
    tools = [m for m in env.model.requests[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c_slow", "c_fast"]
    assert tools[0]["content"].startswith("slow\n") and tools[1]["content"].startswith("fast\n")
    assert "x_tether_call_id" not in tools[0]
    assert request_problems(_sent(await _stored(env))) == []


def _sent(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored history as a provider would get it."""
    return [to_wire(m, "elsewhere", DEFAULT) for m in stored]


async def _model_ids(env: AgentEnv) -> dict[str, str]:
    """Tether's call id -> the model's id, from the stored assistant messages."""
    return {
        c["x_tether_call_id"]: c["id"]
        for m in await _stored(env)
        for c in m.get("tool_calls") or []
    }


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
    assert request_problems(_sent(stored)) == []
    assert sum(1 for m in stored if m["role"] == "tool") == 3


async def test_bad_calls_are_answered_and_the_turn_goes_on(env: AgentEnv) -> None:
    await env.say("bad")
    env.model.replies = [
        calls(
            ("c1", "no_such_tool", "{}"),
            ("c3", "execute_shell_command", "[1]"),
            ("c4", "execute_shell_command", json.dumps({"command": ""})),
            # One argument of the shell: past the kernel's 128 KiB it could not start.
            ("c5", "execute_shell_command", json.dumps({"command": "echo " + "x" * 131_067})),
        ),
        AssistantReply(text="sorry"),
    ]
    result = await env.services.agent.run_turn(REQ, Events())
    assert result.text == "sorry"
    tools = {m["tool_call_id"]: m["content"] for m in env.model.requests[1] if m["role"] == "tool"}
    assert "no tool named 'no_such_tool'" in tools["c1"]
    assert "must be a JSON object" in tools["c3"]
    assert "command must be a non-empty string" in tools["c4"]
    assert "131,072 bytes" in tools["c5"] and "MAX_ARG_STRLEN" in tools["c5"]


async def test_a_command_that_could_never_start_is_refused_before_anyone_is_asked(
    env: AgentEnv,
) -> None:
    """At ``strict`` every call asks a person; one whose command is longer than the kernel
    takes in an argument is refused first, nobody being asked about it."""
    await env.say("long")
    env.model.replies = [
        calls(("c1", "execute_shell_command", _shell("echo " + "x" * 131_067))),
        AssistantReply(text="sorry"),
    ]
    events = Events()
    strict = TurnRequest(SESSION, "task-1", "strict")
    # Asked about, the turn would wait for the person (the approval's timeout is longer).
    result = await asyncio.wait_for(env.services.agent.run_turn(strict, events), 60)
    assert result.text == "sorry"
    assert events.of_type("approval_requested") == []
    tools = [m["content"] for m in env.model.requests[1] if m["role"] == "tool"]
    assert len(tools) == 1 and "MAX_ARG_STRLEN" in tools[0], tools
    audit = await env.services.store.governance.list_audit(SESSION, 10)
    assert [(a.outcome, a.decided_by) for a in audit] == [("denied", "invalid-arguments")]


async def test_every_call_gets_a_tether_id_and_model_ids_stay_distinct(env: AgentEnv) -> None:
    await env.say("again")
    env.model.replies = [
        calls(("same", "get_current_time", "{}"), ("same", "get_current_time", "{}")),
        calls(("same", "get_current_time", "{}")),
        calls(("a/b", "get_current_time", "{}")),
        AssistantReply(text="ok"),
    ]
    env.services.agent._max_steps = 4
    await env.services.agent.run_turn(REQ, Events())
    stored = await _stored(env)
    tether_ids = [m["x_tether_call_id"] for m in stored if m["role"] == "tool"]
    assert len(set(tether_ids)) == 4
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in tether_ids)
    # The model's ids are kept for the model, made distinct in the whole history.
    model_ids = [m["tool_call_id"] for m in stored if m["role"] == "tool"]
    assert model_ids == ["same", "same_2", "same_3", "a/b"]
    assert request_problems(env.model.requests[-1]) == []


async def test_a_malformed_call_fails_the_turn_and_stores_nothing(env: AgentEnv) -> None:
    await env.say("bad")
    env.model.replies = [calls(("c1", "execute_shell_command", '{"command": "ec'))]
    with pytest.raises(ModelError, match="malformed tool call"):
        await env.services.agent.run_turn(REQ, Events())
    assert await _stored(env) == [{"role": "user", "content": "bad"}]
    env.model.replies = [AssistantReply(text="fine now")]
    assert (await env.services.agent.run_turn(REQ, Events())).text == "fine now"


@pytest.mark.parametrize("name", ["t" * 129, "shell\x00", "a\nb"])
async def test_a_tool_name_no_tool_can_have_fails_the_turn_and_stores_nothing(
    env: AgentEnv, name: str
) -> None:
    """PostgreSQL refused such a name (its column holds 128; NUL in no text), so the
    turn failed on an internal error with half of it stored."""
    await env.say("bad")
    env.model.replies = [calls(("c1", name, "{}"))]
    with pytest.raises(ModelError, match="which no tool can be"):
        await env.services.agent.run_turn(REQ, Events())
    assert await _stored(env) == [{"role": "user", "content": "bad"}]


async def test_reasoning_is_streamed_as_its_own_event_and_stored(env: AgentEnv) -> None:
    await env.say("think")
    env.model.replies = [AssistantReply(text="", reasoning="hmm")]
    events = Events()
    await env.services.agent.run_turn(REQ, events)
    assert [e["text"] for e in events.of_type("reasoning_delta")] == ["hmm"]
    assert (await _stored(env))[-1] == {"role": "assistant", "content": "", "x_reasoning": "hmm"}
    # Another provider gets the message without it, and a string content.
    env.model.replies = [AssistantReply(text="ok")]
    await env.services.agent.run_turn(REQ, Events())
    assert env.model.requests[-1][2] == {"role": "assistant", "content": ""}


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


async def test_a_nul_in_a_calls_arguments_is_stored_on_every_database(env: AgentEnv) -> None:
    await env.say("nul")
    env.model.replies = [
        calls(("c1", "execute_shell_command", '{"command": "echo a\\u0000b"}')),
        AssistantReply(text="done"),
    ]
    assert (await env.services.agent.run_turn(REQ, Events())).text == "done"


async def test_a_turn_whose_task_another_node_ended_stores_nothing_more(env: AgentEnv) -> None:
    """A node frozen mid-turn is declared lost; a survivor fails its task, and another
    node's turn may hold the session now. Back with the model's reply in hand, the turn
    stored it (and ran the calls it asked for) into the session's history, side by side
    with the other node's turn, until its next lease renewal stopped it."""
    store = env.services.store
    assert store.owner is not None
    await store.tasks.open_in_session("task-1", (SESSION, "u", "console", None), "user", None, [])
    await env.say("hello")
    env.model.replies = [calls(("c1", "execute_shell_command", _shell("echo ran")))]
    failed = await store.tasks.fail_unfinished("node lost", {store.owner.id})
    assert [t.id for t in failed] == ["task-1"]

    with pytest.raises(TurnEndedElsewhere, match="ended by another node"):
        await env.services.agent.run_turn(REQ, Events())
    assert await _stored(env) == [{"role": "user", "content": "hello"}]
    assert await store.tool_calls.list_for_task("task-1") == []
