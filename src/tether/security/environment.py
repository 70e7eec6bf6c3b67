"""Which environment variables count as secrets, so tool processes never inherit them."""

from __future__ import annotations

from collections.abc import Callable, Iterable

# A name containing any of these is treated as a secret (OPENAI_API_KEY, GITHUB_TOKEN,
# DB_PASSWORD, ...). Over-matching only hides a harmless variable from the shell;
# under-matching hands a credential to whatever command the model writes.
_SECRET_WORDS = (
    "TOKEN",
    "SECRET",
    # PASSWORD, PASSWD, PASSPHRASE, SMTP_PASS, ...
    "PASS",
    "API_KEY",
    "APIKEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
)
# Whole parts of a name between underscores that mark a credential: AZURE_OPENAI_KEY,
# MYSQL_PWD, DOCKER_AUTH_CONFIG, NPM_CONFIG__AUTH, SENTRY_DSN (as parts, so that PWD
# itself, OLDPWD, KEYMAP or GIT_AUTHOR_NAME stay).
_SECRET_PARTS = frozenset({"KEY", "PWD", "AUTH", "DSN"})


def is_secret_variable(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether the shell tool must not see ``name``.

    Every ``TETHER_*`` variable (the API token among them), anything whose name looks
    like a credential (a word of ``_SECRET_WORDS`` in it, or a part of
    ``_SECRET_PARTS`` between underscores), and the names an operator lists in
    ``TETHER_SECRET_ENV_VARS`` (compared case-insensitively).
    """
    upper = name.upper()
    if upper.startswith("TETHER_") or any(word in upper for word in _SECRET_WORDS):
        return True
    if "_" in upper and not _SECRET_PARTS.isdisjoint(upper.split("_")):
        return True
    return upper in {e.upper() for e in extra}


def secret_variable_policy(extra: Iterable[str]) -> Callable[[str], bool]:
    """``is_secret_variable`` with the operator's extra names bound in."""
    names = frozenset(e.upper() for e in extra)
    return lambda name: is_secret_variable(name, names)
