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
        problems = [f"{_source(error['loc'], overrides)}: {error['msg']}" for error in exc.errors()]
        raise click.ClickException("invalid settings:\n  " + "\n  ".join(problems)) from None


def _source(location: tuple[int | str, ...], overrides: dict[str, Any]) -> str:
    """Where a setting came from: its option (``--port``) when one gave it, else its
    variable (``TETHER_PORT``)."""
    if not location:
        return "settings"
    if location[0] in overrides:
        return "--" + str(location[0]).replace("_", "-")
    prefix = Settings.model_config.get("env_prefix", "")
    return f"{prefix}{location[0]}".upper()
