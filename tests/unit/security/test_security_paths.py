"""Where file tools and the shell's cwd may reach: the workspace, never TETHER_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.tools.base import ToolInputError
from tether.tools.files import resolve_path
from tether.tools.shell import _resolve_cwd
from tool_context import ToolContext


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "workspace" / "sub").mkdir(parents=True)
    (home / "secret.key").write_text("key")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "notes.txt").write_text("n")
    return home.resolve()


def _ctx(home: Path, approved: bool = False, workspace: Path | None = None) -> ToolContext:
    return ToolContext(workspace or home / "workspace", (home,), approved)


def test_paths_in_the_workspace_are_allowed(home: Path) -> None:
    ctx = _ctx(home)
    assert resolve_path("sub/a.txt", ctx) == home / "workspace" / "sub" / "a.txt"
    assert resolve_path(str(home / "workspace" / "b"), ctx) == home / "workspace" / "b"
    assert resolve_path(".", ctx) == home / "workspace"


@pytest.mark.parametrize("raw", ["../../outside/notes.txt", "/etc/passwd", "sub/../../../outside"])
def test_outside_the_workspace_needs_approval(home: Path, raw: str) -> None:
    with pytest.raises(ToolInputError, match="outside the workspace"):
        resolve_path(raw, _ctx(home))
    assert resolve_path(raw, _ctx(home, approved=True)).is_absolute()


def test_a_symlink_out_of_the_workspace_is_refused(home: Path) -> None:
    link = home / "workspace" / "escape"
    link.symlink_to(home.parent / "outside")
    with pytest.raises(ToolInputError, match="outside the workspace"):
        resolve_path("escape/notes.txt", _ctx(home))


@pytest.mark.parametrize("raw", ["../secret.key", "../token", "..", "link-home/secret.key"])
def test_tether_home_is_refused_even_when_approved(home: Path, raw: str) -> None:
    (home / "workspace" / "link-home").symlink_to(home)
    for approved in (False, True):
        with pytest.raises(ToolInputError, match="Tether's own state"):
            resolve_path(raw, _ctx(home, approved=approved))
    with pytest.raises(ToolInputError, match="Tether's own state"):
        resolve_path(str(home / "secret.key"), _ctx(home, approved=True))


def test_a_workspace_containing_home_does_not_expose_it(home: Path) -> None:
    ctx = _ctx(home, workspace=home.parent)
    assert resolve_path("outside/notes.txt", ctx) == home.parent / "outside" / "notes.txt"
    with pytest.raises(ToolInputError, match="Tether's own state"):
        resolve_path("home/secret.key", ctx)
    with pytest.raises(ToolInputError, match="Tether's own state"):
        resolve_path("home/workspace/x", ctx)


@pytest.mark.parametrize("raw", [None, "", "  ", 3])
def test_bad_path_arguments(home: Path, raw: object) -> None:
    with pytest.raises(ToolInputError, match="non-empty string"):
        resolve_path(raw, _ctx(home))


async def test_shell_cwd_is_confined_like_the_file_tools(home: Path) -> None:
    ctx = _ctx(home)
    assert await _resolve_cwd(None, ctx) == home / "workspace"
    assert await _resolve_cwd("", ctx) == home / "workspace"
    assert await _resolve_cwd("sub", ctx) == home / "workspace" / "sub"
    for raw in ("..", str(home), "../", "/", 7):
        with pytest.raises(ToolInputError):
            await _resolve_cwd(raw, ctx)
    with pytest.raises(ToolInputError, match="Tether's own state"):
        await _resolve_cwd("..", _ctx(home, approved=True))
    assert await _resolve_cwd(str(home.parent / "outside"), _ctx(home, approved=True)) == (
        home.parent / "outside"
    )
    with pytest.raises(ToolInputError, match="not a directory"):
        await _resolve_cwd("missing", ctx)


def test_workspace_given_through_a_symlink(tmp_path: Path, home: Path) -> None:
    alias = tmp_path / "ws-alias"
    alias.symlink_to(home / "workspace")
    ctx = ToolContext(alias, (home,))
    assert resolve_path("sub", ctx) == home / "workspace" / "sub"
