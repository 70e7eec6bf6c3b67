"""Secrets at rest (key file, token file) and the shell environment scrub."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tether.security.environment import is_secret_variable, secret_variable_policy
from tether.security.keybox import KeyBox, shared_mode
from tether.security.token import resolve_token
from tether.tools.shell import shell_environment


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keybox_key_file_is_private_and_sealing_round_trips(tmp_path: Path) -> None:
    key_file = tmp_path / "home" / "secret.key"
    box = KeyBox(key_file)
    assert _mode(key_file) == 0o600
    sealed = box.seal("sk-plaintext-key")
    assert "sk-plaintext-key" not in sealed
    assert box.open(sealed) == "sk-plaintext-key"
    # A second process with the same home reads the same key.
    assert KeyBox(key_file).open(sealed) == "sk-plaintext-key"


def test_keybox_with_another_key_cannot_open(tmp_path: Path) -> None:
    sealed = KeyBox(tmp_path / "a.key").seal("sk-x")
    with pytest.raises(ValueError, match="cannot be decrypted"):
        KeyBox(tmp_path / "b.key").open(sealed)


def test_a_shared_key_opens_on_every_node_and_writes_no_file(tmp_path: Path) -> None:
    shared = Fernet.generate_key().decode()
    first = KeyBox(tmp_path / "a" / "secret.key", shared)
    second = KeyBox(tmp_path / "b" / "secret.key", shared)
    assert second.open(first.seal("sk-cluster")) == "sk-cluster"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_malformed_shared_key_is_refused_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="TETHER_SECRET_KEY is not a Fernet key") as caught:
        KeyBox(tmp_path / "secret.key", "not-a-key-but-a-secret")
    assert "not-a-key-but-a-secret" not in str(caught.value)


def test_token_is_generated_once_into_a_private_file(tmp_path: Path) -> None:
    first = resolve_token(None, tmp_path)
    assert len(first) >= 32
    assert _mode(tmp_path / "token") == 0o600
    assert resolve_token(None, tmp_path) == first
    assert resolve_token("configured", tmp_path) == "configured"


@pytest.mark.parametrize(
    "name",
    [
        "TETHER_TOKEN",
        "tether_home",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_PRIVATE_KEY",
        # Passed to calls before: credentials named otherwise.
        "AZURE_OPENAI_KEY",
        "MYSQL_PWD",
        "SMTP_PASS",
        "GPG_PASSPHRASE",
        "DOCKER_AUTH_CONFIG",
        "NPM_CONFIG__AUTH",
        "SENTRY_DSN",
    ],
)
def test_secret_variables(name: str) -> None:
    assert is_secret_variable(name)


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "HOME",
        "LANG",
        "SHELL",
        "PYTHONPATH",
        "TERM",
        "PWD",
        "OLDPWD",
        "GIT_AUTHOR_NAME",
        "KEYMAP",
        "SSH_AUTHORIZED",
    ],
)
def test_ordinary_variables(name: str) -> None:
    assert not is_secret_variable(name)


def test_operator_listed_variables_are_secret() -> None:
    policy = secret_variable_policy(["corp_vault_addr"])
    assert policy("CORP_VAULT_ADDR")
    assert policy("OPENAI_API_KEY")
    assert not policy("PATH")


def test_shell_environment_drops_secrets_and_keeps_the_rest() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "TETHER_TOKEN": "t",
        "OPENAI_API_KEY": "sk-x",
        "MY_DB_URL": "postgres://u:p@h/db",
    }
    env = shell_environment(base, secret_variable_policy(["MY_DB_URL"]))
    assert set(env) == {"PATH", "HOME"}
    assert env["PATH"].endswith("/usr/bin")


def test_shared_home_is_detected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    assert shared_mode(home) is None
    home.chmod(0o755)
    assert shared_mode(home) == 0o755
