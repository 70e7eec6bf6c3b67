"""A restart with 1,000 live keeper calls across 100 sessions: how long until the new
server has adopted them all?

Each of 100 sessions runs a turn whose model reply asks for 10 parallel `sleep` calls,
under the keeper (TETHER_KEEPER=1). Once all 1,000 run, the server is killed (SIGKILL)
and started again on the same home: adoption (and resuming the 100 tasks) happens
before /api/healthz answers, so start-to-healthy is the figure, checked by listing all
1,000 calls `running` under their ids. An empty home's start is measured for scale.
Run: python bench/bench_keeper_restart.py   (target: all adopted in < 5 s)
"""

from __future__ import annotations

from collections import Counter

from _support import FakeModel, Server, chat_body, report, shell_reply, wait_until

from tether.keeper import client, layout

SESSIONS = 100
PER_SESSION = 10


def main() -> None:
    model = FakeModel()
    env = {
        "TETHER_KEEPER": "1",
        "TETHER_MAX_CALLS_TOTAL": "4096",
        "TETHER_CANCEL_GRACE_SECONDS": "0.5",
    }
    server = Server(**env)
    try:
        empty_start = server.start()
        server.register(model)
        model.script(*[shell_reply(*["sleep 600"] * PER_SESSION)] * SESSIONS)
        sessions = [f"console:adopt-{i:03d}" for i in range(SESSIONS)]
        tasks = [
            server.client.post("/api/console/chat/task", json=chat_body("go", s)).json()
            for s in sessions
        ]

        session_of: dict[str, str] = {}

        def running_ids() -> set[str]:
            ids = set()
            for s in sessions:
                for item in server.client.get(f"/api/tool-calls/{s}").json()["items"]:
                    if item["status"] == "running":
                        ids.add(item["tool_call_id"])
                        session_of[item["tool_call_id"]] = s
            return ids

        def fates(ids: set[str]) -> Counter[str]:
            """What became of calls not listed running (there should be none)."""
            found: Counter[str] = Counter()
            for call_id in ids:
                info = server.client.get(f"/api/tool-calls/{session_of[call_id]}/{call_id}")
                body = info.json()
                reason = str((body.get("extra") or {}).get("end_reason"))[:80]
                found[f"{body.get('status')}/{body.get('end_state')}: {reason}"] += 1
            return found

        wait_until(lambda: len(running_ids()) == SESSIONS * PER_SESSION, timeout=600, step=0.5)
        # Listed running from the moment it is registered; under the runner once its
        # call.json is written (a start still queued at the kill was never started).
        specs = layout.calls_dir(server.home)
        wait_until(lambda: len(list(specs.glob(f"*/{layout.SPEC_NAME}"))) == 1000, 600, 0.5)
        before = running_ids()
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait()
        restart = server.start()
        after = running_ids()
        ok = after == before and restart < 5
        if after != before:
            print(f"not adopted: {dict(fates(before - after))}", flush=True)
        note = (
            f"kill -9, start to healthy with all {len(after)} of {len(before)} listed running "
            f"under their ids (empty home: {empty_start:.2f} s)"
        )
        report("keeper: restart adopting 1,000 live calls", restart, "s", "< 5", ok, note)
        for task in tasks:
            server.client.post(f"/api/console/chat/task/{task['task_id']}/stop")
        wait_until(lambda: not running_ids(), timeout=300, step=0.5)
    finally:
        server.stop()
        # The runner outlives the server by design: stop it (and what it still runs)
        # before the home goes.
        client.stop_runner(server.home, timeout=60)
        server.close()
        model.close()


if __name__ == "__main__":
    main()
