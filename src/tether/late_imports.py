"""Packages loaded when first needed, never at start-up.

The MCP SDK (client and server), the model SDK and Alembic cost a start about 0.8 s
and an idle server about 30 MB, and many servers use some of them late or never.
Their importers call :func:`load` first: the import runs in a worker thread, so the
event loop goes on serving meanwhile, and once it is done the module's own
``from ... import`` costs nothing. ``tests/unit/mcp/test_mcp_mount.py`` checks that a
start imports none of them.
"""

from __future__ import annotations

import asyncio
import importlib


async def load(module: str) -> None:
    """Import ``module`` in a worker thread (at once when it is already imported).
    Requests that ask together wait for the same import."""
    await asyncio.to_thread(importlib.import_module, module)
