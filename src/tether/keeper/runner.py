"""The runner: one detached process per node that owns every durable call.

It holds ``runner.lock`` (one runner per home), publishes its identity in
``runner.json`` and answers the server on a unix socket (see :mod:`protocol`). It is
started in its own session, so it outlives the server that started it, whether that
server stops gracefully or is killed. SIGTERM or SIGINT stop every call it runs
(whole trees) and then the runner.
With ``idle_exit`` it also leaves once nothing has needed it for that long
(:mod:`tether.keeper.idle`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import logging
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tether import __version__, heap, loop_errors
from tether.keeper import layout, listening, peers, protocol
from tether.keeper.identity import identify
from tether.keeper.idle import IdleExit
from tether.keeper.runner_call import RunningCall, spawn
from tether.keeper.status import CallSpec, write_spec
from tether.keeper.stopper import TreeStopper
from tether.sandbox import enforcers, syscall_filter
from tether.sandbox.groups import Enforcer
from tether.sandbox.limits import Limits
from tether.sandbox.tree import LimitedTree
from tether.sandbox.watch import Watcher

log = logging.getLogger(__name__)

# A watcher that lets this much of our events pile up unread is dropped (it reconnects
# and re-lists; the files hold everything it missed).
_WATCHER_BACKLOG = 1 << 20
# After SIGTERM, a call still not ended this long past the longest grace is ended by
# force (its end recorded if its root was reaped), so the runner always exits.
_LAST_RESORT = 10.0
# Seconds a thread holds the interpreter before another that wants it may take it.
_SWITCH_INTERVAL = 0.0005
# How long an exiting runner waits for its tree kills still under way (the SIGKILL
# after the grace for what ignored SIGTERM).
_SETTLE_TIMEOUT = 30.0


class Runner:
    """The calls this runner owns and the connections that watch them, and the limits
    groups their trees run in (the runner outlives servers, so it owns those too)."""

    def __init__(self, home: Path, enforcer: Enforcer, idle_exit: float | None = None) -> None:
        self.home = home
        self.enforcer = enforcer
        self.idle = IdleExit(idle_exit, self._needed, self._leave)
        self.watcher = Watcher()
        self.calls: dict[str, RunningCall] = {}
        self._watchers: set[asyncio.StreamWriter] = set()
        self._connections: dict[asyncio.StreamWriter, asyncio.Task[Any]] = {}
        self._retiring = False
        self._stoppers: dict[float, TreeStopper] = {}
        #: The listening socket, closed at once when the runner decides to leave.
        self.listening: asyncio.Server | None = None
        #: The socket file it listens on (device, inode), to notice it removed or replaced.
        self.socket_id: tuple[int, int] | None = None
        self.done = asyncio.Event()

    # ------------------------------------------------------------------ requests

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection: a request per line, or a watch stream."""
        reason = peers.refusal(writer.get_extra_info("socket"))
        if reason is not None:
            listening.refuse(writer, reason)
            return
        task = asyncio.current_task()
        if task is not None:
            self._connections[writer] = task
        self.idle.disarm()
        try:
            while line := await reader.readline():
                answer = self._answer(line, writer)
                if answer is None:  # became a watcher: hold the connection open
                    await reader.read()
                    break
                writer.write(protocol.encode(answer))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._connections.pop(writer, None)
            self._watchers.discard(writer)
            writer.close()
            self.idle.arm()

    def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> dict[str, Any] | None:
        try:
            message = protocol.decode(line)
            op = protocol.check_request(message)
            if op == "watch":
                self._watchers.add(writer)
                writer.write(protocol.encode({"ok": True, "watching": True}))
                return None
            return {"ok": True, **getattr(self, f"_op_{op}")(message)}
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, OSError) as exc:
            return {"ok": False, "error": _describe(exc)}

    def _op_hello(self, _: dict[str, Any]) -> dict[str, Any]:
        me = identify(os.getpid())
        return {
            "protocol": protocol.PROTOCOL,
            "oldest": protocol.OLDEST,
            "version": __version__,
            "pid": me.pid,
            "create_time": me.create_time,
            "calls": len(self.calls),
            "limits": self.enforcer.mechanism,
            # A retiring runner takes no new call: a server that finds one waits for
            # it to go and starts another.
            "retiring": self._retiring,
            "idle_exit": self.idle.seconds,
        }

    def _op_start(self, m: dict[str, Any]) -> dict[str, Any]:
        if self._retiring:
            raise protocol.ProtocolError("this runner is retiring; start a new one")
        call_id = str(m["call_id"])
        if call_id in self.calls:
            raise protocol.ProtocolError(f"call {call_id!r} is already running")
        directory = layout.call_dir(self.home, call_id)
        if (directory / layout.SPEC_NAME).exists():
            raise protocol.ProtocolError(f"call {call_id!r} was already started once")
        env = {str(k): str(v) for k, v in m["env"].items()}
        draft = CallSpec(
            call_id=call_id,
            argv=[str(a) for a in m["argv"]],
            cwd=str(m["cwd"]),
            pid=0,
            create_time=0.0,
            marker=str(m["marker"]),
            started_at=0.0,
            kill_at=_optional_float(m.get("kill_at")),
            output_limit=m.get("output_limit"),
        )
        program = _filter_of(m.get("syscall_filter"))
        tree = self._limited(m.get("limits"))
        try:
            proc, create_time = spawn(directory, draft, env, tree, program)
        except BaseException:
            if tree is not None:
                tree.group.close()
            raise
        spec = replace(draft, pid=proc.pid, create_time=create_time, started_at=time.time())
        # Written just after the answer goes out: the server need not wait for the disk,
        # which kept room for it (spawn) before the call started.
        asyncio.get_running_loop().call_soon(write_spec, directory, spec)
        stopper = self._stopper(float(m.get("grace", 2.0)))
        call = RunningCall(spec, directory, proc, stopper, self._output, self._ended)
        call.supervised = bool(m.get("supervised", False))
        if tree is not None:
            call.measure(tree)
        self.calls[call_id] = call
        return {"pid": proc.pid, "create_time": create_time, "started_at": spec.started_at}

    def _limited(self, limits: object) -> LimitedTree | None:
        """A fresh limits group for a call that asks for ``limits`` (protocol 2)."""
        if limits is None:
            return None
        if not isinstance(limits, dict):
            raise ValueError(f"limits must be an object, got {limits!r}")
        wanted = Limits.from_dict(limits)
        return LimitedTree(enforcers.new_group(self.enforcer, wanted), wanted, self.watcher)

    def _op_signal(self, m: dict[str, Any]) -> dict[str, Any]:
        """Stop one call (``call_id``) or several (``call_ids``: one scan for all; ids
        no longer running are skipped and listed as ``gone``)."""
        force = bool(m.get("force", False))
        if "call_ids" not in m:
            self._call(m).stop("request", force)
            return {}
        gone = []
        for call_id in m["call_ids"]:
            call = self.calls.get(str(call_id))
            if call is None:
                gone.append(call_id)
            else:
                call.stop("request", force)
        return {"gone": gone}

    def _op_extend(self, m: dict[str, Any]) -> dict[str, Any]:
        self._call(m).extend(_optional_float(m.get("kill_at")))
        return {}

    def _op_list(self, _: dict[str, Any]) -> dict[str, Any]:
        calls = [
            {
                "call_id": c.call_id,
                "pid": c.spec.pid,
                "create_time": c.spec.create_time,
                "started_at": c.spec.started_at,
                "kill_at": c.spec.kill_at,
                "kill_in": c.kill_in(),
                "output_end": c.position,
            }
            for c in self.calls.values()
        ]
        return {"calls": calls}

    def _op_retire(self, _: dict[str, Any]) -> dict[str, Any]:
        """Exit once no call runs (an upgraded server replaces an idle runner so)."""
        self._retiring = True
        self._exit_if_idle()
        return {"calls": len(self.calls)}

    def _stopper(self, grace: float) -> TreeStopper:
        if grace not in self._stoppers:
            self._stoppers[grace] = TreeStopper(grace)
        return self._stoppers[grace]

    def _call(self, m: dict[str, Any]) -> RunningCall:
        call = self.calls.get(str(m["call_id"]))
        if call is None:
            raise protocol.ProtocolError(f"no running call {m['call_id']!r}")
        return call

    # ------------------------------------------------------------------ events

    def _output(self, call_id: str, end: int) -> None:
        self._publish({"event": "output", "call_id": call_id, "end": end})

    def _ended(self, call: RunningCall) -> None:
        self.calls.pop(call.call_id, None)
        try:
            self._publish({"event": "ended", "call_id": call.call_id, "end": call.position})
        except Exception:  # the watchers re-list when they reconnect
            log.exception("telling the watchers that call %s ended failed", call.call_id)
        self._exit_if_idle()
        self.idle.arm()

    def _publish(self, event: dict[str, Any]) -> None:
        line = protocol.encode(event)
        for writer in list(self._watchers):
            if writer.transport.get_write_buffer_size() > _WATCHER_BACKLOG:
                log.warning(
                    "dropped a watcher: over %d bytes of its events unread (it watches "
                    "again and finds what it missed in the files)",
                    _WATCHER_BACKLOG,
                )
                self._watchers.discard(writer)
                writer.close()
                continue
            writer.write(line)

    def _exit_if_idle(self) -> None:
        if self._retiring and not self.calls:
            self.done.set()

    def _needed(self) -> bool:
        return bool(self.calls or self._connections or self.done.is_set())

    def _leave(self) -> None:
        self._retiring = True
        # Closed now, not once ``done`` is seen: no connection may slip in between.
        if self.listening is not None:
            self.listening.close()
        self.done.set()

    def stop_everything(self) -> None:
        """Stop every call's tree; the runner exits once each has ended and been
        recorded. The graces of stops asked before are cut short (what is left of
        those trees is killed at once); whatever has still not ended ``_LAST_RESORT``
        seconds after the longest grace is ended by force."""
        self._retiring = True
        for stopper in self._stoppers.values():
            stopper.hurry()
        for call in list(self.calls.values()):
            try:
                call.stop("request", False)
            except Exception:
                log.exception("stopping call %s failed", call.call_id)
        self._exit_if_idle()
        if self.calls:
            grace = max(self._stoppers, default=0.0)
            asyncio.get_running_loop().call_later(grace + _LAST_RESORT, self._give_up)

    def _give_up(self) -> None:
        for call in list(self.calls.values()):
            log.error("call %s did not end after SIGTERM: ending it by force", call.call_id)
            call.abandon()
        self._exit_if_idle()

    async def hang_up(self) -> None:
        """Close every connection and let its handler end by itself (one cancelled at
        exit instead is logged as an error by Python 3.11's streams)."""
        handlers = list(self._connections.values())
        for writer in list(self._connections):
            writer.close()
        if handlers:
            await asyncio.wait(handlers, timeout=5.0)

    async def settle(self) -> None:
        """Wait (a while at most) for the tree kills still under way."""
        try:
            async with asyncio.timeout(_SETTLE_TIMEOUT):
                for stopper in self._stoppers.values():
                    await stopper.settled()
        except TimeoutError:
            log.error("tree kills still running after %.0f s; exiting anyway", _SETTLE_TIMEOUT)


def _filter_of(encoded: Any) -> bytes | None:
    """A start's ``syscall_filter``: the program, or None when it has none."""
    if encoded is None:
        return None
    try:
        program = base64.b64decode(str(encoded), validate=True)
    except ValueError as exc:
        raise protocol.ProtocolError(f"syscall_filter is not base64: {exc}") from exc
    if not program or len(program) % 8:
        raise protocol.ProtocolError("syscall_filter is not a seccomp program")
    if len(program) > syscall_filter.MAX_BYTES:
        # Past a pipe's capacity, writing it for bwrap would block the runner for good.
        raise protocol.ProtocolError(
            f"syscall_filter is too long ({len(program)} bytes, at most {syscall_filter.MAX_BYTES})"
        )
    return program


def _optional_float(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def _take_lock(home: Path) -> int | None:
    fd = os.open(layout.runner_lock(home), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def serve(home: Path, ready_fd: int | None = None, idle_exit: float | None = None) -> int:
    """Run the runner until it retires, is told to stop, or (``idle_exit``) has run
    nothing for nobody that long; 0 if it ran, 3 if another runner already holds this
    home."""
    home.mkdir(parents=True, exist_ok=True)
    layout.calls_dir(home).mkdir(exist_ok=True)
    # The loop makes many short system calls (pipes, status files, signals) while worker
    # threads read cgroup files and scan the process table: each call gives the
    # interpreter up, and taking it back waited up to the default 5 ms switch interval.
    sys.setswitchinterval(_SWITCH_INTERVAL)
    lock = _take_lock(home)
    if lock is None:
        log.info("a runner already serves %s", home)
        _signal_ready(ready_fd, b"busy\n")
        return 3
    try:
        # Holding the lock: any group left is a dead runner's lost call's.
        enforcer = enforcers.choose(enforcers.runner_tag(home), reap=True)
        asyncio.run(_serve(Runner(home, enforcer, idle_exit), ready_fd))
    finally:
        os.close(lock)
    return 0


async def _serve(runner: Runner, ready_fd: int | None) -> None:
    loop_errors.install(asyncio.get_running_loop())
    home = runner.home
    sock = layout.socket_path(home)
    await listening.listen(runner, sock)
    heap.settle()
    me = identify(os.getpid())
    layout.write_atomically(
        layout.runner_file(home),
        {
            "pid": me.pid,
            "create_time": me.create_time,
            "protocol": protocol.PROTOCOL,
            "version": __version__,
            "socket": str(sock),
        },
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop_everything)
    # A client that finds the socket gone (a cleaner of the temporary directory, where
    # deep homes keep it) while this runner lives sends SIGHUP: listen there again.
    relistening: set[asyncio.Task[None]] = set()

    def relisten() -> None:
        if relistening:
            return  # one at a time: signals that come together are one request
        task = loop.create_task(listening.listen_again(runner, sock))
        relistening.add(task)
        task.add_done_callback(relistening.discard)

    loop.add_signal_handler(signal.SIGHUP, relisten)
    _signal_ready(ready_fd, b"ready\n")
    log.info("runner %s serving %s on %s", me.pid, home, sock)
    runner.idle.arm()  # if the server that started it never connects
    await runner.done.wait()
    if runner.listening is not None:
        runner.listening.close()
    await runner.settle()
    await runner.hang_up()
    await runner.watcher.close()
    # Groups the watcher could not release yet (a zombie held them a moment longer).
    await asyncio.to_thread(enforcers.sweep, runner.enforcer)
    await asyncio.to_thread(runner.enforcer.close)
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()
    with contextlib.suppress(FileNotFoundError):
        layout.runner_file(home).unlink()


def _signal_ready(fd: int | None, word: bytes) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, word)
    with contextlib.suppress(OSError):
        os.close(fd)
