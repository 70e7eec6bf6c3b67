"""`tether status`: the tool calls in flight, from the database and the call files,
whether the server is up or not."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tether import home_access
from tether.errors import OutOfStorage
from tether.keeper.client import RunnerInfo
from tether.keeper.inventory import Found

if TYPE_CHECKING:
    from tether.config import Settings


def _describe(found: Found, now: float) -> str:
    record, spec = found.record, found.spec
    session = record.session_id if record else "-"
    command = ""
    if record is not None:
        command = str(record.arguments.get("command", record.tool_name))
    elif spec is not None:
        command = " ".join(spec.argv[2:] if spec.argv[1:2] == ["-c"] else spec.argv)
    started = record.started_at if record else (spec.started_at if spec else now)
    # The runner's (it enforces it), else the row's (a call the server runs itself);
    # none once the call has ended.
    kill_at = spec.kill_at if spec is not None else (record.kill_at if record else None)
    deadline = "-"
    if kill_at is not None and found.fate == "running":
        deadline = f"{max(0.0, kill_at - now):.0f}s left"
    line = (
        f"{found.call_id}\t{found.fate}\t{session}\t{now - started:.0f}s\t{deadline}\t"
        f"{command[:60]}"
    )
    if found.problem:
        line += f"\n\t{found.problem}"
    return line


def _runner_line(info: RunnerInfo | None, keeper_on: bool) -> str:
    """Whether a runner serves the home, and what it does when nothing needs it."""
    if info is None:
        if not keeper_on:
            return "keeper: off (TETHER_KEEPER=0): calls run as the server's children"
        return "keeper: no runner now (a server with the keeper on starts one for its next call)"
    line = f"keeper: runner pid {info.identity.pid} (Tether {info.version}), {info.calls} call(s)"
    if info.retiring:
        return f"{line}, exiting"
    if info.idle_exit is not None:
        line += f"; exits after {info.idle_exit:.0f}s with no call and no server"
    return line


async def _survey() -> tuple[list[Found], RunnerInfo | None]:
    from tether.cli.settings import load_settings
    from tether.keeper import inventory
    from tether.store.database import Database
    from tether.store.toolcalls import ToolCallRepository

    settings = load_settings()
    db = Database(settings.resolved_database_url)
    try:
        # A status never changes the schema: one that is behind stops here, naming
        # `tether db upgrade`.
        await db.open_checked()
        repo = ToolCallRepository(db)
        unfinished = await repo.unfinished()
        info, running = await _runners_calls(settings.home)
        directories = await asyncio.to_thread(inventory.call_directories, settings.home)
        found = await asyncio.to_thread(
            inventory.survey, settings.home, unfinished, running, directories
        )
        accounted = {r.id for r in unfinished}
        found += await inventory.strays(settings.home, accounted, running, repo, directories)
    finally:
        await db.close()
    return found, info


async def _runners_calls(home: Path) -> tuple[RunnerInfo | None, dict[str, dict[str, Any]]]:
    """The home's live runner and the calls it runs (None and none: no runner)."""
    from tether.keeper import client

    running_runner = await asyncio.to_thread(client.live_runner, home)
    if running_runner is None:
        return None, {}
    keeper = client.KeeperClient(home)
    try:
        # A runner whose socket was removed is asked to listen again (SIGHUP).
        await asyncio.to_thread(client.reachable, home, running_runner)
        info = await keeper.hello()  # speaks the runner's protocol, whichever left it
        listed = await keeper.request("list")
        return info, {str(c["call_id"]): c for c in listed["calls"]}
    except client.RunnerUnavailable:
        return None, {}  # it was leaving (idle) just as we asked: no runner
    finally:
        keeper.close()


def _under_server(found: Found, server: int | None) -> Found:
    """A call not under the keeper is not lost while the server that runs it is up; one
    that waited for approval when its server went away will not run."""
    if found.fate == "awaiting_approval" and server is None:
        problem = "its server stopped before anyone answered: the next start denies it"
        return replace(found, problem=problem)
    if found.fate != "not_kept" or server is None:
        return found
    problem = f"runs under the server (pid {server}), not under the keeper: it ends with it"
    return replace(found, fate="running", problem=problem)


def _require_home(settings: Settings) -> None:
    """Refuse a home where Tether never ran (a mistyped TETHER_HOME): the survey would
    create it and its database, and report that nothing runs there."""
    home = settings.home
    if not home.is_dir():
        raise click.ClickException(f"no Tether home at {home} (TETHER_HOME): nothing ran there")
    if settings.database_url is None and not (home / "tether.db").is_file():
        raise click.ClickException(f"no Tether database in {home}: nothing ran there")
    refused = home_access.refusal(home, "cannot show the status")
    if refused is not None:
        raise click.ClickException(refused)


@click.command()
def status() -> None:
    """Print the keeper's runner (if one runs) and the tool calls in flight: id, fate,
    session, elapsed, deadline, command."""
    from tether.cli.settings import load_settings
    from tether.keeper import home_lock

    settings = load_settings()
    _require_home(settings)
    try:
        found, runner = asyncio.run(_survey())
    except (RuntimeError, OutOfStorage) as exc:  # SchemaError, the driver missing, a full disk
        raise click.ClickException(str(exc)) from None
    click.echo(_runner_line(runner, settings.keeper))
    if not found:
        click.echo("no tool calls in flight")
        return
    server = home_lock.holder(settings.home)
    click.echo("id\tfate\tsession\telapsed\tdeadline\tcommand")
    now = time.time()
    for item in found:
        click.echo(_describe(found=_under_server(item, server), now=now))
