"""Requests from one node to another through Redis, each with an answer.

A request goes to the node that must carry it out (the one running a call, waiting on an
approval or running a task), named by its owner id: a list in Redis per owner, which
that node's server pops. The answer comes back on a list of the request's own. One
deadline, ``timeout`` from the moment of asking, covers handing the request to Redis and
waiting for the answer: a Redis stalled past it is a 502 (Unavailable), an owner that
has not answered by then a 503 (NotAnswering), and the request is dropped unread, so a
node that was stalled never acts on a request whose asker has given up. Errors cross as
their kind and message and are raised again on the asking side, so a 404 or a 409 of the
owner is the asker's 404 or 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tether.cluster import signed
from tether.cluster.redis_link import RedisLink
from tether.errors import KINDS, NotAnswering, TetherError, Unavailable

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

# A request list nobody pops (its node is gone) disappears after this long.
_QUEUE_TTL_SECONDS = 60
# The longest single wait for an answer (see _reply_to).
_ANSWER_SLICE = 1.0
# How much past the deadline the last wait's reply may come before Redis counts as not
# answering (a round trip, with room for a busy machine).
_LAST_REPLY_GRACE = 0.5
_ANSWER_TTL_SECONDS = 30


def _kind_of(exc: BaseException) -> str | None:
    """The name of the error's kind; None for an error of none (a bug)."""
    if not isinstance(exc, TetherError):
        return None
    return next((name for name, kind in KINDS.items() if isinstance(exc, kind)), None)


class NodeRequests:
    """Asks other nodes to act, and answers what they ask of this one."""

    def __init__(self, link: RedisLink, owner: str, timeout: float, key: bytes) -> None:
        self._link = link
        # Signs what this node asks and answers, and checks what it is asked
        # (see signed.py).
        self._key = key
        self._owner = owner
        self._timeout = timeout
        self._handlers: dict[str, Handler] = {}
        self._serving: asyncio.Task[None] | None = None
        self._work: set[asyncio.Task[None]] = set()

    def _queue(self, owner: str) -> str:
        return self._link.key("owner", owner, "requests")

    # ------------------------------------------------------------ asking

    async def ask(self, owner: str, action: str, args: dict[str, Any], what: str) -> Any:
        """Have ``owner`` carry out ``action`` and return its result; its error kinds are
        raised here, NotAnswering (naming ``what``) if it does not answer in time, and
        Unavailable if Redis does not answer.

        One deadline, ``timeout`` from now, covers the whole of it: handing the request
        to Redis, the owner's work and reading its answer. The owner is given the same
        deadline: a request a stalled Redis delivers after it is dropped unread, never
        carried out for an asker that has given up."""
        request_id = uuid.uuid4().hex
        answer_key = self._link.key("answer", request_id)
        deadline = asyncio.get_running_loop().time() + self._timeout
        message = {
            "id": request_id,
            "action": action,
            "args": args,
            "answer_to": answer_key,
            "give_up_at": time.time() + self._timeout,
        }
        asking = f"ask the node that holds {what}"
        async with (
            self._link.reaching_by(asking, deadline),
            self._link.client.pipeline(transaction=False) as pipe,
        ):
            pipe.lpush(self._queue(owner), signed.sign(self._key, message))
            pipe.expire(self._queue(owner), _QUEUE_TTL_SECONDS)
            await pipe.execute()
        # Asked: from here the owner may carry the request out, whether or not its
        # answer can reach this node.
        reading = f"hear whether the node that holds {what} carried the request out"
        # The last read waits on Redis up to the deadline itself: its reply may take a
        # moment more.
        async with self._link.reaching_by(reading, deadline + _LAST_REPLY_GRACE):
            found = await self._reply_to(answer_key, deadline)
        if found is None:
            raise NotAnswering(
                f"the node that holds {what} did not answer within {self._timeout:g} s; "
                "it may be overloaded or gone (a node that is gone is declared dead "
                "once its lease runs out)"
            )
        answer = signed.opened(self._key, found[1])
        if answer is None:
            raise Unavailable(f"the answer about {what} was not signed by a node of this cluster")
        if answer.get("ok"):
            return answer.get("result")
        kind = KINDS.get(answer.get("kind") or "")
        if kind is None:
            raise Unavailable(f"the node that holds {what} failed: {answer.get('message')}")
        raise kind(answer.get("message") or "")

    async def _reply_to(self, answer_key: str, deadline: float) -> Any:
        """The answer (``[key, value]``), or None once ``deadline`` (the event loop's
        clock) has passed. Waited for in slices shorter than the client's socket timeout
        (redis-py 8 reads with 5 s by default), which a blocking read longer than it
        would hit (a 500, not a 503)."""
        client = self._link.client
        loop = asyncio.get_running_loop()
        socket_timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        step = min(_ANSWER_SLICE, socket_timeout / 2) if socket_timeout else _ANSWER_SLICE
        while (left := deadline - loop.time()) > 0:
            found = await client.blpop([answer_key], timeout=max(0.01, min(left, step)))
            if found is not None:
                return found
        return None

    # ------------------------------------------------------------ answering

    def handle(self, action: str, handler: Handler) -> None:
        """Carry out ``action`` when another node asks (``handler(args) -> result``)."""
        self._handlers[action] = handler

    def start(self) -> None:
        self._serving = asyncio.create_task(self._serve_forever(), name="node-requests")

    async def close(self) -> None:
        if self._serving is not None:
            self._serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._serving
        for task in list(self._work):
            task.cancel()

    async def _serve_forever(self) -> None:
        queue = self._queue(self._owner)
        failing = False
        while True:
            try:
                found = await self._link.client.brpop([queue], timeout=1)
            except Exception as exc:
                if not failing:  # an outage is logged once
                    log.warning("cannot read other nodes' requests from Redis (%s)", exc)
                failing = True
                await asyncio.sleep(1)
                continue
            if failing:
                log.info("reading other nodes' requests from Redis again")
                failing = False
            if found is None:
                continue
            message = signed.opened(self._key, found[1])
            if message is None:
                log.warning("dropped a request that was not signed by a node of this cluster")
                continue
            task = asyncio.create_task(self._answer(message))
            self._work.add(task)
            task.add_done_callback(self._work.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        action = message.get("action", "")
        if time.time() > float(message.get("give_up_at", 0)):
            log.warning("dropped a %s request its asker has given up on", action)
            return
        handler = self._handlers.get(action)
        try:
            if handler is None:
                raise Unavailable(f"this node does not know the request {action!r}")
            answer = {"ok": True, "result": await handler(message.get("args") or {})}
        except Exception as exc:
            kind = _kind_of(exc)
            if kind is None:
                log.exception("a %s request from another node failed", action)
            answer = {"ok": False, "kind": kind, "message": str(exc)}
        # Redis may have gone away since the request was read: what was done stays done,
        # and the asker, which reads the answer from the same Redis, is told it could not
        # hear back (502) or that no answer came (503).
        done = "carried out" if answer["ok"] else "refused"
        try:
            with self._link.reaching(f"answer a {action} request it {done}"):
                async with self._link.client.pipeline(transaction=False) as pipe:
                    pipe.rpush(message["answer_to"], signed.sign(self._key, answer))
                    pipe.expire(message["answer_to"], _ANSWER_TTL_SECONDS)
                    await pipe.execute()
        except Unavailable as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("could not answer a %s request from another node", action)
