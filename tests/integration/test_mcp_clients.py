"""/api/mcp: MCP client configuration routes (QwenPaw's paths and shapes, Tether's live
status), secrets sealed at rest, failures readable, tool-list changes picked up."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from core_support import Stack, new_session, stack_for_module, wait_for
from cryptography.fernet import Fernet
from mcp_support import (
    add_client,
    http_fixture,
    mcp_call,
    remove_client,
    state_dir,
    stdio_client,
    wait_client,
)

from database_support import change_stored, stored_rows

pytestmark = pytest.mark.integration

SECRET = "sk-mcp-secret-value-0123456789"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("mcp-clients")


@pytest.fixture()
def state(stack: Stack) -> Iterator[Path]:
    yield from state_dir(stack)


def test_create_get_list_update_toggle_delete(stack: Stack, state: Path) -> None:
    spec = stdio_client(state, name="Fixture", description="the test server", env={"TOKEN": SECRET})
    created = add_client(stack, "crud", spec, ready=False)
    assert created["key"] == "crud" and created["name"] == "Fixture"
    assert created["transport"] == "stdio" and created["env"] == {"TOKEN": "********"}
    assert created["status"] in ("connecting", "ready")
    ready = wait_client(stack, "crud", "ready")
    assert ready["tool_count"] >= 5 and ready["error"] is None
    assert [c["key"] for c in stack.api("GET", "/api/mcp").json()] == ["crud"]

    updated = stack.api(
        "PUT", "/api/mcp/crud", json={"description": "changed", "env": ready["env"]}
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["description"] == "changed"
    assert updated.json()["env"] == {"TOKEN": "********"}
    wait_client(stack, "crud", "ready")
    # The masked value sent back kept the stored secret: the server still sees it.
    session = new_session()
    stack.model.script(mcp_call("crud", "env_value", name="TOKEN"), {"text": "ok"})
    task = stack.wait_task(stack.submit("read it", session))
    assert any(SECRET in str(m.get("content")) for m in task["messages"] if m["role"] == "tool")

    toggled = stack.api("PATCH", "/api/mcp/toggle/crud")
    assert toggled.status_code == 200 and toggled.json()["status"] == "disabled"
    assert stack.api("GET", "/api/mcp/tools/crud").json() == []
    assert stack.api("PATCH", "/api/mcp/toggle/crud").json()["enabled"] is True
    wait_client(stack, "crud", "ready")

    deleted = stack.api("DELETE", "/api/mcp/crud")
    assert deleted.status_code == 200
    assert deleted.json() == {"message": "MCP client 'crud' deleted successfully"}
    assert stack.api("GET", "/api/mcp").json() == []


def test_secrets_never_leave_sealed(stack: Stack, state: Path) -> None:
    # Not SECRET: another test has the server print that one into a chat on purpose.
    secret = "sk-sealed-only-9876543210"
    spec = stdio_client(state, headers={"X-Key": secret}, env={"API_KEY": secret})
    add_client(stack, "sealed", spec, ready=False)
    try:
        assert secret not in stack.api("GET", "/api/mcp/sealed").text
        assert secret not in stack.api("GET", "/api/mcp").text
        wait_client(stack, "sealed", "ready")
        for path in stack.server.home.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
        assert secret not in stored_rows(stack.server.home, "mcp_clients")
    finally:
        remove_client(stack, "sealed")


def test_a_url_is_sealed_and_shown_by_host_and_sent_back_keeps_it(
    stack: Stack, state: Path
) -> None:
    """Hosted MCP servers put a token in the URL: it is kept like a header's value. The
    URL is shown by scheme, host and port; a client sending that form back keeps the
    stored URL; a shown form that is not the client's is refused."""
    token = "url-token-0123456789abcdef"
    with http_fixture(state) as url:
        base = url.removesuffix("/mcp")
        spec = {"name": "hosted", "transport": "streamable_http", "url": f"{url}?key={token}"}
        created = add_client(stack, "hosted", spec, ready=False)
        try:
            assert created["url"] == f"{base}/…"
            shown = wait_client(stack, "hosted", "ready")
            assert shown["url"] == f"{base}/…"
            for text in (
                stack.api("GET", "/api/mcp").text,
                stored_rows(stack.server.home, "mcp_clients"),
            ):
                assert token not in text

            # A read-modify-write client sends back everything it read.
            sent_back = {k: shown[k] for k in ("name", "url", "headers", "transport")}
            resp = stack.api("PUT", "/api/mcp/hosted", json=sent_back | {"description": "d"})
            assert resp.status_code == 200, resp.text
            assert wait_client(stack, "hosted", "ready")["description"] == "d"

            other = stack.api("PUT", "/api/mcp/hosted", json={"url": "https://elsewhere.example/…"})
            assert other.status_code == 422 and "send the URL itself" in other.text
            new = {"client_key": "copy", "client": sent_back}
            refused = stack.api("POST", "/api/mcp", json=new)
            assert refused.status_code == 422 and "send the URL itself" in refused.text
            assert stack.api("GET", "/api/mcp/copy").status_code == 404
            assert wait_client(stack, "hosted", "ready")["url"] == f"{base}/…"
        finally:
            remove_client(stack, "hosted")


def test_a_url_stored_in_plain_text_by_an_earlier_version_is_sealed_at_start(
    stack: Stack, state: Path
) -> None:
    token = "plain-token-0123456789abcdef"
    with http_fixture(state) as url:
        spec = {"name": "old", "transport": "streamable_http", "url": f"{url}?key=x"}
        add_client(stack, "old", spec, ready=False)
        try:
            # As an earlier version stored it: the URL itself, no secrets.
            change_stored(
                stack.server.home,
                f"UPDATE mcp_clients SET secrets_encrypted = NULL, "
                f'spec = \'{{"name": "old", "transport": "streamable_http", '
                f'"url": "{url}?key={token}"}}\' WHERE key = \'old\'',
            )
            assert token in stored_rows(stack.server.home, "mcp_clients")
            stack.server.restart()
            assert wait_client(stack, "old", "ready")["url"] == f"{url.removesuffix('/mcp')}/…"
            assert token not in stored_rows(stack.server.home, "mcp_clients")
        finally:
            remove_client(stack, "old")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"client_key": "bad key", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "a__b", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "tools", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "ok", "client": {"name": "x"}}, "command"),
        ({"client_key": "ok", "client": {"name": "x", "transport": "sse"}}, "url"),
        (
            {"client_key": "ok", "client": {"name": "x", "transport": "sse", "url": "file:///x"}},
            "url",
        ),
        ({"client_key": "ok", "client": {"name": "x", "command": "x", "bogus": 1}}, "bogus"),
        ({"client_key": "ok", "client": {"name": "x", "command": "x", "http_timeout": 0}}, "http"),
        ({"client_key": "ok"}, "client"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_changes_nothing(
    stack: Stack, body: dict[str, object], field: str
) -> None:
    resp = stack.api("POST", "/api/mcp", json=body)
    assert resp.status_code == 422, resp.text
    assert field in resp.text
    assert stack.api("GET", "/api/mcp").json() == []


# Configurations that could never work, each with the field its 422 must name.
_HTTP = {"transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}
UNWORKABLE: list[tuple[dict[str, object], str]] = [
    ({"command": "py\x00thon"}, "command"),
    ({"args": ["ok", "a\x00b"]}, "args"),
    ({"cwd": "/tmp\x00x"}, "cwd"),
    ({"cwd": "relative/dir"}, "cwd"),
    ({"name": "a\x00b"}, "name"),
    (_HTTP | {"headers": {"X-A: b": "v"}}, "headers"),
    (_HTTP | {"headers": {"X A": "v"}}, "headers"),
    (_HTTP | {"headers": {"X-\u043a\u043b\u044e\u0447": "v"}}, "headers"),
    (_HTTP | {"headers": {"Authorization": "Bearer \u043a-secret-0123456789"}}, "headers"),
    ({"transport": "streamable_http", "url": "http://exa mple.com/mcp"}, "url"),
    ({"transport": "streamable_http", "url": "http://127.0.0.1:99999/mcp"}, "url"),
    ({"http_timeout": 1e-9}, "http_timeout"),
    ({"tools": ["x" * 1000] * 500}, "tools"),
    ({"tools": [f"t{i}" for i in range(1001)]}, "tools"),
]


@pytest.mark.parametrize(("change", "field"), UNWORKABLE)
def test_a_configuration_that_cannot_work_is_422_naming_the_field(
    stack: Stack, change: dict[str, object], field: str
) -> None:
    body = {"client_key": "never", "client": {"name": "x", "command": "x"} | change}
    resp = _send_json(stack, "POST", "/api/mcp", body)
    assert resp.status_code == 422, resp.text
    assert field in resp.text and "secret-0123456789" not in resp.text
    assert stack.api("GET", "/api/mcp").json() == []


def _send_json(stack: Stack, method: str, path: str, body: object) -> httpx.Response:
    """``body`` as JSON with ASCII escapes (httpx's own encoding refuses a lone
    surrogate, which JSON can carry)."""
    headers = {"Content-Type": "application/json"}
    return stack.api(method, path, content=json.dumps(body), headers=headers)


def test_a_put_that_cannot_work_leaves_the_working_client_as_it_was(
    stack: Stack, state: Path
) -> None:
    before = add_client(stack, "working", stdio_client(state, env={"TOKEN": SECRET}))
    try:
        for change, field in UNWORKABLE:
            resp = _send_json(stack, "PUT", "/api/mcp/working", change)
            assert resp.status_code == 422, (change, resp.text)
            assert field in resp.json()["detail"] and "secret-0123456789" not in resp.text
        big = stack.api("PUT", "/api/mcp/tools/working", json={"tools": ["x" * 1000] * 500})
        assert big.status_code == 422 and "tools" in big.text
        after = stack.api("GET", "/api/mcp/working").json()
        assert after == before  # the same spec, and the same connection still ready
    finally:
        remove_client(stack, "working")


def test_a_client_sent_back_as_it_was_read_is_taken(stack: Stack, state: Path) -> None:
    """A read-modify-write client PUTs what GET gave it, shown-only fields and all (as
    QwenPaw, which ignores them); a copy POSTs one client's view as another's spec."""
    read = add_client(stack, "rmw", stdio_client(state, env={"TOKEN": SECRET}), ready=False)
    try:
        read = wait_client(stack, "rmw", "ready")
        # QwenPaw's view has these two besides Tether's live state.
        sent = read | {
            "description": "changed",
            "oauth_status": None,
            "access_summary": {"default_effect": "deny", "overrides_count": 0},
        }
        updated = stack.api("PUT", "/api/mcp/rmw", json=sent)
        assert updated.status_code == 200, updated.text
        assert updated.json()["description"] == "changed" and updated.json()["key"] == "rmw"
        copy = {k: v for k, v in read.items() if k != "env"} | {"name": "Copy"}
        created = stack.api("POST", "/api/mcp", json={"client_key": "rmw-copy", "client": copy})
        assert created.status_code == 201, created.text
        assert created.json()["key"] == "rmw-copy"  # the key is the request's, not the body's
        # A field nobody shows is still a mistake to report.
        typo = stack.api("PUT", "/api/mcp/rmw", json={"comand": "x"})
        assert typo.status_code == 422 and "comand" in typo.text
    finally:
        remove_client(stack, "rmw")
        if stack.api("GET", "/api/mcp/rmw-copy").status_code == 200:
            remove_client(stack, "rmw-copy")


def test_duplicate_key_is_409_and_unknown_key_404(stack: Stack, state: Path) -> None:
    add_client(stack, "dup", stdio_client(state), ready=False)
    try:
        again = stack.api(
            "POST", "/api/mcp", json={"client_key": "dup", "client": stdio_client(state)}
        )
        assert again.status_code == 409
        assert again.json()["detail"] == "MCP client 'dup' already exists. Use PUT to update."
    finally:
        remove_client(stack, "dup")
    for method, path in [
        ("GET", "/api/mcp/nope"),
        ("PUT", "/api/mcp/nope"),
        ("DELETE", "/api/mcp/nope"),
        ("PATCH", "/api/mcp/toggle/nope"),
        ("GET", "/api/mcp/tools/nope"),
        ("PUT", "/api/mcp/tools/nope"),
    ]:
        resp = stack.api(method, path, json={} if method == "PUT" else None)
        assert resp.status_code == 404, (method, path, resp.text)
        assert resp.json()["detail"] == "MCP client 'nope' not found"


def test_a_server_that_fails_to_start_shows_failed_with_its_stderr(stack: Stack) -> None:
    spec = {
        "name": "broken",
        "command": sys.executable,
        "args": ["-c", "import sys; sys.stderr.write('boom: missing config\\n'); sys.exit(2)"],
    }
    add_client(stack, "broken", spec, ready=False)
    try:
        failed = wait_client(stack, "broken", "failed")
        assert "boom: missing config" in failed["error"]
        tools = stack.api("GET", "/api/mcp/tools/broken")
        assert tools.status_code == 502 and "boom" in tools.json()["detail"]
        # The rest of Tether is unaffected.
        assert stack.api("GET", "/api/healthz").status_code == 200
    finally:
        remove_client(stack, "broken")


def test_a_failure_quoting_a_secret_shows_and_logs_it_masked(stack: Stack) -> None:
    """A server that prints its environment on the way out, and an HTTP server whose URL
    carries a token: their failures are shown and logged, never with the secret."""
    printing = {
        "name": "printing",
        "command": sys.executable,
        "args": ["-c", "import os, sys; sys.stderr.write(os.environ['TOKEN']); sys.exit(3)"],
        "env": {"TOKEN": SECRET},
    }
    with not_found_server() as base:
        # httpx quotes the whole URL in its error for a 404.
        url = f"{base}/mcp/path-token-0123456789?token=query-token-0123456789"
        remote = {"name": "remote", "transport": "sse", "url": url, "headers": {"X-Key": SECRET}}
        add_client(stack, "printing", printing, ready=False)
        add_client(stack, "remote", remote, ready=False)
        try:
            errors = [wait_client(stack, key, "failed")["error"] for key in ("printing", "remote")]
            errors.append(stack.api("GET", "/api/mcp/tools/printing").json()["detail"])
            assert "********" in errors[0]
            assert f"{base}/…" in errors[1] and "404" in errors[1]
        finally:
            remove_client(stack, "printing")
            remove_client(stack, "remote")
    log = stack.server.log_path.read_text(errors="replace")
    for text in [*errors, log]:
        for secret in (SECRET, "path-token-0123456789", "query-token-0123456789"):
            assert secret not in text


def test_the_stderr_file_is_private_masked_and_goes_with_the_client(stack: Stack) -> None:
    """A server's stderr is kept under TETHER_HOME/mcp for its error: readable by the
    owner only, its client's secrets masked, removed when the client is deleted."""
    script = (
        "import os, sys; sys.stderr.write('env: TOKEN=' + os.environ['TOKEN'] + chr(10)); "
        "sys.stderr.write('x' * 20000 + os.environ['TOKEN'] + chr(10) + 'last words' + chr(10)); "
        "sys.exit(3)"
    )
    spec = {"name": "printing", "command": sys.executable, "args": ["-c", script]}
    add_client(stack, "stderrfile", spec | {"env": {"TOKEN": SECRET}}, ready=False)
    path = stack.server.home / "mcp" / "stderrfile.stderr.log"
    try:
        error = wait_client(stack, "stderrfile", "failed")["error"]
        assert "env: TOKEN=********" in error and "last words" in error
        assert path.stat().st_mode & 0o777 == 0o600
        kept = path.read_text()
        assert "env: TOKEN=********" in kept and "left out" in kept and "last words" in kept
        assert SECRET not in kept and SECRET[-10:] not in kept
    finally:
        remove_client(stack, "stderrfile")
    assert not path.exists()


def test_lines_on_stdout_that_are_not_json_rpc_are_counted_in_the_log_not_quoted(
    stack: Stack,
) -> None:
    """The SDK logged each such line with a traceback quoting it (a server printing its
    environment put the secret in the log, 11 lines per line): now one line a minute per
    client says how many there were since the last."""
    script = (
        "import os, sys\nfor i in range(30): print('MYSECRET=' + os.environ['TOKEN'])\n"
        "sys.stdout.flush(); sys.exit(1)"
    )
    spec = {"name": "chatty", "command": sys.executable, "args": ["-c", script]}
    add_client(stack, "chatty", spec | {"env": {"TOKEN": SECRET}}, ready=False)
    try:
        wait_client(stack, "chatty", "failed")
    finally:
        remove_client(stack, "chatty")
    log = stack.server.log_path.read_text(errors="replace")
    told = [line for line in log.splitlines() if "not JSON-RPC" in line]
    assert len(told) == 1 and "MCP client chatty: 1 line(s) its server wrote" in told[0]
    assert SECRET not in log and "Failed to parse JSONRPC" not in log


def test_a_secret_the_stderr_tail_would_halve_is_left_out(stack: Stack) -> None:
    """Only the last 2000 bytes of stderr are shown: cut inside the secret, its end was
    shown, a fragment the masking could not know."""
    script = (
        "import os, sys; sys.stderr.write('TOKEN=' + os.environ['TOKEN'] + chr(10) "
        "+ 'y' * 1980 + chr(10)); sys.exit(3)"
    )
    spec = {"name": "halving", "command": sys.executable, "args": ["-c", script]}
    add_client(stack, "halving", spec | {"env": {"TOKEN": SECRET}}, ready=False)
    try:
        error = wait_client(stack, "halving", "failed")["error"]
    finally:
        remove_client(stack, "halving")
    assert "y" * 1980 in error
    assert SECRET[-12:] not in error


@pytest.mark.parametrize(
    "change",
    [
        {"headers": {"X-Key": "sk-part\r\nInjected: 1"}},
        {"headers": {"X-Key": "a\x00b"}},
        {"env": {"TOKEN": "a\x00b"}},
        # The mask keeps a stored value; for a name with none it is no value at all.
        {"env": {"NEW": "********"}},
    ],
)
def test_a_secret_value_that_cannot_be_used_is_422(
    stack: Stack, state: Path, change: dict[str, object]
) -> None:
    add_client(stack, "values", stdio_client(state, env={"TOKEN": SECRET}), ready=False)
    try:
        before = stack.api("GET", "/api/mcp/values").json()
        resp = stack.api("PUT", "/api/mcp/values", json=change)
        assert resp.status_code == 422, resp.text
        assert SECRET not in resp.text and "sk-part" not in resp.text
        after = stack.api("GET", "/api/mcp/values").json()
        assert {k: after[k] for k in ("env", "headers")} == {
            k: before[k] for k in ("env", "headers")
        }
        created = stack.api(
            "POST", "/api/mcp", json={"client_key": "fresh", "client": stdio_client(state) | change}
        )
        assert created.status_code == 422, created.text
    finally:
        remove_client(stack, "values")
        if stack.api("GET", "/api/mcp/fresh").status_code == 200:
            remove_client(stack, "fresh")


def test_a_header_value_keeps_no_surrounding_whitespace(stack: Stack, state: Path) -> None:
    """A pasted key often ends with a newline, which HTTP cannot send: it is dropped."""
    with not_found_server() as base:
        spec = {"name": "w", "transport": "sse", "url": f"{base}/sse"}
        add_client(stack, "spaced", spec | {"headers": {"X-Key": f"  {SECRET}\n"}}, ready=False)
        try:
            failed = wait_client(stack, "spaced", "failed")
            assert "404" in failed["error"]  # sent, and answered
        finally:
            remove_client(stack, "spaced")


@contextmanager
def not_found_server() -> Iterator[str]:
    """An HTTP server on loopback answering 404 to everything; yields its base URL."""

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        do_POST = do_GET

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_tool_list_change_is_picked_up(stack: Stack, state: Path) -> None:
    add_client(stack, "growing", stdio_client(state))
    try:
        names = [t["name"] for t in stack.api("GET", "/api/mcp/tools/growing").json()]
        assert "grown" not in names
        stack.model.script(mcp_call("growing", "grow"), {"text": "grew"})
        stack.wait_task(stack.submit("grow", new_session()))
        wait_for(
            lambda: (
                "grown" in [t["name"] for t in stack.api("GET", "/api/mcp/tools/growing").json()]
            ),
            what="the new tool to be listed",
        )
        stack.model.script({"text": "look"})
        stack.wait_task(stack.submit("what now", new_session()))
        offered = {t["function"]["name"] for t in stack.model.requests[-1]["tools"]}
        assert "growing__grown" in offered
    finally:
        remove_client(stack, "growing")


BAD_TOOL_NAMES = ["get.weather", "has space", "x" * 70, "snow_\u2603", "a/b"]


def test_a_tool_whose_name_a_provider_refuses_is_not_offered_and_says_why(
    stack: Stack, state: Path
) -> None:
    """OpenAI-style providers refuse a whole request naming one function outside
    ^[a-zA-Z0-9_-]{1,64}$: such a tool is left out of every turn, marked on the client's
    tool list and logged, while the client stays ready with its other tools."""
    (state / "extra_tools").write_text(json.dumps([*BAD_TOOL_NAMES, "fine-name"]))
    add_client(stack, "bn", stdio_client(state))
    try:
        stack.model.script({"text": "hi"})
        stack.wait_task(stack.submit("hi", new_session()))
        offered = [t["function"]["name"] for t in stack.model.requests[-1]["tools"]]
        assert {"bn__echo", "bn__fine-name"} <= set(offered)
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in offered), offered
        tools = {t["name"]: t for t in stack.api("GET", "/api/mcp/tools/bn").json()}
        assert all("not offered" in tools[name]["unusable"] for name in BAD_TOOL_NAMES)
        assert tools["fine-name"]["unusable"] is None and tools["echo"]["unusable"] is None
        info = stack.api("GET", "/api/mcp/bn").json()
        assert info["status"] == "ready" and info["tool_count"] == len(tools) - len(BAD_TOOL_NAMES)
        assert "MCP client bn: 5 tool(s) not offered" in stack.server.log_path.read_text()
    finally:
        remove_client(stack, "bn")


def test_a_key_is_at_most_32_characters_but_a_longer_stored_one_still_loads(
    stack: Stack, state: Path
) -> None:
    """`key__tool` must fit 64 characters, so a new key has 32; one of up to 64 that an
    earlier version took still loads, its tools left out when their names do not fit."""
    long = stack.api(
        "POST", "/api/mcp", json={"client_key": "k" * 33, "client": stdio_client(state)}
    )
    assert long.status_code == 422 and "client_key" in long.text
    key = "k" * 32
    add_client(stack, key, stdio_client(state), ready=False)
    try:
        change_stored(stack.server.home, f"UPDATE mcp_clients SET key = '{'k' * 64}'")
        stack.server.restart()
        info = wait_client(stack, "k" * 64, "ready")
        assert info["tool_count"] == 0
        tools = stack.api("GET", f"/api/mcp/tools/{'k' * 64}").json()
        assert tools and all(t["unusable"] for t in tools)
    finally:
        remove_client(stack, "k" * 64)
        remove_client(stack, key)


def test_a_client_this_server_cannot_read_is_listed_failed_and_can_be_deleted(
    stack: Stack, state: Path
) -> None:
    """A client sealed with another key (a second home on the same database, a lost
    secret.key), or stored by an earlier version with a URL the check now refuses: the
    server did not start at all (a traceback from the MCP start), and the list was a
    500. Now such a client is listed failed, saying why, its secrets by name only; it is
    never connected, a change is 409, and it can be deleted."""
    add_client(stack, "sealed", stdio_client(state, env={"TOKEN": "t-0123456789"}), ready=False)
    add_client(stack, "odd", {"name": "odd", "command": "true"}, ready=False)
    change_stored(
        stack.server.home,
        'UPDATE mcp_clients SET secrets_encrypted = NULL, spec = \'{"name": "odd", '
        '"transport": "streamable_http", "url": "http://[::1/mcp"}\' WHERE key = \'odd\'',
    )
    key_file = stack.server.home / "secret.key"
    original = key_file.read_bytes()
    key_file.write_bytes(Fernet.generate_key())
    try:
        stack.server.restart()
        listed = {c["key"]: c for c in stack.api("GET", "/api/mcp").json()}
        sealed, odd = listed["sealed"], listed["odd"]
        assert sealed["status"] == "failed" and "TETHER_SECRET_KEY" in sealed["error"]
        assert sealed["env"] == {"TOKEN": "********"} and sealed["tool_count"] == 0
        assert odd["status"] == "failed" and "url" in odd["error"], odd
        assert stack.api("GET", "/api/mcp/odd").json() == odd
        changed = stack.api("PUT", "/api/mcp/sealed", json={"description": "x"})
        assert changed.status_code == 409 and "delete it" in changed.json()["detail"]
        assert stack.api("GET", "/api/mcp/tools/sealed").status_code == 409
        log = stack.server.log_path.read_text(errors="replace")
        assert "MCP client 'sealed' is not connected" in log and "t-0123456789" not in log
        assert stack.api("DELETE", "/api/mcp/sealed").status_code == 200
        assert stack.api("DELETE", "/api/mcp/odd").status_code == 200
        assert stack.api("GET", "/api/mcp").json() == []
    finally:
        key_file.write_bytes(original)
        stack.server.restart()
        remove_client(stack, "sealed")
        remove_client(stack, "odd")
