"""An end that must land is written again while the store may yet take it, and only
then: a write that is wrong in itself fails at once."""

from __future__ import annotations

import pytest

from tether.errors import OutOfStorage
from tether.store import until_stored as module
from tether.store.until_stored import StoreLater, until_stored


async def test_a_store_out_of_room_is_tried_again_until_it_takes_the_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "FIRST_WAIT", 0.0)
    attempts: list[int] = []

    async def write() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise OutOfStorage("database or disk is full")
        return "stored"

    assert await until_stored(write, "the end") == "stored"
    assert len(attempts) == 3


async def test_a_write_wrong_in_itself_fails_at_once() -> None:
    attempts: list[int] = []

    async def write() -> None:
        attempts.append(1)
        raise ValueError("not a value this column takes")

    with pytest.raises(ValueError, match="not a value"):
        await until_stored(write, "the end")
    assert attempts == [1]


async def test_an_end_refused_at_first_is_stored_in_the_background_then_followed_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "FIRST_WAIT", 0.0)
    attempts: list[int] = []
    done: list[str] = []

    async def write() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise OutOfStorage("database or disk is full")

    later = StoreLater()
    assert not await later.store(write, "the end", then=lambda: done.append("forgotten"))
    assert done == []
    await later.settled()
    assert (len(attempts), done) == (3, ["forgotten"])
