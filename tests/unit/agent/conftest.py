"""The ``env`` fixture: an in-process agent with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agent_fakes import AgentEnv, make_env


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[AgentEnv]:
    services, model = await make_env(tmp_path, max_steps=3)
    try:
        yield AgentEnv(services, model)
    finally:
        await services.tasks.shutdown()
        await services.coordinator.shutdown()
        # The home's limits groups go with it (cgroup directories outlive the test).
        await services.sandbox.close()
        await services.store.db.close()
        if services.store.owner is not None:
            services.store.owner.release()
