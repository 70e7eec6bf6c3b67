"""The set of tools a server offers, by name.

Built-in tools are fixed at start; other sources (MCP servers) come and go while the
server runs, so they are asked each time: a turn sees the tools that exist when it asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tether.tools.base import Tool

ToolSource = Callable[[], Iterable[Tool]]


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool], sources: Iterable[ToolSource] = ()) -> None:
        self._tools = {t.name: t for t in tools}
        self._sources = list(sources)

    def _all(self) -> dict[str, Tool]:
        """Every tool now offered; a built-in name is never shadowed by a source's."""
        if not self._sources:
            return self._tools
        tools: dict[str, Tool] = {}
        for source in self._sources:
            tools.update((t.name, t) for t in source())
        tools.update(self._tools)
        return tools

    def get(self, name: str) -> Tool | None:
        return self._all().get(name)

    def names(self) -> list[str]:
        return list(self._all())

    def openai_specs(self) -> list[dict[str, Any]]:
        return [t.openai_spec() for t in self._all().values()]
