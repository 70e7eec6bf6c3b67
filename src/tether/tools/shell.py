"""The `execute_shell_command` tool: a real subprocess whose output streams live."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tether.toolcalls.launcher import LaunchedProcess
from tether.tools.base import RunContext, Tool, ToolInputError, ToolResult
from tether.tools.confinement import confine

SHELL_TOOL = "execute_shell_command"
#: The most bytes one argument of a program may hold on Linux, its terminating NUL
#: included (the kernel's MAX_ARG_STRLEN: 32 pages, 128 KiB with 4 KiB pages). The
#: command is one argument of the shell, so a longer one could never start.
MAX_ARG_BYTES = 128 * 1024
SANDBOX_NOTE = (
    " Commands run in a sandbox: the filesystem is read-only except the workspace and a "
    "private /tmp, and the network is off unless the session allows it. When a command "
    "truly needs more, ask for it with network: true or sandbox: false; a person may be "
    "asked to approve, so say why in your reply. Do not ask for more than the task needs."
)
SANDBOX_PARAMETERS: dict[str, Any] = {
    "network": {
        "type": "boolean",
        "description": "Needs network access (asks a person when the session has none).",
    },
    "sandbox": {
        "type": "boolean",
        "description": "false: run outside the sandbox (asks a person). Default true.",
    },
}


def shell_environment(base: Mapping[str, str], is_secret: Callable[[str], bool]) -> dict[str, str]:
    """The environment a command runs with: the server's, minus secrets, with the
    server's Python first on PATH so `python` means the interpreter Tether runs on."""
    env = {k: v for k, v in base.items() if not is_secret(k)}
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([python_dir, env.get("PATH", os.defpath)])
    return env


def _command_of(args: Mapping[str, Any]) -> str:
    """The command to run, or ToolInputError saying why it cannot run."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolInputError("command must be a non-empty string")
    size = len(command.encode("utf-8", "surrogatepass"))
    if size >= MAX_ARG_BYTES:
        raise ToolInputError(
            f"the command is {size:,} bytes; the kernel takes at most {MAX_ARG_BYTES - 1:,} "
            f"bytes in one argument (MAX_ARG_STRLEN, 128 KiB). Write long input to a file "
            f"in parts and run or read that file instead"
        )
    return command


async def _resolve_cwd(cwd: object, ctx: RunContext) -> Path:
    """The directory to run in: the workspace, or a directory the file tools could use
    (so ``cwd`` cannot start a command inside TETHER_HOME or, unapproved, outside the
    workspace). What the command itself then reads is governance's business."""
    if cwd is None or cwd == "":
        return ctx.workspace  # no look at the disk: no trip to a worker thread
    if not isinstance(cwd, str):
        raise ToolInputError("cwd must be a string path")
    return await asyncio.to_thread(_existing_dir, cwd, ctx)


def _existing_dir(cwd: str, ctx: RunContext) -> Path:
    path = confine(cwd, ctx)
    if not path.is_dir():
        raise ToolInputError(f"cwd {cwd!r} is not a directory")
    return path


async def describe_end(process: LaunchedProcess) -> ToolResult:
    """How a tree that has ended is reported: the limit that ended it, in plain words,
    else its exit (for a call this server started, and for one it adopted)."""
    code = await process.wait()
    resources = await process.resources()
    note = resources.limit_note() if resources is not None else None
    if note is not None:
        return ToolResult(is_error=True, summary=note)
    return describe_exit(code)


def describe_exit(code: int) -> ToolResult:
    """How a command that ended with ``code`` (minus a signal number) is reported."""
    if code == 0:
        return ToolResult(summary="exit code 0")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ToolResult(is_error=True, summary=f"terminated by {name}")
    return ToolResult(is_error=True, summary=f"exit code {code}")


def make_shell_tool(
    default_timeout: float,
    max_timeout: float,
    environment: Callable[[], dict[str, str]],
    shell: str | None = None,
    sandboxed: bool = False,
) -> Tool:
    """Build the shell tool with the server's timeouts and environment policy.

    ``sandboxed``: calls run in the sandbox, so the model is told how to ask for more."""
    shell_path = shell or os.environ.get("SHELL") or "/bin/sh"

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        command = _command_of(args)
        cwd = await _resolve_cwd(args.get("cwd"), ctx)
        process = await ctx.launch((shell_path, "-c", command), cwd, environment())
        await process.follow(ctx.emit)
        return await describe_end(process)

    def timeout_of(args: Mapping[str, Any]) -> float | None:
        value = args.get("timeout", default_timeout)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return default_timeout
        if not math.isfinite(value) or value <= 0:  # NaN passed "<= 0" and killed at once
            return default_timeout
        return float(value)

    description = (
        "Run a shell command in the workspace and return its output and exit code. "
        "Output streams live to the user. Long-running commands may be moved to the "
        "background by the user; their result then arrives in a later message."
    )
    properties: dict[str, Any] = {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout": {
            "type": "number",
            "description": f"Seconds before the command is killed (default "
            f"{default_timeout:g}, at most {max_timeout:g}).",
        },
        "cwd": {"type": "string", "description": "Working directory, relative to the workspace."},
    }
    if sandboxed:
        description += SANDBOX_NOTE
        properties.update(SANDBOX_PARAMETERS)
    return Tool(
        name=SHELL_TOOL,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": ["command"],
            "additionalProperties": False,
        },
        run=run,
        max_timeout=max_timeout,
        timeout_of=timeout_of,
        check=_command_of,
    )
