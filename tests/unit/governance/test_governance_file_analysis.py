"""File tool analysis, including symlink escapes (uses real files under tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.file_analysis import analyze_file_access
from tether.governance.findings import Severity, worst
from tether.governance.levels import decide


@pytest.fixture
def fctx(tmp_path: Path) -> AnalysisContext:
    home = tmp_path / "home"
    workspace = home / "proj"
    tether_home = home / ".tether"
    for directory in (workspace / "src", tether_home, home / ".ssh", tmp_path / "outside"):
        directory.mkdir(parents=True)
    return AnalysisContext(workspace=workspace, home=home, tether_home=tether_home)


def _top(op: str, path: str, ctx: AnalysisContext) -> Severity | None:
    return worst(analyze_file_access(op, path, ctx))  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["read", "write", "edit"])
def test_inside_workspace_is_clean(op: str, fctx: AnalysisContext) -> None:
    assert analyze_file_access(op, "src/main.py", fctx) == []  # type: ignore[arg-type]
    assert analyze_file_access(op, str(fctx.workspace / "README.md"), fctx) == []  # type: ignore[arg-type]


def test_write_outside_workspace_is_high(fctx: AnalysisContext, tmp_path: Path) -> None:
    assert _top("write", str(tmp_path / "outside" / "x"), fctx) is Severity.HIGH
    assert _top("edit", "../other/file.py", fctx) is Severity.HIGH
    assert _top("write", "/etc/hosts", fctx) is Severity.HIGH


def test_read_outside_workspace_is_only_low(fctx: AnalysisContext, tmp_path: Path) -> None:
    assert _top("read", str(tmp_path / "outside" / "x"), fctx) is Severity.LOW


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "config/.env.production",
        "certs/server.pem",
        "tls.key",
        "~/.ssh/id_rsa",
        "~/.ssh/config",
        "~/.aws/credentials",
        "/etc/shadow",
    ],
)
def test_reading_secrets_is_high(path: str, fctx: AnalysisContext) -> None:
    assert _top("read", path, fctx) is Severity.HIGH


def test_env_templates_are_not_secrets(fctx: AnalysisContext) -> None:
    assert analyze_file_access("read", ".env.example", fctx) == []


@pytest.mark.parametrize("op", ["read", "write", "edit"])
def test_tether_home_is_critical(op: str, fctx: AnalysisContext) -> None:
    for path in (str(fctx.tether_home / "token"), "~/.tether/tether.db", "../.tether/keys/a"):
        findings = analyze_file_access(op, path, fctx)  # type: ignore[arg-type]
        assert worst(findings) is Severity.CRITICAL, path
        assert decide("off", findings) == "deny"


def test_symlink_escape_from_workspace_is_caught(fctx: AnalysisContext, tmp_path: Path) -> None:
    (fctx.workspace / "escape").symlink_to(tmp_path / "outside")
    assert _top("write", "escape/payload.sh", fctx) is Severity.HIGH
    (fctx.workspace / "state").symlink_to(fctx.tether_home)
    assert _top("read", "state/token", fctx) is Severity.CRITICAL
    (fctx.workspace / "keys").symlink_to(fctx.home / ".ssh")
    assert _top("read", "keys/id_ed25519", fctx) is Severity.HIGH


def test_symlinked_workspace_itself_is_fine(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "ws-link"
    link.symlink_to(real)
    ctx = AnalysisContext(workspace=link, home=tmp_path, tether_home=tmp_path / ".tether")
    assert analyze_file_access("write", "a/b.txt", ctx) == []


def test_workspace_inside_tether_home_is_not_critical(tmp_path: Path) -> None:
    tether_home = tmp_path / ".tether"
    workspace = tether_home / "workspaces" / "w1"
    workspace.mkdir(parents=True)
    ctx = AnalysisContext(workspace=workspace, home=tmp_path, tether_home=tether_home)
    assert analyze_file_access("write", "notes.md", ctx) == []
    assert _top("read", str(tether_home / "token"), ctx) is Severity.CRITICAL


@pytest.mark.parametrize("path", ["", "   ", "a\x00b"])
def test_invalid_paths_are_high(path: str, fctx: AnalysisContext) -> None:
    assert _top("read", path, fctx) is Severity.HIGH


def test_a_link_replaced_while_it_is_followed_is_judged_not_raised(
    fctx: AnalysisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What os.readlink says when the link it was about to read became a directory.
    def replaced(path: str) -> str:
        raise OSError(22, "Invalid argument", path)

    (fctx.workspace / "d").symlink_to(fctx.workspace / "src")
    monkeypatch.setattr("os.readlink", replaced)
    findings = analyze_file_access("read", "d/x", fctx)
    assert [f.severity for f in findings] == [Severity.HIGH]
    assert "changed while it was being checked" in findings[0].description
