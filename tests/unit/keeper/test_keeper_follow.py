"""Following a call's output file to its end (KeeperProcess.follow), against the files
as the runner writes them, with the runner's moves placed where a race puts them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tether.keeper import layout, records
from tether.keeper.hub import KeeperHub
from tether.keeper.process import CallLost, KeeperProcess
from tether.keeper.status import CallEnd, write_end


def _call(home: Path, *printed: bytes) -> Path:
    directory = layout.call_dir(home, "c1")
    directory.mkdir(parents=True)
    (directory / layout.OUTPUT_NAME).write_bytes(
        b"".join(records.encode("stdout", p) for p in printed)
    )
    return directory


def _end(hub: KeeperHub, directory: Path) -> None:
    """What the runner does last: the end recorded, then the "ended" event."""
    size = (directory / layout.OUTPUT_NAME).stat().st_size
    write_end(directory, CallEnd(0, None, time.time(), None, size))
    hub.signal_of("c1").ended = True


async def test_the_last_output_written_during_a_read_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read finds nothing new; meanwhile the runner appends the last output and
    records the end. That is not a record claiming bytes past the end: 4 of 16 runs of
    4,000 short calls lost one, "corrupt at byte 0"."""
    directory = _call(tmp_path, b"first\n")
    hub = KeeperHub(tmp_path)
    reads = 0
    read = records.read_records

    def racing(path: Path, position: int, limit: int = 1 << 20) -> Any:
        nonlocal reads
        got = read(path, position, limit)
        reads += 1
        if reads == 2:
            with (directory / layout.OUTPUT_NAME).open("ab") as output:
                output.write(records.encode("stdout", b"last\n"))
            _end(hub, directory)
        return got

    monkeypatch.setattr(records, "read_records", racing)
    seen: list[str] = []
    await KeeperProcess(hub, "c1", 0).follow(lambda _stream, text: seen.append(text))
    assert seen == ["first\n", "last\n"]


async def test_a_record_claiming_bytes_past_the_recorded_end_loses_the_call(
    tmp_path: Path,
) -> None:
    directory = _call(tmp_path, b"first\n")
    output = directory / layout.OUTPUT_NAME
    output.write_bytes(output.read_bytes().replace(b"o00000006:", b"o00000060:"))
    hub = KeeperHub(tmp_path)
    _end(hub, directory)
    with pytest.raises(CallLost, match="no whole record before byte"):
        await KeeperProcess(hub, "c1", 0).follow(lambda _stream, _text: None)
