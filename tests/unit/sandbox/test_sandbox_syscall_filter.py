"""The syscall filter's program and how it is handed to a child (what it refuses is
tested through real bwrap in tests/integration/test_sandbox.py)."""

from __future__ import annotations

import os

from tether.sandbox import syscall_filter


def test_there_is_no_filter_for_a_machine_without_a_table() -> None:
    assert syscall_filter.program(deny_unix_sockets=True, machine="riscv64") is None
    assert syscall_filter.program(deny_unix_sockets=True, machine="x86_64") is not None


def test_the_program_is_handed_on_a_descriptor_named_in_the_argv() -> None:
    program = syscall_filter.program(deny_unix_sockets=True, machine="x86_64")
    assert program is not None
    argv = ["bwrap", "--seccomp", syscall_filter.FD_SLOT, "--", "echo", syscall_filter.FD_SLOT]
    with syscall_filter.attached(argv, program) as (attached, fds):
        (fd,) = fds
        assert attached == ["bwrap", "--seccomp", str(fd), "--", "echo", syscall_filter.FD_SLOT]
        assert os.read(fd, 1 << 16) == program  # all of it, then the end: nothing holds it open
        assert os.read(fd, 1) == b""


def test_descriptors_opened_while_attached_stay_open_after() -> None:
    """The write end was closed twice, the second time after the child's own pipes had
    taken its number: a runner lost the stdout of 2 calls in 1,000 (EBADF)."""
    program = syscall_filter.program(deny_unix_sockets=False, machine="x86_64")
    opened: list[int] = []
    try:
        with syscall_filter.attached(["--seccomp", syscall_filter.FD_SLOT], program):
            for _ in range(4):  # as Popen makes the child's pipes
                opened.extend(os.pipe())
        for fd in opened:
            os.fstat(fd)  # EBADF if it was closed behind its owner's back
    finally:
        for fd in opened:
            os.close(fd)
