"""`tether mcp ...`: manage MCP servers through a running server's HTTP API."""

from __future__ import annotations

from typing import Any

import click

from tether.cli.server_api import ServerApi, ServerGroup, server_options, table


@click.group(cls=ServerGroup)
@server_options
@click.pass_context
def mcp(ctx: click.Context, url: str, token: str | None, as_json: bool) -> None:
    """Manage MCP servers (their tools are offered to the model as KEY__TOOL)."""
    ctx.obj = ServerApi.connect(url, token, as_json)


@mcp.command("list")
@click.pass_obj
def list_clients(api: ServerApi) -> None:
    """List the MCP servers with their status and tool count."""
    clients = api.call("GET", "/api/mcp")
    rows = [["KEY", "NAME", "TRANSPORT", "STATUS", "TOOLS", "ERROR"]]
    rows += [
        [
            c["key"],
            c["name"],
            c["transport"],
            c["status"],
            str(c["tool_count"]),
            (c["error"] or "").splitlines()[0][:60] if c["error"] else "-",
        ]
        for c in clients
    ]
    api.show(clients, table(rows) if clients else "no MCP servers")


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint=option)
        pairs[name] = rest
    return pairs


@mcp.command("add")
@click.argument("key")
@click.option("--name", help="Display name (default: the key).")
@click.option("--command", "command", help="Start this program (stdio transport).")
@click.option("--arg", "args", multiple=True, help="An argument of --command (repeatable).")
@click.option("--env", "env", multiple=True, help="NAME=VALUE for --command (repeatable).")
@click.option("--cwd", help="Working directory of --command (default: the workspace).")
@click.option("--no-sandbox", is_flag=True, help="Run --command outside the sandbox.")
@click.option(
    "--network",
    type=click.Choice(["none", "full"]),
    help="Network of --command in the sandbox (default: TETHER_SANDBOX_NETWORK).",
)
@click.option("--url", "endpoint", help="Connect to this MCP URL instead.")
@click.option("--sse", is_flag=True, help="The URL speaks the older SSE transport.")
@click.option("--header", "headers", multiple=True, help="NAME=VALUE for --url (repeatable).")
@click.option("--timeout", type=float, help="Kill deadline of its calls, seconds (default 600).")
@click.option("--disabled", is_flag=True, help="Add it without connecting.")
@click.pass_obj
def add(api: ServerApi, /, key: str, **opts: Any) -> None:
    """Add an MCP server: --command (stdio) or --url (streamable HTTP, or SSE with --sse).
    Values of --env and --header are stored encrypted and never shown again."""
    if (opts["command"] is None) == (opts["endpoint"] is None):
        raise click.UsageError("give exactly one of --command and --url")
    client: dict[str, Any] = {"name": opts["name"] or key, "enabled": not opts["disabled"]}
    if opts["command"] is not None:
        client |= {"transport": "stdio", "command": opts["command"], "args": list(opts["args"])}
        client["env"] = _pairs(opts["env"], "--env")
        if opts["cwd"]:
            client["cwd"] = opts["cwd"]
        client |= {"sandbox": not opts["no_sandbox"], "sandbox_network": opts["network"]}
    else:
        client |= {"transport": "sse" if opts["sse"] else "streamable_http"}
        client |= {"url": opts["endpoint"], "headers": _pairs(opts["headers"], "--header")}
    if opts["timeout"] is not None:
        client["http_timeout"] = opts["timeout"]
    replace = f"To replace it, remove it first: tether mcp rm {key}"
    created = api.call(
        "POST", "/api/mcp", {"client_key": key, "client": client}, hints={409: replace}
    )
    api.show(created, f"added {created['key']} ({created['status']})")


@mcp.command("rm")
@click.argument("key")
@click.pass_obj
def remove(api: ServerApi, key: str) -> None:
    """Remove an MCP server (a stdio server's process ends)."""
    answer = api.call("DELETE", f"/api/mcp/{key}")
    api.show(answer, f"removed {key}")
