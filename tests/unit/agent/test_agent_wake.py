"""Background results wake an idle session exactly once."""

from __future__ import annotations

import asyncio

from agent_fakes import SESSION, AgentEnv

from tether.llm.client import AssistantReply


async def _wait_idle(env: AgentEnv) -> None:
    async with asyncio.timeout(10):
        while env.services.tasks.session_busy(SESSION):
            await asyncio.sleep(0.01)


async def test_two_results_at_once_start_one_turn(env: AgentEnv) -> None:
    await env.say("start two jobs")
    env.model.replies = [AssistantReply(text="both noted"), AssistantReply(text="extra")]
    tasks = env.services.tasks
    await asyncio.gather(
        tasks.on_background_result(SESSION, "c1", "one done"),
        tasks.on_background_result(SESSION, "c2", "two done"),
    )
    await _wait_idle(env)
    records = await env.services.store.tasks.list_for_session(SESSION)
    assert [r.trigger for r in records] == ["background_result"]
    assert len(env.model.requests) == 1
    notes = [m["content"] for m in env.model.requests[0] if m["role"] == "user"][1:]
    assert len(notes) == 2 and "'c1'" in notes[0] and "'c2'" in notes[1]
    assert await env.services.store.deliveries.pending(SESSION) == []
