"""Path classification."""

from __future__ import annotations

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.paths import DYNAMIC, brace_words, classify_path

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


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{/etc,}", ["/etc", ""]),
        ("/x/{home,y}/f", ["/x/home/f", "/x/y/f"]),
        ("a{b,c{d,e}}f", ["abf", "acdf", "acef"]),
        ("{a,b}{c,d}", ["ac", "ad", "bc", "bd"]),
        ("{1..3}", ["{1..3}"]),  # a sequence stays a pattern in its directory
        ("x{a}y", ["x{a}y"]),
        ("{", ["{"]),
        ("{/,x}{,}{,}{,}", ["/", "x"]),  # the same word twice is judged once
        ("{a,b}" * 11, None),  # 2,048 words: too many to judge one by one
        ("{a,b}" * 4 + "x" * 5000, None),  # too much text
        (
            "{" * 2_000 + "a,b" + "}" * 2_000,
            ["{" * 1_999 + "a" + "}" * 1_999, "{" * 1_999 + "b" + "}" * 1_999],
        ),
    ],
)
def test_brace_words(raw: str, words: list[str] | None) -> None:
    assert brace_words(raw) == words


def test_a_brace_group_cannot_hide_a_path(ctx: AnalysisContext) -> None:
    assert "root_or_system" in classify_path("{/etc,}", CWD, ctx)
    assert "tether_home" in classify_path("{/home/u/.tether/token,x}", CWD, ctx)
    assert "block_device" in classify_path("/dev/{null,sda}", CWD, ctx)
    # Too many words to judge one by one: it may be anything, the root included.
    assert "root_or_system" in classify_path("{/,x}" + "{a,b}" * 10, CWD, ctx)
