"""`tether db ...`: the database's schema, and the check `tether serve` runs first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from sqlalchemy.engine import make_url

from tether import home_access
from tether.cli.settings import load_settings
from tether.config import Settings
from tether.errors import OutOfStorage
from tether.store.database import Database, shown_url
from tether.store.schema import SchemaError


async def _run(url: str, upgrade: bool) -> None:
    db = Database(url)
    try:
        await (db.migrate() if upgrade else db.open_checked())
    finally:
        await db.close()


def check_schema(settings: Settings) -> None:
    """Create the schema in an empty database, or stop with a clear message when an
    existing one is not at this version's revision (it names `tether db upgrade`)."""
    url = settings.resolved_database_url
    try:
        asyncio.run(_run(url, upgrade=False))
    except (SchemaError, RuntimeError, OutOfStorage) as exc:
        raise click.ClickException(f"{shown_url(url)}: {exc}") from None


@click.group()
def db() -> None:
    """The database schema (TETHER_DATABASE_URL, default SQLite under TETHER_HOME)."""


@db.command()
def upgrade() -> None:
    """Upgrade the schema to this version's (back the database up first)."""
    settings = load_settings()
    url = settings.resolved_database_url
    if settings.database_url is None:  # the database is the home's
        refused = home_access.refusal(settings.home, "cannot upgrade the database")
        if refused is not None:
            raise click.ClickException(refused)
    missing = _missing_sqlite_file(url)
    if missing is not None:
        # A mistyped TETHER_HOME made a home with an empty database, "up to date".
        raise click.ClickException(
            f"no database at {missing}: nothing to upgrade (`tether serve` makes one at its "
            "first start; is TETHER_HOME or TETHER_DATABASE_URL the one you meant?)"
        )
    try:
        asyncio.run(_run(url, upgrade=True))
    except (SchemaError, RuntimeError, OutOfStorage) as exc:
        raise click.ClickException(f"{shown_url(url)}: {exc}") from None
    click.echo(f"{shown_url(url)}: schema is up to date")


def _missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file ``url`` names, if neither it nor its directory exists (None: one
    does, or the database is not a SQLite file). A home made but never started is
    upgraded: its schema is made, as its first start would."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return None if path.exists() or path.parent.is_dir() else path
