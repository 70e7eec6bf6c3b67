"""What a failed turn tells the person: the provider's words, never a bug's."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_fakes import SESSION, AgentEnv

from tether.llm.client import AssistantReply, ModelError


async def _result(env: AgentEnv, task_id: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            view = await env.services.tasks.get(task_id)
            if view is not None and view.record.status == "finished":
                return dict(view.record.result or {})
            await asyncio.sleep(0.01)


def _raises(exc: Exception) -> Any:
    def reply() -> AssistantReply:
        raise exc

    return reply


async def test_a_model_error_is_shown_in_its_own_words(env: AgentEnv) -> None:
    env.model.replies = [_raises(ModelError("the model provider answered 400: bad request"))]
    task_id = await env.services.tasks.submit(SESSION, "u", "console", ["hi"], None)
    result = await _result(env, task_id)
    assert result == {"status": "failed", "error": "the model provider answered 400: bad request"}


async def test_an_internal_error_never_reaches_the_person(env: AgentEnv) -> None:
    env.model.replies = [_raises(AttributeError("'NoneType' object has no attribute 'content'"))]
    task_id = await env.services.tasks.submit(SESSION, "u", "console", ["hi"], None)
    result = await _result(env, task_id)
    assert result["status"] == "failed"
    assert "NoneType" not in result["error"] and "internal error" in result["error"]
    # The session goes on.
    env.model.replies = [AssistantReply(text="fine")]
    task_id = await env.services.tasks.submit(SESSION, "u", "console", ["again"], None)
    assert (await _result(env, task_id))["status"] == "completed"
