"""The `tether` command."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from tether import __version__
from tether.cli.audit import audit
from tether.cli.cron import cron
from tether.cli.db import db
from tether.cli.mcp import mcp
from tether.cli.status import status

if TYPE_CHECKING:
    from tether.config import Settings

# The levels both the log set-up and uvicorn know: uvicorn has no "warn" and the logging
# module no "trace" before uvicorn is imported, and either stopped the start with a
# traceback.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@click.group()
@click.version_option(__version__, prog_name="tether")
def main() -> None:
    """Tether: an agent server whose tool calls you can watch and control."""


@main.command()
@click.option(
    "--host", default=None, help="Address to bind (default: TETHER_HOST, else 127.0.0.1)."
)
@click.option(
    "--port", default=None, type=int, help="Port to bind (default: TETHER_PORT, else 8088)."
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    envvar="TETHER_LOG_LEVEL",
    help="Level of Tether's and uvicorn's loggers (also TETHER_LOG_LEVEL).",
)
@click.option(
    "--no-auth", is_flag=True, help="Serve without a token (loopback only; also TETHER_NO_AUTH)."
)
def serve(host: str | None, port: int | None, log_level: str, no_auth: bool) -> None:
    """Start the server (SQLite under TETHER_HOME; no other service needed)."""
    from tether import home_access, logs
    from tether.cli.settings import load_settings
    from tether.keeper import home_lock
    from tether.security.perimeter import LOOPBACK_NAMES

    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if no_auth:
        overrides["no_auth"] = True
    settings = load_settings(**overrides)
    if settings.no_auth and settings.host not in LOOPBACK_NAMES:
        raise click.UsageError("--no-auth is only allowed on a loopback address (127.0.0.1, ::1)")
    log_level = log_level.lower()
    logs.configure(log_level)
    refused = home_access.refusal(settings.home)
    if refused is not None:
        raise click.ClickException(refused)
    # The home is held from here on: a second server started at the same moment is
    # told so, instead of failing on the schema the first one is making.
    try:
        lock = home_lock.hold(settings.home)
    except home_lock.HomeInUse as exc:
        raise click.ClickException(str(exc)) from None
    try:
        _serve(settings, log_level)
    finally:
        home_lock.release(lock)


def _serve(settings: Settings, log_level: str) -> None:
    import uvicorn

    from tether.app import begin_exit, create_app
    from tether.cli.db import check_schema
    from tether.cli.signalled_server import serve
    from tether.security.http_head import BoundedHeadProtocol
    from tether.security.token import resolve_token

    _require_free_port(settings)
    check_schema(settings)
    _require_sandbox(settings)
    _require_redis(settings)
    app = create_app(settings, settle_heap=True)
    shown = "localhost" if settings.host in ("127.0.0.1", "::1") else settings.host
    url = f"http://{shown}:{settings.port}/"
    if not settings.no_auth:
        configured = settings.token.get_secret_value() if settings.token else None
        token = resolve_token(configured, settings.home)
        # Only a person at a terminal gets the token; stderr sent to a file or a journal
        # is a log, and logs never hold secrets.
        if sys.stderr.isatty():
            url += f"?token={token}"
        else:
            where = "TETHER_TOKEN" if configured else str(settings.home / "token")
            url += f" (open it with ?token=<the token in {where}>)"
    click.echo(f"Tether {__version__} console: {url}", err=True)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=BoundedHeadProtocol,
        log_level=log_level.lower(),
        # Uvicorn's own handlers would bypass the one-line, redacting formatter.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    serve(config, lambda: begin_exit(app))


def _require_free_port(settings: Settings) -> None:
    """Refuse to start, saying so, when the address is taken. Uvicorn binds only after the
    application's start: it started the keeper's runner and ran the whole start-up
    first, then logged the bind error among the start-up's records and stopped it."""
    import socket

    if settings.port == 0:
        return
    try:
        addresses = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)
    except OSError:
        return  # uvicorn says why the host does not resolve
    for family, kind, proto, _name, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: a port left in TIME_WAIT by a stopped server is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise click.ClickException(
                    f"refusing to start: cannot listen on {settings.host}:{settings.port} "
                    f"({exc.strerror or exc}): is another server on that port? Choose "
                    "another with --port or TETHER_PORT"
                ) from None


def _require_sandbox(settings: Settings) -> None:
    """With TETHER_SANDBOX=bwrap, refuse to start (saying why) when bwrap does not work."""
    from tether.sandbox.bwrap import probe

    if settings.sandbox != "bwrap":
        return
    result = probe()
    if not result.works:
        raise click.ClickException(f"refusing to start: TETHER_SANDBOX=bwrap but {result.reason}")


def _require_redis(settings: Settings) -> None:
    """With TETHER_REDIS_URL, refuse to start (saying why) when Redis does not answer."""
    if settings.redis_url is None:
        return
    from tether.cluster.bus import NEEDS_SECRET_KEY
    from tether.cluster.redis_link import shown_redis_url

    if settings.secret_key is None:
        raise click.ClickException(f"refusing to start: {NEEDS_SECRET_KEY}")
    url = settings.redis_url.get_secret_value()
    try:
        import redis
    except ModuleNotFoundError:
        raise click.ClickException(
            "refusing to start: TETHER_REDIS_URL is set but the redis package is not "
            "installed (pip install 'tether[cluster]')"
        ) from None
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise click.ClickException(
            f"refusing to start: cannot reach Redis at {shown_redis_url(url)}: {exc}"
        ) from None
    finally:
        client.close()


main.add_command(cron)
main.add_command(mcp)
main.add_command(audit)
main.add_command(status)
main.add_command(db)


if __name__ == "__main__":
    sys.exit(main())
