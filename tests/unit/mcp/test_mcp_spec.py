"""MCP client specs: validation that names the field, masks, and updates that keep secrets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tether.mcp.spec import MASK, STORED, McpClientSpec, McpClientUpdate, check_key
from tether.mcp.tools import content_text, progress_line


def _spec(**fields: object) -> McpClientSpec:
    return McpClientSpec.model_validate({"name": "n", "command": "srv", **fields})


@pytest.mark.parametrize("key", ["github", "a-b_c", "X1", "x" * 32])
def test_good_keys(key: str) -> None:
    assert check_key(key) is None


@pytest.mark.parametrize(
    "key", ["", "-x", "a b", "a/b", "a__b", "tools", "TOGGLE", "é", "x" * 33, "x\n"]
)
def test_bad_keys_say_why(key: str) -> None:
    assert (problem := check_key(key)) is not None and problem.startswith("client_key")


def test_each_transport_needs_its_endpoint() -> None:
    with pytest.raises(ValidationError, match="command"):
        McpClientSpec.model_validate({"name": "n"})
    with pytest.raises(ValidationError, match="url"):
        McpClientSpec.model_validate({"name": "n", "transport": "streamable_http"})
    with pytest.raises(ValidationError, match="url"):
        McpClientSpec.model_validate({"name": "n", "transport": "sse", "url": "ftp://x/y"})
    assert (
        McpClientSpec.model_validate({"name": "n", "transport": "sse", "url": "https://h/sse"}).url
        == "https://h/sse"
    )


def test_a_masked_value_keeps_the_stored_secret_and_a_new_one_replaces_it() -> None:
    spec = _spec(env={"A": "old-a", "B": "old-b"})
    updated = McpClientUpdate(env={"A": MASK, "B": "new-b", "C": "c"}).applied_to(spec)
    assert updated.env == {"A": "old-a", "B": "new-b", "C": "c"}


def test_an_update_changes_only_what_it_names_and_cannot_clear_the_timeout() -> None:
    spec = _spec(http_timeout=30, tools=["a"])
    updated = McpClientUpdate.model_validate({"description": "d", "http_timeout": None}).applied_to(
        spec
    )
    assert (updated.description, updated.http_timeout, updated.tools) == ("d", 30, ["a"])
    cleared = McpClientUpdate.model_validate({"tools": None}).applied_to(spec)
    assert cleared.tools is None


def test_an_update_that_breaks_the_spec_is_refused() -> None:
    with pytest.raises(ValidationError, match="url"):
        McpClientUpdate(transport="streamable_http").applied_to(_spec())


def test_kill_deadline_is_the_client_timeout_or_the_default() -> None:
    assert _spec().kill_deadline(600) == 600
    assert _spec(http_timeout=45).kill_deadline(600) == 45


def test_progress_lines_read_well() -> None:
    assert progress_line(3, 10, "copying") == "[progress 3/10] copying\n"
    assert progress_line(0.5, None, None) == "[progress 0.5]\n"


def test_content_text_names_what_it_does_not_show() -> None:
    from mcp import types

    blocks: list[types.ContentBlock] = [
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data="AAAA", mime_type="image/png"),
    ]
    assert content_text(blocks) == "hello\n[image content omitted]"


def test_a_stored_spec_loads_whatever_an_earlier_version_took() -> None:
    """Header and env values are checked where they are given, not where they are read
    back: a value an earlier version stored does not stop the server from starting."""
    old = {"name": "x", "transport": "sse", "url": "http://h/sse", "headers": {"K": "a\nb"}}
    assert McpClientSpec.model_validate(old, context=STORED).headers == {"K": "a\nb"}
    with pytest.raises(ValidationError, match="control character"):
        McpClientSpec.model_validate(old)


def test_a_stored_spec_keeps_values_refused_today() -> None:
    """What an earlier version took still loads (its failure is told when it connects)."""
    old = {
        "name": "x",
        "command": "srv",
        "cwd": "relative",
        "args": ["a\x00b"],
        "http_timeout": 1e-9,
        "tools": ["t" * 1000] * 2,
        "headers": {"X A": "\u043a"},
    }
    assert McpClientSpec.model_validate(old, context=STORED).cwd == "relative"
    with pytest.raises(ValidationError) as refused:
        McpClientSpec.model_validate(old)
    fields = {str(e["loc"][0]) for e in refused.value.errors()}
    assert fields == {"cwd", "args", "http_timeout", "tools", "headers"}


def test_what_a_view_shows_besides_the_spec_is_ignored_and_a_typo_refused() -> None:
    shown = {
        "key": "k",
        "status": "ready",
        "error": None,
        "tool_count": 3,
        "sandboxed": True,
        "oauth_status": None,
        "access_summary": {"default_effect": "deny", "overrides_count": 0},
    }
    spec = _spec(**shown)
    assert spec.command == "srv" and "key" not in spec.model_dump()
    assert McpClientUpdate.model_validate({**shown, "description": "d"}).applied_to(
        spec
    ).description == ("d")
    with pytest.raises(ValidationError, match="comand"):
        McpClientUpdate.model_validate({"comand": "x"})
