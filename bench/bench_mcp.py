"""The cost Tether adds to an MCP tool call, over the MCP server's own time.

Three figures, medians over the same rounds: a chat turn whose model calls the fixture
server's `echo` over stdio; the same turn calling the in-process `get_current_time`; and
the bare SDK round trip of `echo` to a second copy of the server from this process (the
server's own time plus the pipe: what any MCP client pays). Tether's overhead is the first
minus the second minus the third.

Run: python bench/bench_mcp.py [rounds]   (target: median overhead < 5 ms)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time

from _support import ROOT, FakeModel, Server, chat_body, median, pct, report, wait_until

FIXTURE = ROOT / "tests" / "integration" / "mcp_fixture_server.py"


def one_turn(server: Server, model: FakeModel, session: str, tool: str, args: str) -> float:
    model.script({"tool_calls": [(tool, args)]}, {"text": "done"})
    started = time.perf_counter()
    path = "/api/console/chat?events=tether"  # Tether's events (the default is QwenPaw's)
    with server.client.stream("POST", path, json=chat_body("go", session)) as resp:
        for line in resp.iter_lines():
            if line.startswith("data:") and json.loads(line[5:])["type"] == "final":
                break
    return (time.perf_counter() - started) * 1000


async def _sdk_round_trips(rounds: int, state: str) -> list[float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE), "stdio", state])
    samples: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for i in range(rounds + 3):
            started = time.perf_counter()
            await session.call_tool("echo", {"text": "hi"})
            if i >= 3:
                samples.append((time.perf_counter() - started) * 1000)
    return samples


def main(rounds: int) -> None:
    model = FakeModel()
    server = Server()
    state = tempfile.mkdtemp(prefix="tether-bench-mcp-")
    try:
        server.start()
        server.register(model)
        spec = {
            "name": "fixture",
            "command": sys.executable,
            "args": [str(FIXTURE), "stdio", state],
        }
        resp = server.client.post("/api/mcp", json={"client_key": "fx", "client": spec})
        assert resp.status_code == 201, resp.text
        wait_until(lambda: server.client.get("/api/mcp/fx").json()["status"] == "ready")
        kinds = {"mcp": ("fx__echo", '{"text": "hi"}'), "local": ("get_current_time", "{}")}
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        for i in range(rounds + 3):
            for kind, (tool, args) in kinds.items():
                ms = one_turn(server, model, f"console:bench-{kind}-{i}", tool, args)
                if i >= 3:  # warm-up rounds are not counted
                    samples[kind].append(ms)
        sdk = asyncio.run(_sdk_round_trips(rounds, state))
        overhead = median(samples["mcp"]) - median(samples["local"]) - median(sdk)
        note = (
            f"{rounds} rounds; turn median {median(samples['mcp']):.1f} ms with the MCP call, "
            f"{median(samples['local']):.1f} ms in-process; bare SDK round trip "
            f"{median(sdk):.1f} ms (p90 {pct(sdk, 90):.1f})"
        )
        report("MCP call overhead, stdio echo (median)", overhead, "ms", "< 5", overhead < 5, note)
    finally:
        server.close()
        model.close()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
