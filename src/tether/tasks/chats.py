"""Chats as QwenPaw's clients see them: a chat is a Tether session, named by its id.

QwenPaw gives a chat a UUID apart from its session id; Tether's session id already
names one conversation, so it is the chat's id too (QwenPaw's stop route accepts a
session id in place of a chat id for the same reason).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tether.errors import NotFound
from tether.store.chats import ChatRepository
from tether.store.records import MessageRecord, SessionRecord

#: QwenPaw's name for a chat created without one.
DEFAULT_CHAT_NAME = "New Chat"


class ChatNotFound(NotFound):
    """No chat (session) has this id."""

    def __init__(self, chat_id: str) -> None:
        super().__init__(f"Chat not found: {chat_id}")


class TurnControl(Protocol):
    """The part of the task service chats need: is a turn running, and stop it."""

    async def busy_sessions(self) -> set[str]: ...

    async def stop_session(self, session_id: str) -> bool: ...


@dataclass(frozen=True)
class ChatView:
    session: SessionRecord
    running: bool


@dataclass(frozen=True)
class ChatHistory:
    messages: list[dict[str, Any]]
    running: bool


class ChatService:
    """List, create, read and delete chats over the session store."""

    def __init__(self, repo: ChatRepository, turns: TurnControl) -> None:
        self._repo = repo
        self._turns = turns

    async def all(self, user_id: str | None = None, channel: str | None = None) -> list[ChatView]:
        """Chats, most recently updated first, optionally for one user or channel."""
        busy = await self._turns.busy_sessions()
        return [
            ChatView(s, s.id in busy)
            for s in await self._repo.list_sessions()
            if (user_id is None or s.user_id == user_id)
            and (channel is None or s.channel == channel)
        ]

    async def create(self, session_id: str, user_id: str, channel: str, name: str) -> ChatView:
        """The chat for ``session_id``, created if new (an existing chat is returned)."""
        await self._repo.create_session(session_id, user_id, channel, name)
        return await self.get(session_id)

    async def get(self, chat_id: str) -> ChatView:
        """One chat. Raises ChatNotFound."""
        session = await self._repo.get_session(chat_id)
        if session is None:
            raise ChatNotFound(chat_id)
        return ChatView(session, session.id in await self._turns.busy_sessions())

    async def history(self, chat_id: str) -> ChatHistory:
        """The chat's messages in QwenPaw's transcript form. Raises ChatNotFound."""
        view = await self.get(chat_id)
        records = await self._repo.history(chat_id)
        return ChatHistory(transcript(records), view.running)

    async def messages(self, chat_id: str) -> list[MessageRecord]:
        """The chat's stored messages as Tether keeps them. Raises ChatNotFound."""
        await self.get(chat_id)
        return await self._repo.history(chat_id)

    async def update_settings(self, chat_id: str, values: dict[str, Any]) -> ChatView:
        """Set the chat's approval level and unattended policy. Raises ChatNotFound."""
        if not await self._repo.update_session(chat_id, values):
            raise ChatNotFound(chat_id)
        return await self.get(chat_id)

    async def rename(self, chat_id: str, name: str | None) -> ChatView:
        """Give the chat ``name`` (None: keep it) and move its ``updated_at``. Raises
        ChatNotFound."""
        values: dict[str, Any] = {"updated_at": time.time()}
        if name is not None:
            values["title"] = name
        if not await self._repo.update_session(chat_id, values):
            raise ChatNotFound(chat_id)
        return await self.get(chat_id)

    async def delete(self, chat_id: str) -> None:
        """Stop the chat's running turn, then delete it. Raises ChatNotFound."""
        await self.get(chat_id)
        await self._turns.stop_session(chat_id)
        if not await self._repo.delete_session(chat_id):
            raise ChatNotFound(chat_id)


def transcript(records: Sequence[MessageRecord]) -> list[dict[str, Any]]:
    """Stored messages as QwenPaw's runtime messages (text, plugin calls and outputs)."""
    out: list[dict[str, Any]] = []
    for record in records:
        out.extend(_runtime_messages(record))
    return out


def _runtime_messages(record: MessageRecord) -> list[dict[str, Any]]:
    # One stored message can hold text and several calls; each becomes its own
    # runtime message, numbered after the stored one.
    return [
        {
            "id": f"{record.id}.{index}",
            "type": kind,
            "role": role,
            "content": [part],
            "status": "completed",
            "metadata": {"kind": record.kind, "task_id": record.task_id},
        }
        for index, (kind, role, part) in enumerate(_parts(record.payload))
    ]


def _parts(payload: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    role = str(payload.get("role", "assistant"))
    if role == "tool":
        data: dict[str, Any] = {
            "call_id": payload.get("tool_call_id"),
            "output": _text(payload.get("content")),
        }
        return [("plugin_call_output", "tool", {"type": "data", "data": data})]
    parts: list[tuple[str, str, dict[str, Any]]] = []
    text = _text(payload.get("content"))
    if text:
        parts.append(("message", role, {"type": "text", "text": text}))
    for call in payload.get("tool_calls") or []:
        function = call.get("function", {})
        data = {
            "call_id": call.get("id"),
            "name": function.get("name"),
            "arguments": function.get("arguments"),
        }
        parts.append(("plugin_call", role, {"type": "data", "data": data}))
    return parts


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return json.dumps(content)
