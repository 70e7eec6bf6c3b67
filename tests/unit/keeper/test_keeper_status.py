"""The spec and status files: atomic, and a bad one names itself instead of crashing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.keeper import layout
from tether.keeper.status import CallEnd, CorruptFile, read_end, read_spec, write_end


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
    ],
)
def test_a_corrupt_status_file_raises_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / layout.STATUS_NAME
    path.write_bytes(content)
    with pytest.raises(CorruptFile) as caught:
        read_end(tmp_path)
    assert caught.value.path == path
    assert str(path) in str(caught.value)


def test_a_corrupt_spec_file_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / layout.SPEC_NAME
    path.write_text('{"call_id": "x", "pid": "twelve"}')
    with pytest.raises(CorruptFile) as caught:
        read_spec(tmp_path)
    assert caught.value.path == path


def test_call_ids_cannot_name_another_directory(tmp_path: Path) -> None:
    for bad in ("", "..", "a/b", "."):
        with pytest.raises(ValueError):
            layout.call_dir(tmp_path, bad)
    assert layout.call_dir(tmp_path, "call_1~2") == tmp_path / "calls" / "call_1~2"


def test_the_socket_path_fits_even_for_a_deep_home(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    assert len(str(layout.socket_path(deep))) <= 100
    assert layout.socket_path(deep) != layout.socket_path(tmp_path / ("e" * 120))
