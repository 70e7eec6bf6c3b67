"""Two nodes on one store with one TETHER_SECRET_KEY: a provider key sealed by one opens
on the other, and no key file is written; a malformed key stops `tether serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from core_support import AppServer, FakeModel, Stack, new_session, start_server
from cryptography.fernet import Fernet
from helpers import register_mock_provider

from database_support import shared_database_url

pytestmark = pytest.mark.integration


def test_a_secret_sealed_on_one_node_opens_on_another(tmp_path: Path) -> None:
    env = {
        "TETHER_DATABASE_URL": shared_database_url(tmp_path),
        "TETHER_SECRET_KEY": Fernet.generate_key().decode(),
        "TETHER_LLM_MAX_RETRIES": "0",
    }
    model = FakeModel()
    first = start_server(tmp_path / "a", **env)
    second = None
    try:
        register_mock_provider(first, model.url)
        second = start_server(tmp_path / "b", **env)
        stack = Stack(second, model)
        task = stack.wait_task(stack.submit("hello", new_session()))
        assert task["result"]["status"] == "completed", task
        assert not (tmp_path / "a" / "secret.key").exists()
        assert not (tmp_path / "b" / "secret.key").exists()
    finally:
        first.close()
        if second is not None:
            second.close()
        model.close()


def test_a_malformed_shared_key_stops_serve(tmp_path: Path) -> None:
    server = AppServer(tmp_path / "home", {"TETHER_SECRET_KEY": "a-secret-but-no-key"})
    server.home.mkdir()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tether", "serve", "--port", str(server.port)],
            env=server._env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.close()
    assert done.returncode != 0
    assert "TETHER_SECRET_KEY is not a Fernet key" in done.stderr
    assert "a-secret-but-no-key" not in done.stderr + done.stdout
