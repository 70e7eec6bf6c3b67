"""Other nodes, as the services see them: the one way to have the node that runs a call,
a task or an approval's call carry something out. The cluster's Redis requests
(``cluster/node_requests.py``) implement it; on one node there is nothing elsewhere.

Several nodes on one database without Redis cannot reach each other: what another node
runs is then refused (:func:`unreachable`), never answered as if it had ended."""

from __future__ import annotations

from typing import Any, Protocol

from tether.errors import Unavailable


class Elsewhere(Protocol):
    async def ask(self, owner: str, action: str, args: dict[str, Any], what: str) -> Any:
        """Have the server ``owner`` carry out ``action``; its result, or its error raised
        here (NotAnswering, naming ``what``, if it does not answer in time)."""


def unreachable(what: str) -> Unavailable:
    """The refusal (HTTP 502) of a request about ``what`` (``"task t1"``), which another
    node on this database runs, from a node that has no way to pass it on (no Redis)."""
    return Unavailable(
        f"{what} runs on another node on this database, and only that node can act on it: "
        "without TETHER_REDIS_URL (the same on every node, docs/DEPLOY.md) nodes cannot "
        "pass requests to each other; send the request to the node that runs it"
    )
