"""A turn's events as QwenPaw's console stream carries them (its runtime protocol).

QwenPaw streams a turn as runtime objects: a ``response`` (created, in progress, then
completed / failed / cancelled with every finished message in ``output``), ``message``
envelopes (``reasoning``, text, ``plugin_call``, ``plugin_call_output``) and the ``content`` chunks
inside them, each frame numbered by ``sequence_number``. This module turns Tether's
turn events into those frames. Pure: no I/O.

Tether's own events (tool call started/ended, approval requested) have no runtime
counterpart and are left out here; Tether's console asks for its own frames instead.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

Frame = dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _message(kind: str, role: str) -> Frame:
    return {
        "object": "message",
        "id": f"msg_{uuid.uuid4().hex}",
        "type": kind,
        "role": role,
        "name": "assistant",
        "content": [],
        "status": "in_progress",
    }


def _content(msg_id: str, kind: str, status: str | None, **fields: Any) -> Frame:
    return {
        "object": "content",
        "type": kind,
        "delta": False,
        "index": 0,
        "status": status,
        "msg_id": msg_id,
        **fields,
    }


_END_STATUS = {"completed": "completed", "cancelled": "cancelled"}


class RuntimeStream:
    """Translates one turn; call :meth:`start`, then :meth:`feed` per event."""

    def __init__(self, session_id: str, task_id: str) -> None:
        self._seq = 0
        self._text: Frame | None = None
        self._fragments: list[str] = []
        self._reasoning: Frame | None = None
        self._thoughts: list[str] = []
        self._names: dict[str, str] = {}
        self.response: Frame = {
            "object": "response",
            "id": f"response_{uuid.uuid4().hex}",
            "status": "created",
            "output": [],
            "created_at": _now(),
            "session_id": session_id,
            "task_id": task_id,
        }

    def _emit(self, frame: Frame) -> Frame:
        self._seq += 1
        return {**frame, "sequence_number": self._seq}

    def start(self) -> list[Frame]:
        """The response, created and then in progress."""
        created = self._emit(self.response)
        self.response["status"] = "in_progress"
        return [created, self._emit(self.response)]

    def feed(self, event: dict[str, Any]) -> list[Frame]:
        """The frames one Tether event becomes (none for Tether-only events)."""
        kind = event.get("type")
        if kind == "reasoning_delta":
            return self._reasoning_delta(str(event.get("text", "")))
        frames = self._close_reasoning() if kind in ("text_delta", "message", "final") else []
        return frames + self._translate(kind, event)

    def _translate(self, kind: object, event: dict[str, Any]) -> list[Frame]:
        if kind == "text_delta":
            return self._text_delta(str(event.get("text", "")))
        if kind == "message":
            payload = event.get("message") or {}
            if event.get("kind") == "assistant":
                return self._assistant(payload)
            if event.get("kind") == "tool":
                return self._tool_result(payload)
        if kind == "final":
            return self._final(event.get("result") or {})
        return []

    def _reasoning_delta(self, text: str) -> list[Frame]:
        frames = []
        if self._reasoning is None:
            self._reasoning = _message("reasoning", "assistant")
            frames.append(self._emit(self._reasoning))
        self._thoughts.append(text)
        msg_id = self._reasoning["id"]
        frames.append(self._emit(_content(msg_id, "text", None, text=text, delta=True)))
        return frames

    def _close_reasoning(self) -> list[Frame]:
        """QwenPaw ends a reasoning message before whatever the model says next."""
        if self._reasoning is None:
            return []
        final = _content(self._reasoning["id"], "text", None, text="".join(self._thoughts))
        frames = [self._emit(final), self._complete(self._reasoning, final)]
        self._reasoning, self._thoughts = None, []
        return frames

    def _text_delta(self, text: str) -> list[Frame]:
        frames = []
        if self._text is None:
            self._text = _message("message", "assistant")
            frames.append(self._emit(self._text))
        self._fragments.append(text)
        frames.append(self._emit(_content(self._text["id"], "text", None, text=text, delta=True)))
        return frames

    def _assistant(self, payload: dict[str, Any]) -> list[Frame]:
        frames = self._close_text(payload.get("content"))
        for call in payload.get("tool_calls") or []:
            frames += self._plugin_call(call)
        return frames

    def _close_text(self, content: object, status: str = "completed") -> list[Frame]:
        """End the text message under way (``status``: ``cancelled`` for the text so far
        of a turn that was stopped, as QwenPaw marks it)."""
        text = content if isinstance(content, str) else "".join(self._fragments)
        frames: list[Frame] = []
        if not text:
            self._text, self._fragments = None, []
            return frames
        if self._text is None:
            self._text = _message("message", "assistant")
            frames.append(self._emit(self._text))
        final = _content(self._text["id"], "text", None, text=text)
        frames.append(self._emit(final))
        frames.append(self._complete(self._text, final, status))
        self._text, self._fragments = None, []
        return frames

    def _complete(self, message: Frame, content: Frame, status: str = "completed") -> Frame:
        part = {k: v for k, v in content.items() if k not in ("msg_id", "status")}
        done = {**message, "content": [part], "status": status}
        self.response["output"].append(done)
        return self._emit(done)

    def _plugin_call(self, call: dict[str, Any]) -> list[Frame]:
        function = call.get("function") or {}
        call_id, name = str(call.get("id", "")), str(function.get("name", ""))
        self._names[call_id] = name
        message = _message("plugin_call", "assistant")
        stub = {"call_id": call_id, "name": name, "arguments": ""}
        data = {**stub, "arguments": str(function.get("arguments", ""))}
        final = _content(message["id"], "data", "completed", data=data)
        return [
            self._emit(message),
            self._emit(_content(message["id"], "data", "in_progress", data=stub, delta=True)),
            self._emit(final),
            self._complete(message, final),
        ]

    def _tool_result(self, payload: dict[str, Any]) -> list[Frame]:
        call_id = str(payload.get("tool_call_id", ""))
        content = payload.get("content")
        output = content if isinstance(content, str) else json.dumps(content)
        message = _message("plugin_call_output", "tool")
        stub = {"call_id": call_id, "name": self._names.get(call_id, ""), "output": ""}
        final = _content(message["id"], "data", "completed", data={**stub, "output": output})
        return [
            self._emit(message),
            self._emit(_content(message["id"], "data", "in_progress", data=stub)),
            self._emit(final),
            self._complete(message, final),
        ]

    @property
    def ended(self) -> bool:
        """Whether the response has its final frame."""
        return "completed_at" in self.response

    def cut_short(self, message: str) -> list[Frame]:
        """The last frames of a stream that ends before its turn (the server exits): the
        response ``failed`` with error code ``server_exiting`` and ``message``."""
        return self._final({"status": "failed", "error": message}, code="server_exiting")

    def _final(self, result: dict[str, Any], code: str = "error") -> list[Frame]:
        status = _END_STATUS.get(str(result.get("status")), "failed")
        # Text streamed by a turn that then failed or was stopped stays in the output;
        # QwenPaw marks that of a stopped turn cancelled, and that of a failed one
        # completed (the response's status and error say it failed).
        frames = self._close_text(None, "cancelled" if status == "cancelled" else "completed")
        self.response["status"] = status
        self.response["completed_at"] = _now()
        if status == "failed":
            message = str(result.get("error") or "the turn failed")
            self.response["error"] = {"code": code, "message": message}
        frames.append(self._emit(self.response))
        return frames
