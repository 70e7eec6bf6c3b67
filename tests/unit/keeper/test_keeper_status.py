"""The spec and status files: atomic, and a bad one names itself instead of crashing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tether.keeper import layout
from tether.keeper.status import (
    MAX_FILE_BYTES,
    CallEnd,
    CorruptFile,
    read_end,
    read_spec,
    write_end,
)


def test_an_end_written_is_read_back(tmp_path: Path) -> None:
    end = CallEnd(exit_code=None, signal=15, ended_at=12.5, stopped_by="deadline", output_end=40)
    write_end(tmp_path, end)
    assert read_end(tmp_path) == end
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed away


def test_no_status_file_means_still_running(tmp_path: Path) -> None:
    assert read_end(tmp_path) is None
    assert read_spec(tmp_path) is None


@pytest.mark.parametrize(
    "content",
    [
        b'{"exit_code": 0, "signal": null, "ended_at": 1.0, "stop',  # truncated
        b"\x00\x00\x00",
        b"[1, 2]",
        b'{"exit_code": 0}',
        b'{"exit_code": null, "signal": null, "ended_at": 1.0, "stopped_by": null, '
        b'"output_end": 0}',
        b'{"exit_code": 0, "signal": null, "ended_at": "soon", "stopped_by": null, '
        b'"output_end": 0}',
        b'{"exit_code": [1], "signal": null, "ended_at": 1.0, "stopped_by": null, "output_end": 0}',
        b'{"exit_code": null, "signal": "TERM", "ended_at": 1.0, "stopped_by": null, '
        b'"output_end": 0}',
        b'{"exit_code": 0, "signal": null, "ended_at": 1.0, "stopped_by": "whim", "output_end": 0}',
        b'{"exit_code": 0, "signal": null, "ended_at": NaN, "stopped_by": null, "output_end": 0}',
        b"[" * 200_000 + b"]" * 200_000,
    ],
    ids=[
        "truncated",
        "zeros",
        "array",
        "fields missing",
        "no exit code nor signal",
        "string time",
        "list exit code",
        "signal name",
        "unknown stopper",
        "not a number",
        "nested 200,000 deep",
    ],
)
def test_a_corrupt_status_file_raises_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / layout.STATUS_NAME
    path.write_bytes(content)
    with pytest.raises(CorruptFile) as caught:
        read_end(tmp_path)
    assert caught.value.path == path
    assert str(path) in str(caught.value)


SPEC = {
    "call_id": "c1",
    "argv": ["bash", "-c", "sleep 300"],
    "cwd": "/w",
    "pid": 4242,
    "create_time": 1.5,
    "marker": "m",
    "started_at": 2.0,
    "kill_at": None,
    "output_limit": None,
}


@pytest.mark.parametrize(
    "change",
    [
        {"pid": "twelve"},
        {"kill_at": "soon"},
        {"kill_at": float("nan")},
        {"kill_at": float("inf")},
        {"argv": "sleep 300"},
        {"output_limit": True},
        {"cwd": None},
    ],
)
def test_a_corrupt_spec_file_raises_naming_it(tmp_path: Path, change: dict[str, Any]) -> None:
    path = tmp_path / layout.SPEC_NAME
    path.write_text(json.dumps({**SPEC, **change}))
    with pytest.raises(CorruptFile) as caught:
        read_spec(tmp_path)
    assert caught.value.path == path


def test_a_good_spec_file_is_read(tmp_path: Path) -> None:
    (tmp_path / layout.SPEC_NAME).write_text(json.dumps({**SPEC, "kill_at": 9}))
    spec = read_spec(tmp_path)
    assert spec is not None and (spec.pid, spec.kill_at) == (4242, 9)


def test_a_call_file_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / layout.SPEC_NAME)  # reading it would wait for a writer forever
    with pytest.raises(CorruptFile, match="not a regular file"):
        read_spec(tmp_path)
    (tmp_path / "elsewhere").write_text(json.dumps(SPEC))
    (tmp_path / layout.STATUS_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CorruptFile):
        read_end(tmp_path)


def test_a_call_file_too_large_is_refused_unread(tmp_path: Path) -> None:
    with (tmp_path / layout.STATUS_NAME).open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing to read if it is refused first
    with pytest.raises(CorruptFile, match="larger than"):
        read_end(tmp_path)


def test_call_ids_cannot_name_another_directory(tmp_path: Path) -> None:
    for bad in ("", "..", "a/b", "."):
        with pytest.raises(ValueError):
            layout.call_dir(tmp_path, bad)
    assert layout.call_dir(tmp_path, "call_1~2") == tmp_path / "calls" / "call_1~2"


def test_the_socket_path_fits_even_for_a_deep_home(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    assert len(str(layout.socket_path(deep))) <= 100
    assert layout.socket_path(deep) != layout.socket_path(tmp_path / ("e" * 120))


def test_what_a_call_used_is_read_back_with_its_limits(tmp_path: Path) -> None:
    from tether.sandbox.limits import Limits, Resources

    used = Resources(5 << 20, 0.25, 3, "processes", Limits(256, 64, None))
    end = CallEnd(0, None, 1.0, None, 0, resources=used.as_record())
    write_end(tmp_path, end)
    back = read_end(tmp_path)
    assert back is not None and back.measured() == used
    measured = back.measured()
    assert measured is not None and measured.limit_note() == "stopped: process limit 64 reached"


@pytest.mark.parametrize(
    "resources",
    ['"lots"', '{"killed_by": "boredom"}', '{"peak_memory_bytes": -1}', '{"limits": []}'],
)
def test_bad_resources_make_the_status_file_corrupt(tmp_path: Path, resources: str) -> None:
    path = tmp_path / layout.STATUS_NAME
    path.write_text(
        '{"exit_code": 0, "signal": null, "ended_at": 1.0, "stopped_by": null, '
        f'"output_end": 0, "resources": {resources}}}'
    )
    with pytest.raises(CorruptFile, match="resources"):
        read_end(tmp_path)


def test_fields_a_newer_runner_adds_are_ignored(tmp_path: Path) -> None:
    (tmp_path / layout.STATUS_NAME).write_text(
        '{"exit_code": 0, "signal": null, "ended_at": 1.0, "stopped_by": null, '
        '"output_end": 0, "from_the_future": true}'
    )
    end = read_end(tmp_path)
    assert end is not None and end.exit_code == 0


def test_a_request_carries_the_lowest_protocol_that_knows_its_fields() -> None:
    from tether.keeper import protocol

    assert protocol.version_for({"call_id": "x", "argv": []}) == 1
    assert protocol.version_for({"limits": {}, "supervised": True}) == 2
    assert protocol.version_for({"limits": {}, "syscall_filter": "AA=="}) == 3
    assert protocol.PROTOCOL == 3
