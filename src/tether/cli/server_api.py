"""What the `tether` subcommands that talk to a running server share: the connection
options, one request helper that turns failures into readable errors, and tables."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx

# The server's own defaults (TETHER_HOST, TETHER_PORT).
_DEFAULT_HOST, _DEFAULT_PORT = "127.0.0.1", "8088"
# Where a server bound to every address is reached from this machine.
_LOCAL_FOR = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
_TIMEOUT_SECONDS = 30.0

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class ServerApi:
    """A running server's HTTP API, as the CLI uses it."""

    url: str
    token: str | None
    as_json: bool

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        hints: Mapping[int, str] | None = None,
    ) -> Any:
        """One request; any failure becomes a readable click error (exit status 1),
        followed by ``hints``' line for its status (what to do about it on the command
        line, where the server's words name routes)."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            with httpx.Client(base_url=self.url, timeout=_TIMEOUT_SECONDS) as client:
                resp = client.request(method, path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise click.ClickException(f"cannot reach Tether at {self.url}: {exc}") from None
        if resp.status_code >= 400:
            hint = (hints or {}).get(resp.status_code)
            raise click.ClickException(describe_error(resp) + (f"\n{hint}" if hint else ""))
        return resp.json()

    def show(self, value: Any, text: str) -> None:
        click.echo(json.dumps(value, indent=2) if self.as_json else text)

    @classmethod
    def connect(cls, url: str, token: str | None, as_json: bool) -> ServerApi:
        """The API at ``url`` with ``token``, else the one under TETHER_HOME."""
        return cls(url.rstrip("/"), token or token_from_home(), as_json)


def default_url() -> str:
    """The server this machine's `tether serve` runs, as TETHER_HOST and TETHER_PORT
    say (the same settings it reads), reached on loopback when bound to every address."""
    host = os.environ.get("TETHER_HOST", _DEFAULT_HOST).strip()
    host = _LOCAL_FOR.get(host, host)
    port = os.environ.get("TETHER_PORT", _DEFAULT_PORT).strip()
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def url_option() -> Callable[[F], F]:
    """``--url``: the server's address (TETHER_URL, else :func:`default_url`)."""
    return click.option(
        "--url",
        envvar="TETHER_URL",
        default=default_url,
        show_default="TETHER_URL, else http://TETHER_HOST:TETHER_PORT (127.0.0.1:8088)",
        help="The server's address.",
    )


def server_options(command: F) -> F:
    """The ``--url``, ``--token`` and ``--json`` options of a command group."""
    options = [
        url_option(),
        click.option(
            "--token", envvar="TETHER_TOKEN", help="API token (default: TETHER_HOME/token)."
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the server's JSON."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class ServerGroup(click.Group):
    """A command group whose connection options (``--url``, ``--token``, ``--json``) go
    before its subcommand. One given after it was refused with click's bare "No such
    option"; it is now told where it belongs."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            option = self._own_option(exc.option_name)
            if option is None:
                raise
            shown = exc.option_name
            if not option.is_flag:
                shown += f" {str(option.name).upper()}"
            raise click.UsageError(
                f"{exc.option_name} is an option of '{ctx.command_path}': give it before "
                f"the subcommand ({ctx.command_path} {shown} "
                f"{ctx.invoked_subcommand} ...)",
                ctx=exc.ctx,
            ) from None

    def _own_option(self, name: str) -> click.Option | None:
        return next(
            (p for p in self.params if isinstance(p, click.Option) and name in p.opts), None
        )


def describe_error(resp: httpx.Response) -> str:
    """``HTTP <status>: <detail>``, a 422's field errors one after the other."""
    try:
        detail = resp.json().get("detail")
    except (ValueError, AttributeError):
        detail = resp.text
    if isinstance(detail, list):  # a 422: one line per field
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', [])[1:])}: {e.get('msg')}" for e in detail
        )
    return f"HTTP {resp.status_code}: {detail}"


def token_from_home() -> str | None:
    """The token the server wrote under TETHER_HOME, if this user can read it."""
    home = Path(os.environ.get("TETHER_HOME") or Path.home() / ".tether")
    try:
        return (home / "token").read_text().strip() or None
    except OSError:
        return None


def table(rows: list[list[str]]) -> str:
    """Rows as left-aligned columns (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
