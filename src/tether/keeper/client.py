"""The server's side of the runner: find it (or start it, detached), and talk to it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether import __version__
from tether.keeper import layout, protocol
from tether.keeper.identity import ProcessIdentity

_START_TIMEOUT = 15.0
#: How long an answer may take. The runner answers in milliseconds, and in seconds when
#: a thousand calls start at once; a runner silent this long is stopped (SIGSTOP) or
#: stuck, and waiting on it for ever would hang the server's start and its requests.
ANSWER_TIMEOUT = 30.0


class RunnerUnavailable(Exception):
    """No runner answers for this home and none could be started."""


class RunnerIncompatible(Exception):
    """The home's runner runs calls and shares no protocol number with this server."""


@dataclass(frozen=True)
class RunnerInfo:
    """A live runner as it describes itself."""

    identity: ProcessIdentity
    protocol: int
    version: str
    #: The oldest protocol it still serves.
    oldest: int = 1
    #: How many calls it runs.
    calls: int = 0
    #: On its way out: it takes no new call (absent before: False).
    retiring: bool = False
    #: Seconds it stays with no call and no connection before it exits (None: until
    #: stopped, as runners before this field did).
    idle_exit: float | None = None

    @property
    def spoken(self) -> int | None:
        """The protocol this server speaks with it (None: no number both know)."""
        return protocol.negotiate(self.oldest, self.protocol)

    @property
    def of_another_version(self) -> bool:
        """Whether another version of Tether started it (its code is not this code)."""
        mine = (__version__, protocol.PROTOCOL, protocol.OLDEST)
        return (self.version, self.protocol, self.oldest) != mine


#: Far more than runner.json holds (a pid, a start time, versions).
_RUNNER_FILE_BYTES = 64 * 1024


def recorded_runner(home: Path) -> ProcessIdentity | None:
    """The runner ``runner.json`` names, if that very process still runs."""
    try:
        raw = layout.read_file(layout.runner_file(home), _RUNNER_FILE_BYTES)
        data = json.loads(raw or b"")
        identity = ProcessIdentity(int(data["pid"]), float(data["create_time"]))
    except (layout.Unreadable, ValueError, KeyError, TypeError):
        return None
    return identity if identity.is_alive() else None


def live_runner(home: Path) -> ProcessIdentity | None:
    """The home's live runner: the one ``runner.json`` names, else the one answering
    on the home's socket (its runner.json damaged or removed). Blocking."""
    running = recorded_runner(home)
    if running is None and layout.socket_path(home).exists():
        running = _identify_by_socket(home)
    return running


# Requests that change nothing when repeated: retried once on a fresh connection.
_IDEMPOTENT = frozenset({"hello", "list", "extend", "watch"})


class KeeperClient:
    """Requests to the runner of one home, one at a time over one kept connection."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.socket = layout.socket_path(home)
        self._lock = asyncio.Lock()
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        #: The protocol requests are sent at (set by :meth:`hello`).
        self.spoken = protocol.PROTOCOL

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_unix_connection(self.socket, limit=protocol.MAX_LINE)
        except OSError as exc:
            raise RunnerUnavailable(f"no runner answers on {self.socket}: {exc}") from exc

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request; its answer, or ProtocolError with the runner's reason."""
        version = protocol.HELLO_VERSION if op == "hello" else self.spoken
        needed = protocol.version_for(fields)
        if needed > version:
            raise protocol.ProtocolError(
                f"the runner speaks protocol {version}, and {op!r} with these fields needs "
                f"{needed}; it is replaced by one of this version once it runs no call"
            )
        message = protocol.encode({"v": version, "op": op, **fields})
        async with self._lock:
            try:
                line = await self._exchange(message)
            except RunnerUnavailable:
                if op not in _IDEMPOTENT:
                    raise
                line = await self._exchange(message)
        answer = protocol.decode(line)
        if not answer.get("ok"):
            raise protocol.ProtocolError(str(answer.get("error", "refused")))
        return answer

    async def _exchange(self, message: bytes) -> bytes:
        if self._conn is None:
            self._conn = await self._connect()
        try:
            return await _ask(*self._conn, message)
        except BaseException:
            # A failed connection is dropped. So is one cancelled between the request
            # and its answer (a stopped turn): the answer is still coming, and the next
            # request on it would read it as its own.
            self.close()
            raise

    def close(self) -> None:
        """Drop the kept connection (the next request opens another)."""
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None

    async def hello(self) -> RunnerInfo:
        """Who the runner is (pid and start time, protocols, version, calls); later
        requests are sent at the newest protocol both know (when there is one)."""
        a = await self.request("hello")
        info = RunnerInfo(
            ProcessIdentity(int(a["pid"]), float(a["create_time"])),
            int(a["protocol"]),
            str(a["version"]),
            oldest=int(a.get("oldest", a["protocol"])),
            calls=int(a.get("calls", 0)),
            retiring=bool(a.get("retiring", False)),
            idle_exit=None if a.get("idle_exit") is None else float(a["idle_exit"]),
        )
        if info.spoken is not None:
            self.spoken = info.spoken
        return info

    async def watch(self) -> Watch:
        """A connection of its own receiving the runner's events from now on (output
        positions, ends); events that happen after this returns are never missed."""
        reader, writer = await self._connect()
        watch = Watch(reader, writer)
        try:
            line = await _ask(reader, writer, protocol.encode({"v": self.spoken, "op": "watch"}))
            first = protocol.decode(line)
            if not first.get("watching"):
                raise protocol.ProtocolError(str(first.get("error", "watch refused")))
        except BaseException:
            watch.close()
            raise
        return watch


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: bytes) -> bytes:
    """Send one request and read its answer line. RunnerUnavailable if the connection
    fails or closes, or the runner says nothing for ANSWER_TIMEOUT seconds (a stopped
    or stuck runner still accepts connections); the caller closes the connection."""
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT):
            writer.write(message)
            await writer.drain()
            line = await reader.readline()
    except TimeoutError:
        raise RunnerUnavailable(
            f"the runner did not answer within {ANSWER_TIMEOUT:g} s "
            "(is it stopped or stuck? see `tether status`)"
        ) from None
    except OSError as exc:
        raise RunnerUnavailable(f"lost the runner's connection: {exc}") from exc
    if not line:
        raise RunnerUnavailable("the runner closed the connection without answering")
    return line


class Watch:
    """An open watch connection; iterate it for events, close it when done."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while line := await self._reader.readline():
            yield protocol.decode(line)

    def close(self) -> None:
        """Stop watching."""
        self._writer.close()


def ensure_runner(home: Path, idle_exit: float | None = None) -> ProcessIdentity:
    """The home's runner, started detached if none runs (exiting on its own after
    ``idle_exit`` seconds with no call and no connection). Blocking: call it from a
    worker thread.

    The runner is started through a shell that exits at once, so it is re-parented
    away from the server (never the server's zombie) and, in a session of its own,
    survives the server. It says ``ready`` on a pipe once its socket accepts requests.
    """
    running = live_runner(home)
    if running is not None:
        return reachable(home, running)
    home.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    try:
        idle = [] if idle_exit is None else ["--idle-exit", repr(float(idle_exit))]
        with layout.runner_log(home).open("ab") as log:
            shell = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    "home=$1 fd=$2; shift 2; "
                    '"$0" -m tether.keeper --home "$home" --ready-fd "$fd" "$@" &',
                    sys.executable,
                    str(home),
                    str(write_end),
                    *idle,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(write_end,),
                start_new_session=True,
                env=_runner_environment(),
            )
        os.close(write_end)
        write_end = -1
        shell.wait()
        word = _read_ready(read_end, _START_TIMEOUT)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if word not in (b"ready", b"busy"):
        raise RunnerUnavailable(
            f"the runner did not start (see {layout.runner_log(home)}): {word!r}"
        )
    running = live_runner(home)
    if running is None:
        lock, record = layout.runner_lock(home), layout.runner_file(home)
        if word == b"busy":
            raise RunnerUnavailable(
                f"a runner holds {lock} but neither {record} nor its socket names it: "
                "it exits once idle, or stop it (`tether status` shows its calls)"
            )
        raise RunnerUnavailable(f"the runner started but {record} is missing")
    return running


def reachable(home: Path, running: ProcessIdentity) -> ProcessIdentity:
    """``running``, once it accepts connections on the home's socket: if it does not
    (its socket file was removed, or replaced by something else), it is asked to
    listen again (SIGHUP) and waited for. Blocking."""
    sock = layout.socket_path(home)
    if _accepts(sock):
        return running
    with contextlib.suppress(OSError):
        os.kill(running.pid, signal.SIGHUP)
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if _accepts(sock):
            return running
        if not running.is_alive():
            raise RunnerUnavailable(f"the runner pid {running.pid} exited")
        time.sleep(0.02)
    raise RunnerUnavailable(
        f"the runner pid {running.pid} of {home} lives but does not listen on {sock}, "
        "even when asked (SIGHUP); stop it (`tether status` shows its calls)"
    )


def _connect(sock: Path, timeout: float) -> socket.socket:
    """A blocking connection to a runner's socket (OSError when nothing accepts)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        conn.connect(str(sock))
    except BaseException:
        conn.close()
        raise
    return conn


def _accepts(sock: Path) -> bool:
    try:
        _connect(sock, 1.0).close()
    except OSError:
        return False
    return True


def _identify_by_socket(home: Path) -> ProcessIdentity | None:
    """The live runner as it answers ``hello`` on the home's socket (its runner.json
    may be damaged or gone), or None if nothing answers there. Blocking."""
    try:
        with _connect(layout.socket_path(home), _START_TIMEOUT) as conn:
            conn.sendall(protocol.encode({"v": 1, "op": "hello"}))
            answer = protocol.decode(conn.makefile("rb").readline())
        identity = ProcessIdentity(int(answer["pid"]), float(answer["create_time"]))
    except (OSError, ValueError, KeyError, TypeError, protocol.ProtocolError):
        return None
    return identity if identity.is_alive() else None


def _runner_environment() -> dict[str, str]:
    # The runner passes each call the environment the server chose for it; its own
    # needs none of the server's secrets.
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "TMPDIR", "USER")
    return {k: v for k, v in os.environ.items() if k in keep}


def _read_ready(fd: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data + b" (timed out)"
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data.strip()


def stop_runner(home: Path, timeout: float = 10.0) -> bool:
    """Stop the home's runner (SIGTERM: it stops its calls' trees, records their ends
    and exits) and wait for it; False if none ran. Blocking (a zombie waiting for
    init to reap it counts as gone).
    """
    running = live_runner(home)
    if running is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(running.pid, signal.SIGTERM)
    if not wait_gone(running, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGKILL)
    return True


def wait_gone(runner: ProcessIdentity, timeout: float) -> bool:
    """Wait until ``runner`` has exited; False if it still runs after ``timeout``.
    Blocking. It is not our child, so its exit is seen by polling its identity."""
    deadline = time.monotonic() + timeout
    while runner.is_alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
