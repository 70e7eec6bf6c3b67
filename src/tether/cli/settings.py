"""The server's settings as the CLI reads them: an invalid one stops the command with a
line naming it, instead of a traceback (which also quoted the value: it may be a secret).
"""

from __future__ import annotations

from typing import Any

import click
from pydantic import ValidationError

from tether.config import Settings


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment (and ``overrides``, from options), or a
    ClickException listing each one that does not hold and why."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = [f"{_variable(error['loc'])}: {error['msg']}" for error in exc.errors()]
        raise click.ClickException("invalid settings:\n  " + "\n  ".join(problems)) from None


def _variable(location: tuple[int | str, ...]) -> str:
    prefix = Settings.model_config.get("env_prefix", "")
    return f"{prefix}{location[0]}".upper() if location else "settings"
