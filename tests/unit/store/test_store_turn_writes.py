"""The writes and reads a chat turn makes, merged so a turn runs fewer statements: the
task opened with its session and first words in one transaction, the active model read
with its provider, a call's last output stored with its end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import OutputChunk, ProviderRecord, ToolCallRecord
from tether.store.store import Store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    db = Database(database_url)
    await db.migrate()
    try:
        yield Store(db)
    finally:
        await db.close()


def user_words(*texts: str) -> list[tuple[str, dict[str, str]]]:
    return [("user", {"role": "user", "content": t}) for t in texts]


async def test_a_task_opens_with_its_session_and_words(store: Store) -> None:
    await store.tasks.open_in_session(
        "t1", ("s", "u", "console", "hi"), "user", None, user_words("hi")
    )
    first = await store.chats.get_session("s")
    assert first is not None and (first.title, first.created_at) == ("hi", first.updated_at)

    await store.tasks.open_in_session("t2", ("s", "u", "console", "again"), "user", "off", [])
    again = await store.chats.get_session("s")
    assert again is not None and again.title == "hi" and again.created_at == first.created_at
    assert again.updated_at >= first.updated_at
    task = await store.tasks.get("t2")
    assert task is not None and (task.status, task.approval_level) == ("pending", "off")
    assert [m.payload["content"] for m in await store.chats.history("s")] == ["hi"]


async def test_a_task_that_cannot_be_recorded_leaves_no_session_or_words(store: Store) -> None:
    await store.tasks.open_in_session("t1", ("s1", "u", "console", None), "user", None, [])
    with pytest.raises(sa.exc.IntegrityError):
        await store.tasks.open_in_session(
            "t1", ("s2", "u", "console", None), "user", None, user_words("lost?")
        )
    assert await store.chats.get_session("s2") is None
    assert await store.chats.history("s2") == []


async def test_the_active_model_is_read_with_its_provider(store: Store) -> None:
    providers = store.providers
    assert await providers.active() == (None, None)
    active = {"provider_id": "p", "model": "m", "scope": "global"}
    await providers.set_active(active)
    assert await providers.active() == (active, None)  # the provider is gone
    record = ProviderRecord("p", "P", "http://x", None, None, [{"id": "m", "name": "m"}], True)
    await providers.insert(record)
    assert await providers.active() == (active, record)


async def test_a_calls_last_output_is_stored_with_its_end(store: Store) -> None:
    calls = store.tool_calls
    running = ToolCallRecord(
        "c", "s", None, "default", "shell", {}, "running", None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip
    await calls.insert(running)
    chunks = [OutputChunk(1, "stdout", "a"), OutputChunk(2, "stderr", "b")]
    assert await calls.record_end("c", output=chunks, end_state="completed", result="ok")
    assert await calls.read_output("c") == chunks
    ended = await calls.get("s", "c")
    assert ended is not None and (ended.status, ended.result) == ("completed", "ok")
    assert not await calls.record_end("c", end_state="error")  # the first end stands
    # Nor does an update asked for before the end that lands after it (a deadline's
    # offload racing the call's end): an ended call's row is final.
    await calls.update("c", status="offloaded", offload_reason="deadline")
    ended = await calls.get("s", "c")
    assert ended is not None and (ended.status, ended.offload_reason) == ("completed", None)


async def test_a_name_that_is_no_column_raises_and_writes_nothing(store: Store) -> None:
    # The statements are built once and take their columns from the parameters' names;
    # a misspelt one must not be dropped without a word.
    record = ToolCallRecord(
        "c", "s", None, "default", "shell", {}, "running", None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip
    await store.tool_calls.insert(record)
    with pytest.raises(ValueError, match="no column end_stat "):
        await store.tool_calls.update("c", end_stat="error", pgid=7)
    with pytest.raises(ValueError, match="no column finshed_at"):
        await store.tool_calls.record_end("c", end_state="error", finshed_at=2.0)
    stored = await store.tool_calls.get("s", "c")
    assert stored is not None and (stored.status, stored.end_state) == ("running", None)


async def test_a_task_ended_before_its_turn_starts_stays_ended(store: Store) -> None:
    # A survivor failed the task of a node it declared lost while the task still waited
    # for its session; the node, back, starts its turn before it finds its lease gone.
    # The start must not make the task running again: the turn's writes would then pass
    # append_to_turn's check, and its end would replace the survivor's.
    await store.tasks.open_in_session("t1", ("s", "u", "console", None), "user", None, [])
    lost = {"status": "failed", "error": "node lost"}
    assert [t.id for t in await store.tasks.fail_unfinished("node lost", [None])] == ["t1"]
    await store.tasks.mark_running("t1")
    task = await store.tasks.get("t1")
    assert task is not None and (task.status, task.result) == ("finished", lost)
    reply = [("assistant", {"role": "assistant", "content": "late"})]
    assert not await store.chats.append_to_turn("s", "t1", reply)
    await store.tasks.finish("t1", {"status": "completed", "text": "late"})
    task = await store.tasks.get("t1")
    assert task is not None and (task.status, task.result) == ("finished", lost)
    assert await store.chats.history("s") == []


async def test_finish_says_whether_the_end_is_the_tasks(store: Store) -> None:
    await store.tasks.open_in_session("t1", ("s", "u", "console", None), "user", None, [])
    assert await store.tasks.finish("t1", {"status": "completed"})
    assert not await store.tasks.finish("t1", {"status": "failed", "error": "late"})
    # A task whose chat was deleted before its end was stored: the end is still its own.
    assert await store.tasks.finish("gone", {"status": "cancelled"})
