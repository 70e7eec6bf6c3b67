"""Tether's own MCP endpoint (/mcp), driven by the official SDK's client: the governed
shell with live progress, cancellation that kills the tree, the token required."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import httpx2
import psutil
import pytest
from core_support import (
    Stack,
    gated,
    open_gate,
    stack_for_module,
    temporary_server,
    wait_for,
)
from helpers import host_pid
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp_support import modern_client

pytestmark = pytest.mark.integration

T = TypeVar("T")


# Every call here runs on a server that moves calls to the background after this long:
# none made over /mcp may be (its client waits on its request for the result).
OFFLOAD_AFTER = 1.0


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module(
        "mcp-endpoint",
        TETHER_CANCEL_GRACE_SECONDS="0.5",
        TETHER_OFFLOAD_AFTER_SECONDS=f"{OFFLOAD_AFTER:g}",
    )


@asynccontextmanager
async def connected(stack: Stack, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token or stack.server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(f"{stack.server.base_url}/mcp", http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def on_wire(stack: Stack, wire: str) -> Any:
    return connected(stack) if wire == "session" else modern_client(stack.server)


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("wire", ["session", "2026-07-28"])
async def test_the_shell_runs_governed_with_live_progress(stack: Stack, wire: str) -> None:
    seen: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with on_wire(stack, wire) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {
            "execute_shell_command",
            "list_tool_calls",
            "get_tool_call_output",
            "cancel_tool_call",
        }
        result = await session.call_tool(
            "execute_shell_command",
            {"command": "echo first; echo second", "session_id": "mcp:it-run"},
            progress_callback=progress,
        )
        assert not result.is_error, _text(result)
        assert "first" in _text(result) and "second" in _text(result)
        assert any("tool call call_" in m for m in seen)
        assert any("first" in m for m in seen)

        refused = await session.call_tool(
            "execute_shell_command", {"command": "rm -rf / --no-preserve-root"}
        )
        assert refused.is_error and "denied" in _text(refused)


@pytest.mark.parametrize("wire", ["session", "2026-07-28"])
async def test_cancelling_the_request_kills_the_whole_tree(stack: Stack, wire: str) -> None:
    session_id = f"mcp:it-cancel-{wire}"
    pids = stack.workspace / f"mcp-tree-pids-{wire}"
    command = (
        f"(sleep 600 & echo $! >> {pids}; setsid sleep 600 & echo $! >> {pids}; wait) & "
        f"echo $! >> {pids}; echo started; wait"
    )
    started = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "started" in message:
            started.set()

    async with on_wire(stack, wire) as session:
        call = asyncio.ensure_future(
            session.call_tool(
                "execute_shell_command",
                {"command": command, "session_id": session_id},
                progress_callback=progress,
            )
        )
        await asyncio.wait_for(started.wait(), 30)
        listed = await session.call_tool("list_tool_calls", {"session_id": session_id})
        calls = json.loads(_text(listed))
        assert len(calls) == 1 and calls[0]["status"] == "running"
        call_id = calls[0]["tool_call_id"]
        # In the sandbox the call has its own pid namespace: the host's numbers, found
        # while the tree still runs.
        written = await asyncio.to_thread(
            wait_for, lambda: len(pids.read_text().split()) == 3 and pids.read_text(), 15.0
        )
        inside = [int(p) for p in written.split()]
        numbers = [
            await asyncio.to_thread(wait_for, lambda p=p: host_pid(p, call_id), 15.0, "pid")
            for p in inside
        ]
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert len(numbers) == 3

    def all_gone() -> bool:
        return not any(psutil.pid_exists(p) and _alive(p) for p in numbers)

    await asyncio.to_thread(wait_for, all_gone, 15.0, "the tree to die")

    # The end is recorded just after the tree is gone (the tool returns, then the
    # store is written): wait for the record, not for luck.
    def recorded() -> bool:
        return bool(stack.call(session_id, call_id)["status"] == "completed")

    await asyncio.to_thread(wait_for, recorded, 15.0, "the call's end to be recorded")
    assert stack.call(session_id, call_id)["end_state"] == "cancelled"


async def test_a_call_waiting_for_approval_names_its_request(stack: Stack) -> None:
    session_id = "mcp:it-ask"
    asking = asyncio.get_running_loop().create_future()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        found = re.search(r"request (\S+);", message or "")
        if found and not asking.done():
            asking.set_result(found.group(1))

    # The stack runs with governance off: the session (made by a turn) asks for all.
    stack.model.script({"text": "hello"})
    await asyncio.to_thread(stack.wait_task, stack.submit("hi", session_id))
    level = {"approval_level": "strict"}
    settings = await asyncio.to_thread(
        stack.api, "PUT", f"/api/chats/{session_id}/settings", json=level
    )
    assert settings.status_code == 200, settings.text
    async with connected(stack) as session:
        call = asyncio.ensure_future(
            session.call_tool(
                "execute_shell_command",
                {"command": "echo asks", "session_id": session_id},
                progress_callback=progress,
            )
        )
        request_id = await asyncio.wait_for(asking, 30)
        body = {"request_id": request_id, "session_id": session_id}
        resp = await asyncio.to_thread(stack.api, "POST", "/api/approval/deny", json=body)
        assert resp.status_code == 200, resp.text
        result = await call
    assert result.is_error and "denied" in _text(result)


async def test_a_session_id_the_api_could_not_take_is_refused(stack: Stack) -> None:
    async with connected(stack) as session:
        result = await session.call_tool(
            "execute_shell_command", {"command": "echo hi", "session_id": "L" * 513}
        )
    assert result.is_error and "512" in _text(result)
    assert stack.live_calls("L" * 512) == []
    async with connected(stack) as session:
        # Bidi controls, zero-width characters and line separators disguise an id and
        # were written as they are into the log lines that name the session.
        for bad in ("a/b", "..", "a\nb", "mcp:\u202eevil", "a\u200bb", "a\u2028b", "\x85", " "):
            result = await session.call_tool(
                "execute_shell_command", {"command": "echo hi", "session_id": bad}
            )
            assert result.is_error and "session id" in _text(result), _text(result)


async def test_cancel_tool_call_and_output_tools(stack: Stack) -> None:
    session_id = "mcp:it-tools"
    async with connected(stack) as session:
        call = asyncio.ensure_future(
            session.call_tool(
                "execute_shell_command",
                {"command": "echo waiting; sleep 600", "session_id": session_id},
            )
        )
        listed = await _wait_listed(session, session_id)
        call_id = str(listed[0]["tool_call_id"])
        # Listed as soon as it is registered; its first line comes once the process runs.
        assert "waiting" in await _wait_output(session, session_id, call_id, "waiting")
        cancelled = await session.call_tool(
            "cancel_tool_call", {"tool_call_id": call_id, "session_id": session_id, "force": True}
        )
        assert not cancelled.is_error
        result = await asyncio.wait_for(call, 30)
        assert result.is_error and "cancelled" in _text(result)
        missing = await session.call_tool(
            "cancel_tool_call", {"tool_call_id": "call_nope", "session_id": session_id}
        )
        assert missing.is_error and "no tool call" in _text(missing)


async def test_a_call_is_never_moved_to_the_background(stack: Stack) -> None:
    """The client waits on its request for the result; no later message would carry it
    (no turn takes background results here). So the server's automatic offload does not
    apply, a person's offload is refused, and the request gets the real result."""
    session_id, gate = "mcp:it-offload", "mcp-offload-gate"
    model_requests = len(stack.model.requests)
    async with connected(stack) as session:
        call = asyncio.ensure_future(
            session.call_tool(
                "execute_shell_command",
                {
                    "command": gated(gate, "echo started", "echo RESULT-XYZ"),
                    "session_id": session_id,
                },
            )
        )
        call_id = str((await _wait_listed(session, session_id))[0]["tool_call_id"])
        path = f"/api/tool-calls/{session_id}/{call_id}"
        listed = await asyncio.to_thread(stack.call, session_id, call_id)
        # The view says so, for the console to offer no Background button.
        assert listed["offload_remaining"] is None and listed["extra"]["offloadable"] is False
        offload = await asyncio.to_thread(stack.api, "POST", f"{path}/offload")
        assert offload.status_code == 409 and "/mcp" in offload.text, offload.text
        later = {"seconds": 1, "target": "offload"}
        extend = await asyncio.to_thread(stack.api, "POST", f"{path}/extend-deadline", json=later)
        assert extend.status_code == 409 and "/mcp" in extend.text, extend.text

        def past_the_offload_deadline() -> dict[str, Any] | None:
            info = stack.call(session_id, call_id)
            return info if info["elapsed"] > OFFLOAD_AFTER + 0.5 else None

        info = await asyncio.to_thread(wait_for, past_the_offload_deadline, 15.0, "the deadline")
        assert info["status"] == "running" and info["offload_reason"] is None
        open_gate(stack, gate)
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error and "RESULT-XYZ" in _text(result), _text(result)
    assert stack.call(session_id, call_id)["end_state"] == "success"
    assert len(stack.model.requests) == model_requests  # no turn was woken for it


async def test_a_command_longer_than_one_argument_may_be_is_refused(stack: Stack) -> None:
    """The command is one argument of the shell, and the kernel takes at most 128 KiB in
    one (MAX_ARG_STRLEN): a longer one is refused before it is launched, naming the
    limit, where it failed to start with a traceback in the log."""
    session_id, limit = "mcp:it-long", 128 * 1024
    fits = "echo " + "x" * (limit - 1 - len("echo "))
    async with connected(stack) as session:
        ran = await session.call_tool(
            "execute_shell_command", {"command": fits, "session_id": session_id}
        )
        assert not ran.is_error, _text(ran)[-300:]
        refused = await session.call_tool(
            "execute_shell_command", {"command": fits + "x", "session_id": session_id}
        )
    assert refused.is_error and "MAX_ARG_STRLEN" in _text(refused), _text(refused)[-300:]
    assert "131,072 bytes" in _text(refused)
    assert "Argument list too long" not in stack.server.log_path.read_text(errors="replace")


@pytest.mark.parametrize(
    ("on_shutdown", "told"),
    [
        ("detach", "Tether is restarting; the command goes on as tool call"),
        ("stop", "was stopped (cancelled)"),
    ],
)
async def test_a_call_in_flight_when_the_server_exits_is_answered_at_once(
    on_shutdown: str, told: str
) -> None:
    """The client waits on its request for the result, which a server on its way out
    cannot give: it is told at once where the call stands (going on, to be read once a
    server is back, or stopped), where the request held the exit for uvicorn's grace and
    was then cut with an error logged."""
    started = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "started" in message:
            started.set()

    env = {"TETHER_ON_SHUTDOWN": on_shutdown, "TETHER_DEFAULT_APPROVAL_LEVEL": "off"}
    with temporary_server("mcp-exit", **env) as server:
        async with modern_client(server) as client:
            call = asyncio.ensure_future(
                client.call_tool(
                    "execute_shell_command",
                    {"command": "echo started; sleep 600"},
                    progress_callback=progress,
                )
            )
            await asyncio.wait_for(started.wait(), 30)
            await asyncio.to_thread(server.stop)
            result = await asyncio.wait_for(call, 30)
        log = server.logs_tail(100_000)
    assert result.is_error and told in _text(result)
    assert "graceful shutdown exceeded" not in log
    assert "Exception in ASGI application" not in log


def test_the_endpoint_requires_the_token(stack: Stack) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    bare = httpx.post(f"{stack.server.base_url}/mcp", json=body, headers=headers)
    assert bare.status_code == 401
    wrong = httpx.post(
        f"{stack.server.base_url}/mcp",
        json=body,
        headers={**headers, "Authorization": "Bearer not-the-token"},
    )
    assert wrong.status_code == 401


def test_open_sessions_are_bounded_and_an_ended_one_frees_its_place() -> None:
    """Each session holds memory until it ends or idles out: one past
    TETHER_MCP_MAX_SESSIONS is refused (503) instead of growing without end."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        },
    }
    with temporary_server("mcp-sessions", TETHER_MCP_MAX_SESSIONS="2") as server:
        headers = {
            "Authorization": f"Bearer {server.token}",
            "Accept": "application/json, text/event-stream",
        }

        def open_one() -> httpx.Response:
            return httpx.post(f"{server.base_url}/mcp", json=initialize, headers=headers)

        first, second, third = open_one(), open_one(), open_one()
        assert (first.status_code, second.status_code) == (200, 200)
        assert third.status_code == 503
        ended = httpx.delete(
            f"{server.base_url}/mcp",
            headers={**headers, "Mcp-Session-Id": first.headers["mcp-session-id"]},
        )
        assert ended.status_code == 200
        assert wait_for(lambda: open_one().status_code == 200, what="a place") is True


async def _until(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Ask ``probe`` until it answers something truthy (about ten seconds at most)."""
    for _ in range(500):
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def _wait_listed(session: ClientSession, session_id: str) -> list[dict[str, object]]:
    async def listed() -> list[dict[str, object]]:
        result = await session.call_tool("list_tool_calls", {"session_id": session_id})
        return list(json.loads(_text(result)))

    return await _until(listed, "a call to be listed")


async def _wait_output(session: ClientSession, session_id: str, call_id: str, text: str) -> str:
    async def output() -> str | None:
        args = {"tool_call_id": call_id, "session_id": session_id}
        got = _text(await session.call_tool("get_tool_call_output", args))
        return got if text in got else None

    return await _until(output, f"{text!r} in the output")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
