"""The `execute_shell_command` tool: a real subprocess whose output streams live."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tether.tools.base import MARKER_VAR, RunContext, Tool, ToolInputError, ToolResult
from tether.tools.paths import confine

_READ_SIZE = 64 * 1024
# After the shell exits, how long a background child may keep its pipes open before we
# stop reading (otherwise `sleep 600 &` would hold the call open for ten minutes).
_DRAIN_AFTER_EXIT = 1.0
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def shell_environment(base: Mapping[str, str], is_secret: Callable[[str], bool]) -> dict[str, str]:
    """The environment a command runs with: the server's, minus secrets, with the
    server's Python first on PATH so `python` means the interpreter Tether runs on."""
    env = {k: v for k, v in base.items() if not is_secret(k)}
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([python_dir, env.get("PATH", os.defpath)])
    return env


def _die_with_server() -> Callable[[], None] | None:
    """A pre-exec hook making the shell get SIGKILL if the server dies (Linux only).

    Commands run in their own session, so a server killed with SIGKILL would otherwise
    leave them running until the next start reaps them. This covers the shell itself;
    its children stay in its process group, which start-up recovery kills.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    server_pid = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The server may have died between fork and prctl: then no signal would come.
        if os.getppid() != server_pid:
            os._exit(137)

    return arm


def _resolve_cwd(cwd: object, ctx: RunContext) -> Path:
    """The directory to run in: the workspace, or a directory the file tools could use
    (so ``cwd`` cannot start a command inside TETHER_HOME or, unapproved, outside the
    workspace). What the command itself then reads is governance's business."""
    if cwd is None or cwd == "":
        return ctx.workspace
    if not isinstance(cwd, str):
        raise ToolInputError("cwd must be a string path")
    path = confine(cwd, ctx)
    if not path.is_dir():
        raise ToolInputError(f"cwd {cwd!r} is not a directory")
    return path


async def _pump(stream: asyncio.StreamReader, name: str, ctx: RunContext) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := await stream.read(_READ_SIZE):
        ctx.emit(name, decoder.decode(chunk))
    ctx.emit(name, decoder.decode(b"", final=True))


def _describe_exit(code: int) -> ToolResult:
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
) -> Tool:
    """Build the shell tool with the server's timeouts and environment policy."""
    shell_path = shell or os.environ.get("SHELL") or "/bin/sh"

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolInputError("command must be a non-empty string")
        cwd = await asyncio.to_thread(_resolve_cwd, args.get("cwd"), ctx)
        env = environment()
        env[MARKER_VAR] = ctx.marker
        proc = await asyncio.create_subprocess_exec(
            shell_path,
            "-c",
            command,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_server(),
        )
        ctx.attach_process(proc.pid, proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        readers = asyncio.gather(
            _pump(proc.stdout, "stdout", ctx), _pump(proc.stderr, "stderr", ctx)
        )
        try:
            code = await proc.wait()
            try:
                await asyncio.wait_for(asyncio.shield(readers), _DRAIN_AFTER_EXIT)
            except TimeoutError:
                readers.cancel()
                ctx.emit("stderr", "\n[tether: background processes kept the output open]\n")
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await readers
        return _describe_exit(code)

    def timeout_of(args: Mapping[str, Any]) -> float | None:
        value = args.get("timeout", default_timeout)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            return default_timeout
        return float(value)

    return Tool(
        name="execute_shell_command",
        description=(
            "Run a shell command in the workspace and return its output and exit code. "
            "Output streams live to the user. Long-running commands may be moved to the "
            "background by the user; their result then arrives in a later message."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run."},
                "timeout": {
                    "type": "number",
                    "description": f"Seconds before the command is killed (default "
                    f"{default_timeout:g}, at most {max_timeout:g}).",
                },
                "cwd": {
                    "type": "string",
                    "description": "Working directory, relative to the workspace.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        run=run,
        max_timeout=max_timeout,
        timeout_of=timeout_of,
    )
