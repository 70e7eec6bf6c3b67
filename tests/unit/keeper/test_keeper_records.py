"""The output file format: tagged records whose event ids are byte positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.keeper import records


def test_records_round_trip_with_positions_as_event_ids(tmp_path: Path) -> None:
    data = records.encode("stdout", b"one\n") + records.encode("stderr", "é\n".encode())
    path = tmp_path / "output"
    path.write_bytes(data)
    got, after = records.read_records(path, 0)
    assert [(r.stream, r.text) for r in got] == [("stdout", "one\n"), ("stderr", "é\n")]
    assert got[-1].end == after == len(data)
    # Resuming at the first record's event id yields exactly the second: no gap, no repeat.
    again, _ = records.read_records(path, got[0].end)
    assert again == got[1:]


def test_a_record_cut_short_waits_for_the_rest(tmp_path: Path) -> None:
    whole = records.encode("stdout", b"abc")
    path = tmp_path / "output"
    path.write_bytes(whole + records.encode("stdout", b"defgh")[:7])
    got, after = records.read_records(path, 0)
    assert [r.text for r in got] == ["abc"]
    assert after == len(whole)
    assert records.trailing_garbage(path, after) == 7


def test_garbage_raises_naming_the_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "output"
    path.write_bytes(records.encode("stdout", b"fine") + b"this is not a record at all")
    with pytest.raises(records.CorruptOutput) as caught:
        records.read_records(path, 0)
    assert str(path) in str(caught.value)
    assert caught.value.position == len(records.encode("stdout", b"fine"))


def test_a_record_larger_than_the_read_window_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "output"
    path.write_bytes(records.encode("stdout", b"x" * 5000))
    got, _ = records.read_records(path, 0, limit=1024)
    assert len(got) == 1 and len(got[0].text) == 5000


def test_a_missing_file_reads_as_nothing_yet(tmp_path: Path) -> None:
    assert records.read_records(tmp_path / "absent", 0) == ([], 0)


@pytest.mark.parametrize(
    ("data", "complete"),
    [
        (b"abc", 3),
        ("aé".encode(), 3),
        ("aé".encode()[:2], 1),
        ("a€".encode()[:3], 1),
        ("a😀".encode()[:4], 1),
        ("a😀".encode(), 5),
        (b"a\xff", 2),
        (b"", 0),
    ],
)
def test_complete_utf8_holds_back_only_a_cut_character(data: bytes, complete: int) -> None:
    assert records.complete_utf8(data) == complete
