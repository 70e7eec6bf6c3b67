"""The bwrap command line for one call (pure), and the probe's refusal when it is absent."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tether.sandbox import syscall_filter
from tether.sandbox.bwrap import Confinement, probe, wrap


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_tether_home_istether_state_before_its_workspace_is_bound_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = home / "workspace"
    workspace.mkdir(parents=True)
    conf = Confinement(workspace, (home,), workspace, network=False)
    argv = wrap("/usr/bin/bwrap", conf, ["sh", "-c", "ls"])
    assert argv[:3] == ["/usr/bin/bwrap", "--ro-bind", "/"]
    hide, bind = argv.index(str(home)), argv.index("--bind")
    assert argv[hide - 1] == "--tmpfs" and hide < bind
    assert _pairs(argv, "--bind") == [str(workspace)]
    assert argv[-4:] == ["--", "sh", "-c", "ls"]
    assert "--unshare-net" in argv and "--unshare-pid" in argv
    assert _pairs(argv, "--cap-drop") == ["ALL"]
    assert "--die-with-parent" in argv and "--new-session" not in argv


def test_state_inside_the_workspace_istether_state_after_the_bind(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    state = workspace / "state"
    state.mkdir(parents=True)
    db = tmp_path / "elsewhere.db"
    db.write_text("")
    conf = Confinement(workspace, (state, db), workspace, network=True)
    argv = wrap("bwrap", conf, ["true"])
    assert argv.index("--bind") < argv.index(str(state))
    # A file is hidden under /dev/null; a path that does not exist needs nothing.
    assert argv[argv.index(str(db)) - 2 : argv.index(str(db))] == ["--ro-bind", "/dev/null"]
    assert "--unshare-net" not in argv


def test_probe_says_why_when_bwrap_is_missing() -> None:
    result = probe("no-such-bwrap-binary")
    assert not result.works and "not found on PATH" in result.reason


def test_a_runner_socket_kept_outside_a_deep_home_istether_state_too(tmp_path: Path) -> None:
    from tether.config import Settings
    from tether.keeper import layout
    from tether.sandbox.setup import tether_state

    deep = tmp_path / ("d" * 120) / "home"
    hidden = tether_state(Settings(home=deep))
    assert not layout.socket_path(deep).is_relative_to(deep.resolve())
    assert layout.socket_path(deep) in hidden
    shallow = Path("/tmp/h")
    assert tether_state(Settings(home=shallow)) == (shallow.resolve(),)


def test_a_home_deep_in_the_workspace_cannot_be_moved_out_of_hiding(tmp_path: Path) -> None:
    """With the workspace at $HOME and the home at ~/.config/tether, `mv .config x`
    moved the real home away from the tmpfs over its old place."""
    workspace = tmp_path / "w"
    home = workspace / ".config" / "tether"
    (home / "calls").mkdir(parents=True)
    (home / "secret.key").write_text("KEY")
    conf = Confinement(workspace, (home,), workspace, network=False)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed")
    script = (
        "mv .config moved; ls moved/tether; cat moved/tether/secret.key .config/tether/secret.key"
    )
    done = subprocess.run(
        wrap(bwrap, conf, ["sh", "-c", script]), capture_output=True, text=True, timeout=30
    )
    assert "KEY" not in done.stdout, done.stdout
    assert "busy" in done.stderr.lower(), done.stderr
    assert (home / "secret.key").exists()


needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)


@needs_bwrap
def test_the_probe_runs_its_sandbox_under_the_system_call_filter() -> None:
    found = probe()
    assert found.works and found.filtered, found.reason


@needs_bwrap
def test_a_filter_that_fails_here_leaves_the_sandbox_on_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter the kernel runs but that stops everything (as one written for another
    ABI would): the sandbox still works, without the filter, and says why."""
    kill_everything = struct.pack("=HBBI", 0x06, 0, 0, 0x80000000)
    monkeypatch.setattr(syscall_filter, "program", lambda **_: kill_everything)
    found = probe()
    assert found.works and not found.filtered
    assert "the system call filter does not work here" in found.reason
