"""Provider rows and the active-model setting."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import ProviderRecord
from tether.store.rows import record_values, to_record
from tether.store.tables import app_settings, providers

_ACTIVE_MODEL_KEY = "active_model"


# The active choice is a JSON value naming the provider; its row joins on that name.
_ACTIVE_WITH_PROVIDER = (
    sa.select(app_settings.c.value.label("active"), providers)
    .select_from(
        app_settings.outerjoin(
            providers, providers.c.id == app_settings.c.value["provider_id"].as_string()
        )
    )
    .where(app_settings.c.key == _ACTIVE_MODEL_KEY)
)


class ProviderRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self) -> list[ProviderRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(providers).order_by(providers.c.created_at))
            return [to_record(ProviderRecord, r) for r in rows]

    async def get(self, provider_id: str) -> ProviderRecord | None:
        async with self._db.read() as conn:
            row = (
                await conn.execute(sa.select(providers).where(providers.c.id == provider_id))
            ).first()
            return to_record(ProviderRecord, row) if row else None

    async def insert(self, record: ProviderRecord) -> bool:
        """Add a provider; False if the id is taken."""
        async with self._db.write() as conn:
            taken = await conn.scalar(sa.select(sa.func.count()).where(providers.c.id == record.id))
            if taken:
                return False
            await conn.execute(
                providers.insert().values(**record_values(record), created_at=time.time())
            )
            return True

    async def upsert(self, record: ProviderRecord) -> None:
        """Insert or replace a provider (used for the one configured by environment)."""
        async with self._db.write() as conn:
            await conn.execute(sa.delete(providers).where(providers.c.id == record.id))
            await conn.execute(
                providers.insert().values(**record_values(record), created_at=time.time())
            )

    async def update(self, provider_id: str, **values: Any) -> bool:
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(providers).where(providers.c.id == provider_id).values(**values)
            )
            return result.rowcount > 0

    async def delete(self, provider_id: str) -> bool:
        async with self._db.write() as conn:
            result = await conn.execute(sa.delete(providers).where(providers.c.id == provider_id))
            active = await _get_setting(conn, _ACTIVE_MODEL_KEY)
            if isinstance(active, dict) and active.get("provider_id") == provider_id:
                await conn.execute(
                    sa.delete(app_settings).where(app_settings.c.key == _ACTIVE_MODEL_KEY)
                )
            return result.rowcount > 0

    async def get_active(self) -> dict[str, str] | None:
        async with self._db.read() as conn:
            value = await _get_setting(conn, _ACTIVE_MODEL_KEY)
            return value if isinstance(value, dict) else None

    async def active(self) -> tuple[dict[str, str] | None, ProviderRecord | None]:
        """The active choice and its provider's record (None if that provider is gone),
        in one query: every turn asks."""
        async with self._db.read() as conn:
            row = (await conn.execute(_ACTIVE_WITH_PROVIDER)).first()
        if row is None or not isinstance(row.active, dict):
            return None, None
        record = to_record(ProviderRecord, row) if row.id is not None else None
        return row.active, record

    async def set_active(self, value: dict[str, str]) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                sa.delete(app_settings).where(app_settings.c.key == _ACTIVE_MODEL_KEY)
            )
            await conn.execute(app_settings.insert().values(key=_ACTIVE_MODEL_KEY, value=value))


async def _get_setting(conn: Any, key: str) -> Any:
    return await conn.scalar(sa.select(app_settings.c.value).where(app_settings.c.key == key))
