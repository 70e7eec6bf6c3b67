"""`tether audit export`: the governance audit as JSON Lines, from a running server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

import click
import httpx

from tether.cli.server_api import describe_error, token_from_home, url_option

_TIMEOUT_SECONDS = 60.0


@click.group()
def audit() -> None:
    """The governance decision audit."""


@audit.command("export")
@url_option()
@click.option("--token", envvar="TETHER_TOKEN", help="API token (default: TETHER_HOME/token).")
@click.option("--since", help="From this time (epoch seconds or ISO 8601 with offset).")
@click.option("--until", help="Before this time (epoch seconds or ISO 8601 with offset).")
@click.option("--session-id", help="Only this session's decisions.")
@click.option("--decision", type=click.Choice(["allowed", "denied"]), help="Only this outcome.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="File to write (default: stdout).",
)
def export(
    url: str,
    token: str | None,
    since: str | None,
    until: str | None,
    session_id: str | None,
    decision: str | None,
    output: str,
) -> None:
    """Write every matching decision, oldest first, one JSON object per line."""
    params = {
        key: value
        for key, value in {
            "since": since,
            "until": until,
            "session_id": session_id,
            "decision": decision,
        }.items()
        if value is not None
    }
    token = token or token_from_home()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if output == "-":
        _stream(url.rstrip("/"), params, headers, sys.stdout)
        return
    # A failed export removes what it wrote: a partial file would pass for a whole one.
    target = Path(output)
    try:
        with target.open("w", encoding="utf-8") as sink:
            _stream(url.rstrip("/"), params, headers, sink)
    except click.ClickException:
        target.unlink(missing_ok=True)
        raise


def _stream(url: str, params: dict[str, str], headers: dict[str, str], sink: IO[str]) -> None:
    try:
        with (
            httpx.Client(base_url=url, timeout=_TIMEOUT_SECONDS) as client,
            client.stream(
                "GET", "/api/governance/audit/export", params=params, headers=headers
            ) as resp,
        ):
            if resp.status_code >= 400:
                resp.read()
                raise click.ClickException(describe_error(resp))
            for line in resp.iter_lines():
                if line:
                    sink.write(line + "\n")
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach Tether at {url}: {exc}") from None
