"""Cancel -> the call's whole process tree gone (the command's shell and its background child).

Timed from sending POST .../cancel until psutil sees none of the processes alive
(zombies count as gone). Run: python bench/bench_cancel.py [rounds]   (target: median < 50 ms)
"""

from __future__ import annotations

import sys
import time
import uuid

import psutil
from _support import (
    FakeModel,
    Server,
    chat_body,
    median,
    pct,
    report,
    shell_reply,
    wait_until,
)
from _support import helpers as _helpers

host_pid = _helpers.host_pid


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def one_cancel(server: Server, model: FakeModel, force: bool, via: Server | None = None) -> float:
    """One round: a call on ``server`` cancelled through ``via`` (default: the same
    server); milliseconds from the request to the tree gone."""
    session = f"console:cancel-{uuid.uuid4().hex[:8]}"
    pid_file = server.workspace / f"{session.split(':')[1]}.pids"
    # Written aside and renamed, so the reader never sees half a line (a cut pid named
    # some other process, and the round waited for it to die).
    name = pid_file.name
    command = f"sh -c 'sleep 300 & echo $$ $! > {name}.tmp; mv {name}.tmp {name}; wait'"
    model.script(shell_reply(command), {"text": "ok"})
    task = server.client.post("/api/console/chat/task", json=chat_body("go", session)).json()
    pids_text = wait_until(lambda: pid_file.exists() and pid_file.read_text().strip())
    call = server.client.get(f"/api/tool-calls/{session}").json()["items"][0]
    # The shell and its background child, by their numbers in the sandbox's pid namespace.
    inside = [int(p) for p in pids_text.split()]
    pids = [wait_until(lambda p=p: host_pid(p, call["tool_call_id"])) for p in inside]
    started = time.perf_counter()
    (via or server).client.post(
        f"/api/tool-calls/{session}/{call['tool_call_id']}/cancel", json={"force": force}
    ).raise_for_status()
    wait_until(lambda: not any(_alive(p) for p in pids), timeout=10, step=0.0005)
    elapsed = (time.perf_counter() - started) * 1000
    # Let the turn finish (it asks the model once more) before the next round's script.
    path = f"/api/console/chat/task/{task['task_id']}"
    wait_until(lambda: server.client.get(path).json()["status"] == "finished", step=0.01)
    return elapsed


def main(rounds: int) -> None:
    model = FakeModel()
    server = Server(TETHER_CANCEL_GRACE_SECONDS="2")
    try:
        server.start()
        server.register(model)
        one_cancel(server, model, force=False)  # warm-up
        for force in (False, True):
            ms = [one_cancel(server, model, force) for _ in range(rounds)]
            kind = "force (SIGKILL)" if force else "graceful (SIGTERM)"
            value = median(ms)
            note = f"{rounds} rounds, p90 {pct(ms, 90):.0f} ms"
            report(f"cancel {kind} -> tree gone (median)", value, "ms", "< 50", value < 50, note)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
