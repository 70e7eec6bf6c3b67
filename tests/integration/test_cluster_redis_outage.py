"""Redis lost, stalled and back, with three real nodes on one PostgreSQL database and a
Redis of the test's own (the shared one must not be stopped): a person asking another
node about node a's call gets a clear answer, never a fault, and a stream followed
elsewhere goes on from the store.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_support import Cluster, three_nodes
from core_support import sse_events, wait_for

from redis_support import OwnRedis

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TICKER = "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.1; done"
ANSWER_SECONDS = 3.0
PAUSE_MS = 2000
# redis-py's own socket timeout: the longest a stalled Redis holds one command.
SOCKET_TIMEOUT = 5.0


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    with OwnRedis.running(tmp_path / "redis") as server:
        yield server


@pytest.fixture
def cluster(tmp_path: Path, own_redis: OwnRedis) -> Iterator[Cluster]:
    yield from three_nodes(
        tmp_path,
        TETHER_NODE_ANSWER_SECONDS=str(ANSWER_SECONDS),
        TETHER_REDIS_URL=own_redis.url,
    )


class Follower:
    """A client following a call's /stream on one node, on a thread of its own."""

    def __init__(self, node: Any, path: str) -> None:
        self.events: list[tuple[int | None, dict[str, Any]]] = []
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._follow, args=(node, path), daemon=True)
        self._thread.start()

    def _follow(self, node: Any, path: str) -> None:
        headers = {"Authorization": f"Bearer {node.token}"}
        try:
            with httpx.stream("GET", node.base_url + path, headers=headers, timeout=30) as r:
                assert r.status_code == 200, r.read()
                for event in sse_events(r.iter_lines()):
                    self.events.append((event.id, event.data))
        except BaseException as exc:
            self.failure = exc

    def numbers(self) -> list[int]:
        text = "".join(data.get("text", "") for _, data in list(self.events))
        return [int(n) for n in re.findall(r"line-(\d+)", text)]

    def done(self) -> dict[str, Any]:
        self._thread.join(30)
        assert not self._thread.is_alive(), "the stream did not end"
        assert self.failure is None, repr(self.failure)
        return self.events[-1][1]


def test_a_call_on_another_node_answers_clearly_while_redis_is_away(
    cluster: Cluster, own_redis: OwnRedis
) -> None:
    session, task_id, call = cluster.stack(0).start_shell(TICKER)
    base = f"/api/tool-calls/{session}/{call['tool_call_id']}"
    follower = Follower(cluster.nodes[1], f"{base}/stream")
    wait_for(lambda: len(follower.numbers()) >= 3, what="the stream on node b")

    # Redis stalled: the answer is one of the two a person can act on, within the time
    # the node waits for an answer plus the longest a stalled command is held.
    own_redis.pause(PAUSE_MS)
    started = time.monotonic()
    resp = cluster.api(2, "POST", f"{base}/extend-deadline", json={"seconds": 600})
    assert resp.status_code in (202, 503), resp.text
    assert time.monotonic() - started < ANSWER_SECONDS + SOCKET_TIMEOUT + 2

    # Redis gone: asking node a to act is a 502 that says why, not a 500.
    own_redis.stop()
    resp = cluster.api(2, "POST", f"{base}/cancel", json={"force": True})
    assert resp.status_code == 502, resp.text
    assert "Redis did not answer" in resp.json()["detail"]
    # What the store holds is still read on any node.
    output = cluster.api(2, "GET", f"{base}/output")
    assert output.status_code == 200, output.text
    assert "line-1\n" in output.json()["content"][0]["text"]
    # The stream on node b goes on from the store meanwhile.
    reached = max(follower.numbers())
    wait_for(lambda: max(follower.numbers()) >= reached + 10, what="the stream to go on")
    assert follower.failure is None, repr(follower.failure)

    # Redis back: the cancel goes through once node a reads its requests again (a
    # cancel it carried out as its asker gave up leaves the call ended: 409).
    own_redis.start()

    def cancelled() -> bool:
        resp = cluster.api(2, "POST", f"{base}/cancel", json={"force": True})
        return resp.status_code in (202, 409)

    wait_for(cancelled, timeout=30, what="the cancel")
    assert follower.done() == {"type": "done", "end_state": "cancelled", "status": "completed"}
    numbers = follower.numbers()
    assert numbers == list(range(1, numbers[-1] + 1)), numbers
    ids = [event_id for event_id, _ in follower.events]
    assert ids == sorted(set(ids)), ids
    assert cluster.stack(1).wait_task(task_id)["result"]["status"] == "completed"
    assert cluster.api(0, "GET", base).json()["end_state"] == "cancelled"
