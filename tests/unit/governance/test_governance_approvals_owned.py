"""Which node decides an approval in a cluster: the one whose call waits on it, asked
through the cluster; never this node asking itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from node_stores import call, owner_of

from tether.governance.approvals import ApprovalNotFound, ApprovalService
from tether.store.store import Store
from tether.toolcalls.call import Invocation


class Asked:
    """The cluster as the service sees it, keeping what it is asked."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []

    async def ask(self, owner: str, action: str, args: dict[str, Any], what: str) -> Any:
        self.seen.append((owner, action, args))
        return None


def _inv(call_id: str) -> Invocation:
    return Invocation(call_id, "s", None, "default", "shell", {"command": "ls"})


async def test_a_request_left_at_a_detaching_exit_is_not_asked_of_this_node(
    servers: Callable[[], Store],
) -> None:
    """At an exit that leaves calls for the next start, a call's wait ends with its
    request still pending, and the call still this node's: a person's answer to it was
    sent to this very node through Redis (which, answering, did the same again)."""
    here, there = servers(), servers()
    asked = Asked()
    service = ApprovalService(here.governance, 300, elsewhere=asked, owner=owner_of(here))
    await here.tool_calls.insert(call("mine", "awaiting_approval"))
    await there.tool_calls.insert(call("theirs", "awaiting_approval"))
    mine = await service.open(_inv("mine"), "strict", [])
    theirs = await ApprovalService(there.governance, 300).open(_inv("theirs"), "strict", [])

    waiting = asyncio.create_task(service.wait(mine.request_id))
    await asyncio.sleep(0)  # it waits
    service.detaching = True
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    left = await here.governance.get_approval(mine.request_id)
    assert left is not None and left.status == "pending"  # the next start denies it

    # Nothing on this node waits on it, and no other node can: unknown, as on one node.
    with pytest.raises(ApprovalNotFound):
        await service.resolve(mine.request_id, "s", True, None)
    # Another node's request is still that node's to decide.
    await service.resolve(theirs.request_id, "s", True, None)
    assert [(owner, action) for owner, action, _ in asked.seen] == [
        (owner_of(there), "approval.resolve")
    ]
