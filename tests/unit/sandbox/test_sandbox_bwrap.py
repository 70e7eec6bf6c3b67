"""The bwrap command line for one call (pure), and the probe's refusal when it is absent."""

from __future__ import annotations

from pathlib import Path

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
