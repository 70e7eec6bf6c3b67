"""An upgrade in the middle of a call: Tether installed with pip into a venv of its own
at an older version string and protocol number (this tree's, one lower), a call running
under the keeper, a graceful stop, `pip install` of this tree at another version string,
a start. The runner the older version left keeps the call and is spoken to at the
protocol both know; the call runs on under its id, its stream resumes, the task
completes; a sandboxed call started beside it under that runner still gets what the
newer protocol would carry (the system call filter); the first call started once the
old runner is idle replaces it with one of the installed version."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import AppServer, FakeModel, Stack, new_session, shell_call
from helpers import register_mock_provider
from keeper_restarts import through_a_restart

import tether
from tether.keeper import layout
from tether.keeper.identity import ProcessIdentity

pytestmark = pytest.mark.integration

_PACKAGE = Path(tether.__file__).resolve().parent
OLD, NEW = "0.1.0.dev1", "0.2.0.dev1"


def build_wheel(out: Path, version: str, protocol_step: int = 0) -> Path:
    """A wheel of this source tree at ``version`` (``__version__`` and the metadata),
    its keeper protocol number moved by ``protocol_step``, as a release would be."""
    wheel = out / f"tether-{version}-py3-none-any.whl"
    dist_info = f"tether-{version}.dist-info"
    record: list[str] = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:

        def add(name: str, data: bytes) -> None:
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")

        for path in sorted(_PACKAGE.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            name = f"tether/{path.relative_to(_PACKAGE).as_posix()}"
            add(name, _patched(name, path.read_bytes(), version, protocol_step))
        add(
            f"{dist_info}/METADATA",
            f"Metadata-Version: 2.1\nName: tether\nVersion: {version}\n".encode(),
        )
        add(
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: tether-tests\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{dist_info}/RECORD", "\n".join([*record, f"{dist_info}/RECORD,,", ""]))
    return wheel


def _patched(name: str, data: bytes, version: str, protocol_step: int) -> bytes:
    if name == "tether/__init__.py":
        return _replace_once(
            data, f'__version__ = "{tether.__version__}"', f'__version__ = "{version}"'
        )
    if name == "tether/keeper/protocol.py" and protocol_step:
        from tether.keeper import protocol

        newer = protocol.PROTOCOL + protocol_step
        return _replace_once(data, f"PROTOCOL = {protocol.PROTOCOL}\n", f"PROTOCOL = {newer}\n")
    return data


def _replace_once(data: bytes, old: str, new: str) -> bytes:
    text = data.decode()
    assert text.count(old) == 1, f"{old!r} is not in the source once: update this test"
    return text.replace(old, new).encode()


class Install:
    """A venv holding Tether as pip installs it (its dependencies are this test run's)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        self.python = str(root / "bin" / "python")
        site = subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # The dependencies come from this interpreter's site-packages (listed after the
        # venv's own, where pip puts Tether), not from the network.
        (Path(site) / "tether_test_dependencies.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )

    def pip_install(self, wheel: Path) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                self.python,
                "install",
                "--no-deps",
                "--no-index",
                "--disable-pip-version-check",
                "--quiet",
                str(wheel),
            ],
            check=True,
            timeout=300,
        )

    def version(self) -> str:
        shown = subprocess.run(
            [self.python, "-c", "import tether; print(tether.__version__, tether.__file__)"],
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert Path(shown[1]).is_relative_to(self.root), f"tether imported from {shown[1]}"
        return shown[0]


@pytest.fixture(scope="module")
def work() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tether-upgrade-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def install(work: Path) -> Install:
    made = Install(work / "venv")
    made.pip_install(build_wheel(work, OLD, protocol_step=-1))
    assert made.version() == OLD
    return made


@pytest.fixture(scope="module")
def stack(work: Path, install: Install) -> Iterator[Stack]:
    model = FakeModel()
    env = {
        "TETHER_KEEPER": "1",
        "TETHER_CANCEL_GRACE_SECONDS": "0.3",
        "TETHER_LLM_MAX_RETRIES": "0",
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        "PYTHONPATH": "",  # Tether as installed, not this source tree
    }
    server = AppServer(work / "home", env)
    server.python = install.python
    try:
        server.start()
        register_mock_provider(server, model.url)
        yield Stack(server, model)
    finally:
        server.close()
        model.close()


def _runner(home: Path) -> dict[str, Any]:
    """What ``runner.json`` says of the home's runner (version, protocol, pid)."""
    data: dict[str, Any] = json.loads(layout.runner_file(home).read_bytes())
    return data


# Tries to make a unix socket, which the system call filter refuses with the network off.
_UNIX = "python3 -c 'import socket; socket.socket(socket.AF_UNIX); print(\"made one\")'"


def _try_unix(stack: Stack, then: dict[str, Any]) -> str:
    """What the tool said to a sandboxed attempt at a unix socket (``then``: the model's
    replies after its answer, for the turns still waiting)."""
    session = new_session()
    stack.model.script(shell_call(_UNIX), {"text": "tried"}, then)
    task = stack.wait_task(stack.submit("try it", session), timeout=60)
    return str([m["content"] for m in task["messages"] if m["role"] == "tool"][-1])


def test_a_call_survives_a_stop_a_reinstall_at_another_version_and_a_start(
    work: Path, install: Install, stack: Stack
) -> None:
    old_runner = _runner(stack.server.home)
    assert old_runner["version"] == OLD

    def upgrade() -> None:
        stack.server.stop()
        install.pip_install(build_wheel(work, NEW))
        assert install.version() == NEW
        stack.server.start()

    def beside_the_kept_call() -> None:
        # The call runs on under the old runner, which the new server speaks to at its
        # protocol; the log says so.
        assert _runner(stack.server.home)["pid"] == old_runner["pid"]
        spoken = old_runner["protocol"]
        assert f"runs 1 call(s): kept, at protocol {spoken}" in stack.server.logs_tail(20000)
        # A sandboxed call beside it, under that runner, which cannot take the filter in
        # its start, is filtered all the same: no unix socket without the network. (The
        # ticker's turn answers last.)
        said = _try_unix(stack, then={"text": "done"})
        assert "PermissionError" in said and "made one" not in said, said
        assert _runner(stack.server.home)["pid"] == old_runner["pid"]

    through_a_restart(stack, upgrade, meanwhile=beside_the_kept_call)
    stack.model.assert_valid()
    # Idle now: the next call replaces it first, and runs under one of the new version
    # (the filter then goes in the start request).
    said = _try_unix(stack, then={"text": "unused"})
    assert "PermissionError" in said and "made one" not in said, said
    assert not ProcessIdentity(old_runner["pid"], old_runner["create_time"]).is_alive()
    assert f"runner pid {old_runner['pid']} (Tether {OLD}), kept for its calls, is idle" in (
        stack.server.logs_tail(20000)
    )
    new_runner = _runner(stack.server.home)
    assert (new_runner["version"], new_runner["protocol"]) == (NEW, old_runner["protocol"] + 1)
    assert new_runner["pid"] != old_runner["pid"]
    stack.model.assert_valid()
