"""JSON request bodies as valid Unicode, for every API route.

A JSON body can hold an unpaired surrogate (``"\\ud83d"``); parsed as is, it would be
stored and later break every read of it, or fail the model request it is sent on in.
Each API router uses :class:`ValidTextRoute`, so handlers and their pydantic models only
ever see valid text, nested at most MAX_BODY_DEPTH deep: a body nested a few hundred deep
parses, is stored, then fails whatever serialises it again (a 500, and a response lost).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

from tether import nesting
from tether.text import may_hold_surrogates, valid_data

#: Far deeper than any body of this API nests (a chat turn's 4, a cron job's 6).
MAX_BODY_DEPTH = 64


class ValidTextRequest(Request):
    """A request whose parsed JSON body has every string made valid Unicode."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            value = json.loads(body)
            if nesting.depth(value, MAX_BODY_DEPTH) > MAX_BODY_DEPTH:
                raise HTTPException(
                    422,
                    [
                        {
                            "type": "json_too_deep",
                            "loc": ["body"],
                            "msg": f"nests lists and objects more than {MAX_BODY_DEPTH} deep",
                        }
                    ],
                )
            self._json = valid_data(value) if may_hold_surrogates(body) else value
        return self._json


class ValidTextRoute(APIRoute):
    """An API route that reads its body through :class:`ValidTextRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def handle(request: Request) -> Response:
            valid = ValidTextRequest(request.scope, request.receive)
            if not takes_body and _may_have_body(valid):
                await _refuse_broken_json(valid)
            return await handler(valid)

        return handle


def _may_have_body(request: Request) -> bool:
    headers = request.headers
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


async def _refuse_broken_json(request: Request) -> None:
    """A route that takes no body ignores one, but not one that is broken: a client
    sending that meant something else, and the route would act anyway (an offload, a
    stop) on a request that fails everywhere else. Whitespace and valid JSON pass."""
    body = await request.body()
    if not body.strip():
        return
    try:
        json.loads(body)
    except ValueError:
        raise HTTPException(
            422,
            [{"type": "json_invalid", "loc": ["body"], "msg": "the body is not valid JSON"}],
        ) from None
