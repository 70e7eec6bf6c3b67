"""The seccomp filter a sandboxed call runs under (a classic BPF program bwrap installs
before it runs the command; bwrap reads it from a file descriptor, see ``attach``).

What it refuses, for every sandboxed call:

- the kernel keyring (``add_key``, ``request_key``, ``keyctl``): keys are not namespaced,
  and a call could read or plant keys of its user outside the sandbox;
- io_uring (``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``): its
  operations make no system call a filter sees, so a ring could create the unix socket
  refused below (a review did it: ``IORING_OP_SOCKET``, then a plain ``connect``), and
  it has been the kernel's largest attack surface of late (Docker refuses it too);
- every system call of another architecture's ABI (32-bit x86 on x86_64, x32): their
  numbers differ, so a filter written for one ABI does not hold for another. A process
  that makes one is killed (``SIGSYS``);
- new user namespaces (``unshare`` or ``clone`` with ``CLONE_NEWUSER``; ``clone3``,
  whose flags sit in memory a filter cannot read, fails with ENOSYS, so libc falls back
  to ``clone``): in one a call holds every capability again, over namespaces of its
  own. A review used that to mount a fresh cgroup2 hierarchy (the sandbox's own is
  read-only) and write ``cgroup.kill`` of groups outside the call: where the call's v2
  group is an ancestor of others (cgroup v1 machines, whose v2 tree holds every process
  in its root), that killed processes outside the sandbox. Docker refuses them too;
- setting a file's set-user-ID or set-group-ID bit (``chmod``, ``fchmod``,
  ``fchmodat``, ``fchmodat2``, ``mknod``, ``mknodat`` with a mode that holds either):
  the sandbox mounts nothing set-ID, but a file a call leaves in the workspace outlives
  it there. A call run by root could leave a root shell (``cp /bin/sh x; chmod 4755
  x``) for any user who reaches the workspace, a container's bind mount of a host
  directory included. (A file created with those bits loses them at its first write,
  the call holding no ``CAP_FSETID``.)

and with the network ``none``, creating unix sockets (``socket(AF_UNIX, ...)``):
without a network of its own a call could still connect to a service's socket at any
path it can see (a database's, an agent's, a desktop bus), and those can do more than
any TCP port. ``socketpair`` stays allowed: a stream pair reaches nothing but itself,
but a datagram one can still ``sendto`` (or ``connect`` to) a datagram socket at a path
it sees; the services worth reaching listen on stream sockets, and under ``/run``, which
a call without the network does not see at all.

A refused call fails with EPERM. Only x86_64 and aarch64 have a table here; elsewhere
:func:`program` returns None and the sandbox runs without the filter (said at start).
"""

from __future__ import annotations

import os
import platform
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

# What bwrap's ``--seccomp`` is given in a wrapped argv until a descriptor is attached.
FD_SLOT = "{syscall-filter-fd}"

# Classic BPF (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_EPERM = 1
_ENOSYS = 38
_AF_UNIX = 1
_CLONE_NEWUSER = 0x10000000
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
# Offsets into struct seccomp_data: nr, arch, instruction pointer, args[6] (64-bit each;
# the low half of args[0] comes first on these little-endian machines).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_NO_SYSCALL = 0xFFFFFFFF


@dataclass(frozen=True)
class _Abi:
    audit_arch: int
    socket: int
    # add_key, request_key, keyctl; io_uring_setup, io_uring_enter, io_uring_register.
    refused: tuple[int, ...]
    # clone and unshare (their first argument is the flags on both), clone3.
    clones: tuple[int, int]
    clone3: int
    # Those that set a file's mode (chmod, fchmod, fchmodat, fchmodat2, mknod, mknodat),
    # by the index of their mode argument.
    mode_setters: tuple[tuple[int, int], ...] = ()
    # Numbers at or above this are another ABI's under the same audit arch (x32).
    foreign_from: int | None = None


_ABIS = {
    "x86_64": _Abi(
        0xC000003E,
        41,
        (248, 249, 250, 425, 426, 427),
        (56, 272),
        435,
        ((90, 1), (91, 1), (268, 2), (452, 2), (133, 1), (259, 2)),
        foreign_from=0x40000000,
    ),
    "aarch64": _Abi(
        0xC00000B7,
        198,
        (217, 218, 219, 425, 426, 427),
        (220, 97),
        435,
        ((52, 1), (53, 2), (452, 2), (33, 2)),
    ),
}


# A step of the program: (code, k, where to go if true, where to go if false), a place
# being one of the returns below, a label (a ``(_LABEL, name)`` pseudo-step marks the
# step after it), or None for the next step.
_Step = tuple[int, int, str | None, str | None]
_LABEL = -1
#: The longest program a starter takes: one page, the smallest pipe a kernel makes (for
#: a user past its pipe allowance), so writing it never blocks. Ours are a few hundred
#: bytes; the kernel itself takes up to 4,096 instructions of 8 bytes.
MAX_BYTES = 4096
_RETURNS = {
    "allow": _RET_ALLOW,
    "deny": _RET_ERRNO | _EPERM,
    "kill": _RET_KILL_PROCESS,
    "absent": _RET_ERRNO | _ENOSYS,
}


def program(deny_unix_sockets: bool, machine: str | None = None) -> bytes | None:
    """The filter for this machine's ABI (``machine`` as ``uname -m`` says it), or None
    when there is no table for it, or when this Python is a 32-bit program (a 32-bit
    system on a 64-bit kernel, whose programs the kernel's ABI would not cover)."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None or struct.calcsize("P") != 8:
        return None
    steps: list[_Step] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, abi.audit_arch, None, "kill"),
        (_LD_W_ABS, _NR, None, None),
    ]
    if abi.foreign_from is not None:
        # -1 is no system call (ENOSYS, as without the filter), not another ABI's.
        steps.append((_JEQ_K, _NO_SYSCALL, "allow", None))
        steps.append((_JGE_K, abi.foreign_from, "kill", None))
    steps += [(_JEQ_K, number, "deny", None) for number in abi.refused]
    steps.append((_JEQ_K, abi.clone3, "absent", None))
    steps += [(_JEQ_K, number, "clone", None) for number in abi.clones]
    steps += [(_JEQ_K, number, f"mode{at}", None) for number, at in abi.mode_setters]
    if deny_unix_sockets:
        steps += [
            (_JEQ_K, abi.socket, None, "allow"),
            (_LD_W_ABS, _ARG0_LOW, None, None),
            (_JEQ_K, _AF_UNIX, "deny", "allow"),
        ]
    else:
        steps.append((_JEQ_K, 0, "allow", "allow"))  # whatever the number
    steps += [
        (_LABEL, 0, "clone", None),
        # CLONE_NEWUSER is in the low half of the flags.
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JSET_K, _CLONE_NEWUSER, "deny", "allow"),
    ]
    for at in sorted({at for _, at in abi.mode_setters}):
        steps += [
            (_LABEL, 0, f"mode{at}", None),
            (_LD_W_ABS, _ARG0_LOW + 8 * at, None, None),
            (_JSET_K, _SET_ID_BITS, "deny", "allow"),
        ]
    return _assemble(steps)


def _assemble(steps: Sequence[_Step]) -> bytes:
    """The steps, then the returns, as struct sock_filter entries."""
    real = [step for step in steps if step[0] != _LABEL]
    at = {name: len(real) + i for i, name in enumerate(_RETURNS)}
    count = 0
    for op, _, name, _ in steps:
        if op == _LABEL:
            assert name is not None
            at[name] = count
        else:
            count += 1
    code = b""
    for i, (op, k, if_true, if_false) in enumerate(real):
        jt = 0 if if_true is None else at[if_true] - i - 1
        jf = 0 if if_false is None else at[if_false] - i - 1
        assert 0 <= jt < 256 and 0 <= jf < 256, "a jump goes forward, within 255 steps"
        code += struct.pack("=HBBI", op, jt, jf, k)
    for value in _RETURNS.values():
        code += struct.pack("=HBBI", _RET_K, 0, 0, value)
    return code


@contextmanager
def attached(
    argv: Sequence[str], program: bytes | None
) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """``argv`` with its slot (``FD_SLOT``) naming a fresh descriptor that holds
    ``program`` (the read end of a pipe, for bwrap to read once), and the descriptors to
    pass to the child (``pass_fds``), closed here once the child is started. With no
    program, ``argv`` as it is and nothing to pass."""
    if program is None:
        yield list(argv), ()
        return
    if len(program) > MAX_BYTES:
        raise ValueError(f"a seccomp program of {len(program)} bytes is too long to hand on")
    argv = list(argv)
    at = argv.index(FD_SLOT)  # the first: bwrap's options come before the command
    read, write = os.pipe()
    try:
        try:
            os.write(write, program)  # at most a page: never blocks (MAX_BYTES)
        finally:
            # Closed once, before the child is started: its number is free again at
            # once, and a second close would hit whatever took it (the child's pipes).
            os.close(write)
        argv[at] = str(read)
        yield argv, (read,)
    finally:
        os.close(read)
