"""Fakes for the in-process agent tests: a scripted model and an event sink."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strict_order import request_problems
from tether.config import Settings
from tether.llm.capabilities import DEFAULT
from tether.llm.client import AssistantReply, ChatModel, RequestedCall, TextSink
from tether.llm.wire import to_wire
from tether.services import Services
from tether.startup import start_services

SESSION = "console:unit"


@dataclass
class ScriptedModel:
    """A ChatModel that answers from a script and keeps every request it receives.

    Each request is kept as a provider would receive it, and checked as it arrives, as a
    strict provider would.
    """

    origin = "scripted"

    replies: list[AssistantReply | Callable[[], AssistantReply]] = field(default_factory=list)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextSink,
        on_reasoning: TextSink | None = None,
    ) -> AssistantReply:
        wire = [to_wire(copy.deepcopy(m), self.origin, DEFAULT) for m in messages]
        self.requests.append(wire)
        problems = request_problems(wire)
        assert not problems, problems
        if not self.replies:
            return AssistantReply(text="(script exhausted)")
        reply = self.replies.pop(0)
        reply = reply() if callable(reply) else reply
        if reply.reasoning and on_reasoning is not None:
            on_reasoning(reply.reasoning)
        if reply.text:
            on_text(reply.text)
        return reply


def calls(*specs: tuple[str, str, str]) -> AssistantReply:
    """A reply calling tools: each spec is (id, name, arguments JSON)."""
    return AssistantReply(text="", tool_calls=[RequestedCall(*s) for s in specs])


class Events:
    """A TurnEvents sink that keeps everything."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.items.append(event)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.items if e["type"] == kind]


@dataclass
class AgentEnv:
    services: Services
    model: ScriptedModel

    async def say(self, text: str, session_id: str = SESSION) -> None:
        """Store a user message, as a submitted task does before its turn."""
        await self.services.store.chats.ensure_session(session_id, "u", "console", None)
        await self.services.store.chats.append(
            session_id, "task-1", [("user", {"role": "user", "content": text})]
        )


async def make_env(tmp_path: Path, **settings: Any) -> tuple[Services, ScriptedModel]:
    model = ScriptedModel()

    def factory(base_url: str, api_key: str, name: str) -> ChatModel:
        return model

    # Calls run as the server's children here: these tests are about the loop, and a
    # keeper's runner would outlive the test (tests/unit/keeper covers the keeper).
    options = {"keeper": False, "cancel_grace_seconds": 0.2, **settings}
    services = await start_services(Settings(home=tmp_path, **options), factory)
    await services.providers.add("fake", "Fake", "http://127.0.0.1:9", "m", [{"id": "m"}])
    await services.providers.set_active("fake", "m", "global")
    return services, model
