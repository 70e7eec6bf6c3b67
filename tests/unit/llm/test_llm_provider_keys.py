"""A provider key sealed by one server and read by a server with another key (a second
TETHER_HOME on the same database, or a lost secret.key): the turn and the connection test
say why, instead of failing on an internal error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether.llm.client import ModelError
from tether.llm.provider_service import ENV_PROVIDER_ID, ProviderService, UnknownCustomProvider
from tether.security.keybox import KeyBox
from tether.store.database import Database
from tether.store.providers import ProviderRepository

ENV = {
    "OPENAI_API_KEY": "sk-sealed-elsewhere",
    "TETHER_MODEL": "m",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
}


def _never(*_: Any) -> Any:
    raise AssertionError("no model is built without its key")


async def test_a_key_sealed_with_another_key_is_named_with_the_way_out(
    db: Database, tmp_path: Path
) -> None:
    repo = ProviderRepository(db)
    await ProviderService(repo, KeyBox(tmp_path / "a.key"), _never).bootstrap_from_env(ENV)
    other = ProviderService(repo, KeyBox(tmp_path / "b.key"), _never)

    with pytest.raises(ModelError, match=r"cannot be decrypted.*TETHER_SECRET_KEY") as raised:
        await other.active_model()
    assert "sk-sealed-elsewhere" not in str(raised.value)

    (active,) = await repo.list()
    probe = await other.test_connection(active.id, 1.0)
    assert not probe.ok
    assert probe.error is not None and "TETHER_SECRET_KEY" in probe.error


async def test_the_built_in_provider_cannot_be_deleted_as_a_custom_one(
    db: Database, tmp_path: Path
) -> None:
    """Removed (through DELETE /api/models/custom-providers/openai-env), no model was
    configured until the next start: every turn failed."""
    repo = ProviderRepository(db)
    service = ProviderService(repo, KeyBox(tmp_path / "a.key"), _never)
    await service.bootstrap_from_env(ENV)
    before = (await service.all(), await repo.get_active())

    with pytest.raises(UnknownCustomProvider, match="a built-in provider cannot be removed"):
        await service.delete(ENV_PROVIDER_ID)
    with pytest.raises(UnknownCustomProvider, match=r"^Custom provider 'nope' not found$"):
        await service.delete("nope")
    assert (await service.all(), await repo.get_active()) == before
