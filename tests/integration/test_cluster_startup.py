"""A node configured for a cluster refuses to start, saying why, when its Redis does not
answer; the password in the URL is never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_support import free_port, refused_start

pytestmark = pytest.mark.integration


def test_an_unreachable_redis_refuses_the_start(tmp_path: Path) -> None:
    dead = free_port()  # nothing listens there
    said = refused_start(
        tmp_path,
        TETHER_REDIS_URL=f"redis://:hunter2secret@127.0.0.1:{dead}/0",
        TETHER_SECRET_KEY="a-shared-key",
    )
    assert f"refusing to start: cannot reach Redis at redis://***@127.0.0.1:{dead}/0" in said
    assert "hunter2secret" not in said
    assert "Traceback" not in said


def test_a_cluster_without_a_shared_secret_key_refuses_the_start(tmp_path: Path) -> None:
    said = refused_start(tmp_path, TETHER_REDIS_URL="redis://127.0.0.1:6379/0")
    assert "refusing to start: TETHER_REDIS_URL needs TETHER_SECRET_KEY" in said
