"""Other nodes, as the services see them: the one way to have the node that runs a call,
a task or an approval's call carry something out. The cluster's Redis requests
(``cluster/node_requests.py``) implement it; on one node there is nothing elsewhere."""

from __future__ import annotations

from typing import Any, Protocol


class Elsewhere(Protocol):
    async def ask(self, owner: str, action: str, args: dict[str, Any], what: str) -> Any:
        """Have the server ``owner`` carry out ``action``; its result, or its error raised
        here (NotAnswering, naming ``what``, if it does not answer in time)."""
