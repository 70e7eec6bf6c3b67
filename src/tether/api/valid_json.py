"""JSON request bodies as valid Unicode, for every API route.

A JSON body can hold an unpaired surrogate (``"\\ud83d"``); parsed as is, it would be
stored and later break every read of it, or fail the model request it is sent on in.
Each API router uses :class:`ValidTextRoute`, so handlers and their pydantic models only
ever see valid text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tether.text import may_hold_surrogates, valid_data


class ValidTextRequest(Request):
    """A request whose parsed JSON body has every string made valid Unicode."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            value = json.loads(body)
            self._json = valid_data(value) if may_hold_surrogates(body) else value
        return self._json


class ValidTextRoute(APIRoute):
    """An API route that reads its body through :class:`ValidTextRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(ValidTextRequest(request.scope, request.receive))

        return handle
