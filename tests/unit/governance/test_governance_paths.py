"""Path classification."""

from __future__ import annotations

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.paths import DYNAMIC, classify_path

CWD = "/home/u/proj"


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ("/", "root_or_system"),
        ("/*", "root_or_system"),
        ("/etc", "root_or_system"),
        ("/etc/ssh", "root_or_system"),
        ("/usr/*", "root_or_system"),
        ("/home/u", "root_or_system"),
        ("..", "root_or_system"),
        ("/e*", "root_or_system"),
        ("/tmp/x", "outside_workspace"),
        ("build", "inside_workspace"),
        ("./*", "inside_workspace"),
        (DYNAMIC + "/x", "dynamic"),
        ("/home/u/.ssh/authorized_keys", "ssh_or_shell_profile"),
        ("/home/u/.zshrc", "ssh_or_shell_profile"),
        (".env", "secret"),
        ("/home/u/.tether/token", "tether_home"),
        ("/dev/sda", "block_device"),
        ("/dev/nvme0n1p1", "block_device"),
        ("/dev/tcp/1.2.3.4/80", "network_socket"),
        ("/etc/hosts", "system"),
    ],
)
def test_classes(raw: str, cls: str, ctx: AnalysisContext) -> None:
    assert cls in classify_path(raw, CWD, ctx)


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ("/dev/null", "outside_workspace"),
        ("/dev/null", "root_or_system"),
        ("/tmp/x", "root_or_system"),
        ("/var/tmp/x", "root_or_system"),
        ("/usr/local/lib/x/y", "root_or_system"),
        ("/home/u/notes", "system"),
        ("build/.bashrc", "ssh_or_shell_profile"),
        (".env.example", "secret"),
        ("id_rsa.pub", "secret"),
    ],
)
def test_not_classes(raw: str, cls: str, ctx: AnalysisContext) -> None:
    assert cls not in classify_path(raw, CWD, ctx)


def test_unknown_cwd_makes_relative_paths_dynamic(ctx: AnalysisContext) -> None:
    assert "dynamic" in classify_path("build", None, ctx)
    assert "outside_workspace" in classify_path("build", None, ctx)


@pytest.mark.parametrize("raw", [".", "./", "*", "./*", ".*", "/home/u/proj"])
def test_workspace_root(raw: str, ctx: AnalysisContext) -> None:
    assert "workspace_root" in classify_path(raw, CWD, ctx)


@pytest.mark.parametrize("raw", ["build", "*.pyc", "src/*", "/home/u"])
def test_not_workspace_root(raw: str, ctx: AnalysisContext) -> None:
    assert "workspace_root" not in classify_path(raw, CWD, ctx)
