"""Providers: OpenAI-compatible endpoints the agent can use, and which one is active."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tether.errors import Conflict, Invalid, NotFound
from tether.llm.client import ChatModel, ModelError
from tether.llm.probe import ProbeResult, probe_model
from tether.security.keybox import KeyBox
from tether.store.providers import ProviderRepository
from tether.store.records import ProviderRecord

ENV_PROVIDER_ID = "openai-env"

ModelFactory = Callable[[str, str, str], ChatModel]


class UnknownProvider(NotFound):
    """No provider has this id."""

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"Provider {provider_id!r} not found")


class UnknownCustomProvider(NotFound):
    """No custom provider has this id (``built_in``: a built-in one has)."""

    def __init__(self, provider_id: str, built_in: bool) -> None:
        why = " (a built-in provider cannot be removed)" if built_in else ""
        super().__init__(f"Custom provider {provider_id!r} not found{why}")


class ProviderExists(Conflict):
    """A provider with this id already exists."""

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"A provider with id {provider_id!r} already exists")


class UnknownModel(Invalid):
    """The provider does not offer this model."""


@dataclass(frozen=True)
class ProviderView:
    """A provider as the API shows it: whether a key is set, never the key."""

    id: str
    name: str
    base_url: str
    has_api_key: bool
    chat_model: str | None
    models: list[dict[str, str]]
    is_custom: bool


def _view(r: ProviderRecord) -> ProviderView:
    return ProviderView(
        id=r.id,
        name=r.name,
        base_url=r.base_url,
        has_api_key=bool(r.api_key_encrypted),
        chat_model=r.chat_model,
        models=r.models,
        is_custom=r.is_custom,
    )


class ProviderService:
    def __init__(self, repo: ProviderRepository, keybox: KeyBox, factory: ModelFactory) -> None:
        self._repo = repo
        self._keybox = keybox
        self._factory = factory
        self._models: dict[tuple[str, str, str, str], ChatModel] = {}

    async def all(self) -> list[ProviderView]:
        return [_view(r) for r in await self._repo.list()]

    async def add(
        self,
        provider_id: str,
        name: str,
        base_url: str,
        chat_model: str | None,
        models: list[dict[str, str]],
    ) -> ProviderView:
        """Add a custom provider. Raises ProviderExists if the id is taken."""
        record = ProviderRecord(
            id=provider_id,
            name=name,
            base_url=base_url,
            api_key_encrypted=None,
            chat_model=chat_model,
            models=models,
            is_custom=True,
        )
        if not await self._repo.insert(record):
            raise ProviderExists(provider_id)
        return _view(record)

    async def configure(
        self,
        provider_id: str,
        api_key: str | None,
        base_url: str | None,
        name: str | None = None,
    ) -> ProviderView:
        """Set the key (empty: remove it), the base URL or a custom provider's name."""
        values: dict[str, object] = {}
        if name:
            record = await self._repo.get(provider_id)
            # Built-in providers keep their names, as QwenPaw's do.
            if record is not None and record.is_custom:
                values["name"] = name
        if api_key is not None:
            values["api_key_encrypted"] = self._keybox.seal(api_key) if api_key else None
        if base_url is not None:
            values["base_url"] = base_url
        if values and not await self._repo.update(provider_id, **values):
            raise UnknownProvider(provider_id)
        record = await self._repo.get(provider_id)
        if record is None:
            raise UnknownProvider(provider_id)
        return _view(record)

    async def delete(self, provider_id: str) -> None:
        """Remove a custom provider. Raises UnknownCustomProvider (a built-in one stays:
        removed, no model would be configured until the next start)."""
        record = await self._repo.get(provider_id)
        if record is None or not record.is_custom or not await self._repo.delete(provider_id):
            raise UnknownCustomProvider(provider_id, record is not None)

    async def set_active(self, provider_id: str, model: str, scope: str) -> dict[str, str]:
        record = await self._repo.get(provider_id)
        if record is None:
            raise UnknownProvider(provider_id)
        known = {m["id"] for m in record.models} | (
            {record.chat_model} if record.chat_model else set()
        )
        if model not in known:
            raise UnknownModel(
                f"model {model!r} is not offered by provider {provider_id!r}; "
                f"known models: {sorted(known)}"
            )
        active = {"provider_id": provider_id, "model": model, "scope": scope}
        await self._repo.set_active(active)
        return active

    async def get_active(self) -> dict[str, str] | None:
        return await self._repo.get_active()

    async def active_model(self) -> ChatModel:
        """The model turns use now; ModelError if none is configured."""
        active, record = await self._repo.active()
        if active is None:
            raise ModelError(
                "no model is configured: add a provider and choose a model "
                "(PUT /api/models/active), or start with OPENAI_API_KEY and TETHER_MODEL set"
            )
        if record is None:
            raise ModelError(f"the active provider {active['provider_id']!r} no longer exists")
        cache_key = (record.id, record.base_url, active["model"], record.api_key_encrypted or "")
        model = self._models.get(cache_key)
        if model is None:
            # Decrypted only to build the client: a turn with the model cached needs no key.
            key = self._key_of(record)
            model = self._factory(record.base_url, key, active["model"])
            self._models = {cache_key: model}  # one active model at a time
        return model

    async def test_connection(self, provider_id: str, time_limit: float) -> ProbeResult:
        """Make a 1-token completion through the provider with its stored key.

        The model tried is the active one when this provider is active, else the
        provider's chat model, else the first model it lists."""
        record = await self._repo.get(provider_id)
        if record is None:
            raise UnknownProvider(provider_id)
        active = await self._repo.get_active()
        if active is not None and active["provider_id"] == provider_id:
            model = active["model"]
        else:
            model = record.chat_model or next((m["id"] for m in record.models), "")
        if not model:
            return ProbeResult(False, "", 0, "the provider lists no model to try")
        try:
            key = self._key_of(record)
        except ModelError as exc:
            return ProbeResult(False, model, 0, str(exc))
        return await probe_model(record.base_url, key, model, time_limit)

    def _key_of(self, record: ProviderRecord) -> str:
        """The provider's API key, decrypted (empty when it has none)."""
        if not record.api_key_encrypted:
            return ""
        try:
            return self._keybox.open(record.api_key_encrypted)
        except ValueError as exc:
            # Most often a server with another key than the one that sealed it: a second
            # TETHER_HOME on the same database, or a lost secret.key.
            raise ModelError(
                f"the API key of provider {record.id!r} cannot be decrypted with this "
                "server's key: servers sharing a database must share TETHER_SECRET_KEY "
                "(or enter the key again)"
            ) from exc

    async def bootstrap_from_env(self, env: Mapping[str, str]) -> None:
        """Register the provider given by OPENAI_API_KEY / OPENAI_BASE_URL / TETHER_MODEL."""
        api_key = env.get("OPENAI_API_KEY")
        model = env.get("TETHER_MODEL")
        if not api_key or not model:
            return
        record = ProviderRecord(
            id=ENV_PROVIDER_ID,
            name="OpenAI-compatible (environment)",
            base_url=env.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            api_key_encrypted=self._keybox.seal(api_key),
            chat_model=model,
            models=[{"id": model, "name": model}],
            is_custom=False,
        )
        await self._repo.upsert(record)
        if await self._repo.get_active() is None:
            await self._repo.set_active(
                {"provider_id": ENV_PROVIDER_ID, "model": model, "scope": "global"}
            )
