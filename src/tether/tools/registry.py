"""The set of tools a server offers, by name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tether.tools.base import Tool


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def openai_specs(self) -> list[dict[str, Any]]:
        return [t.openai_spec() for t in self._tools.values()]
