"""A server started with settings that do not hold refuses to start with a line for each,
naming the variable and never its value (a mistyped one may be a secret): it printed a
pydantic traceback quoting the value."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from core_support import refused_start

pytestmark = pytest.mark.integration


def test_each_bad_setting_is_named_without_its_value(tmp_path: Path) -> None:
    said = refused_start(
        tmp_path,
        TETHER_WHEN_UNATTENDED="sk-not-a-policy-0123456789",
        TETHER_APPROVAL_TIMEOUT_SECONDS="inf",
        TETHER_NODE_ANSWER_SECONDS="soon",
    )
    assert "invalid settings:" in said
    assert "TETHER_WHEN_UNATTENDED: Input should be 'deny' or 'wait'" in said
    assert "TETHER_APPROVAL_TIMEOUT_SECONDS: Input should be a finite number" in said
    assert "TETHER_NODE_ANSWER_SECONDS:" in said
    assert "sk-not-a-policy-0123456789" not in said and "Traceback" not in said
    assert not (tmp_path / "tether.db").exists()


@pytest.mark.parametrize("level", ["warn", "trace", "loud"])
def test_an_unknown_log_level_is_refused_with_the_levels_there_are(
    tmp_path: Path, level: str
) -> None:
    # "warn" passed the log set-up and stopped in uvicorn's, "trace" the other way round:
    # both with a traceback.
    said = refused_start(tmp_path, TETHER_LOG_LEVEL=level)
    assert "Invalid value for '--log-level'" in said
    assert "'critical', 'error', 'warning', 'info', 'debug'" in said
    assert "Traceback" not in said
    assert not (tmp_path / "tether.db").exists()


def test_a_bad_option_is_named_as_the_option_given(tmp_path: Path) -> None:
    # `--port 99999` was reported as "TETHER_PORT: ...", a variable the operator never set.
    said = refused_start(tmp_path, "--port", "99999")
    assert "--port: Input should be less than or equal to 65535" in said
    assert "TETHER_PORT" not in said and "Traceback" not in said


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    # Uvicorn binds after the application's start: the keeper's runner had started, the
    # schema was made, and the bind error came among the start-up's records.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        said = refused_start(tmp_path, "--port", port)
    assert f"refusing to start: cannot listen on 127.0.0.1:{port} (Address already in use)" in (
        said
    )
    assert "--port or TETHER_PORT" in said
    assert "keeper on" not in said and "Traceback" not in said
    assert not (tmp_path / "tether.db").exists()
