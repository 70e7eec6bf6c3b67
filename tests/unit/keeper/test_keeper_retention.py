"""Files of calls that ended past the retention go; others stay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.keeper import layout
from tether.keeper.inventory import call_directories, strays
from tether.keeper.retention import sweep
from tether.keeper.status import CallEnd, write_end
from tether.store.database import Database
from tether.store.records import ToolCallRecord
from tether.store.toolcalls import ToolCallRepository


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[ToolCallRepository]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    await db.migrate()
    yield ToolCallRepository(db)
    await db.close()


def ended(home: Path, call_id: str, at: float) -> Path:
    directory = layout.call_dir(home, call_id)
    directory.mkdir(parents=True)
    write_end(directory, CallEnd(0, None, at, None, 0))
    return directory


async def test_only_old_ends_with_a_row_are_removed(
    tmp_path: Path, repo: ToolCallRepository
) -> None:
    home = tmp_path / "home"
    for call_id in ("old", "new"):
        await repo.insert(
            ToolCallRecord(
                call_id,
                "s",
                None,
                "default",
                "x",
                {},
                "completed",
                "success",
                None,
                False,
                None,
                None,
                None,
                1.0,
                2.0,
            )
        )
    old, new = ended(home, "old", 100.0), ended(home, "new", 900.0)
    stray = ended(home, "stray", 100.0)  # no database row: reported, kept
    running = layout.call_dir(home, "running")
    running.mkdir()  # no end yet
    # One listing, and the strays the start reports, as the start hands them over.
    directories = call_directories(home)
    rowless = {f.call_id for f in await strays(home, set(), {}, repo, directories)}
    assert rowless == {"stray", "running"}
    assert await sweep(home, 500.0, directories, rowless) == 1
    assert not old.exists()
    assert new.exists() and stray.exists() and running.exists()
