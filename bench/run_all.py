"""Run every benchmark and print one table (Markdown).

Run: python bench/run_all.py  (or `make bench`). Each script prints JSON result lines;
a script that fails shows as FAILED with its last error line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "bench_startup.py",
    "bench_list.py",
    "bench_chat.py",
    "bench_cancel.py",
    "bench_stream.py",
    "bench_many_calls.py",
    "bench_busy_healthz.py",
    "bench_shell_analysis.py",
    "bench_mcp.py",
    "bench_sandbox.py",
    "bench_keeper.py",
    "bench_keeper_restart.py",
    "bench_cluster.py",
]


def run(script: str) -> list[dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / script)],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        return [{"metric": script, "value": "FAILED", "note": "timed out"}]
    rows = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["?"])[-1]
    if done.returncode != 0:
        # A script that fails part-way still shows what it measured before, then this.
        rows.append({"metric": script, "value": "FAILED", "note": last[-200:]})
    elif not rows:
        text = "; ".join(done.stdout.strip().splitlines())
        rows.append({"metric": script, "value": "see notes", "note": text[-200:]})
    return rows


def main() -> None:
    print("| metric | result | target | met | notes |")
    print("|---|---|---|---|---|")
    for script in SCRIPTS:
        for row in run(script):
            met = {True: "yes", False: "**no**"}.get(row.get("ok"), "")  # type: ignore[arg-type]
            result = f"{row['value']} {row.get('unit', '')}".strip()
            cells = [row["metric"], result, row.get("target", ""), met, row.get("note", "")]
            print("| " + " | ".join(str(c) for c in cells) + " |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
