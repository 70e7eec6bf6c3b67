"""One call's process tree under its limits group: how to start it inside the group,
and what it used once it has ended. Used wherever the tree runs: by the server's
sandboxing launcher and by the keeper's runner."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tether.sandbox.groups import CallGroup
from tether.sandbox.limits import Limits, Resources
from tether.sandbox.watch import CallWatch, Watcher


@dataclass
class LimitedTree:
    """A tree about to start (or started) under ``group`` with ``limits``, followed by
    ``watcher`` while it runs."""

    group: CallGroup
    limits: Limits
    watcher: Watcher
    watch: CallWatch = field(init=False)

    def __post_init__(self) -> None:
        self.watch = CallWatch(self.group, self.limits)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as started: behind the group's join step when it has one."""
        return self.group.join_command(argv) or list(argv)

    def preexec(self, then: Callable[[], None] | None) -> Callable[[], None] | None:
        """The child's step before exec: joining the group when :meth:`command` could
        not do it (rlimits), then ``then``. None when nothing is left to do, so the
        parent can vfork."""
        if self.group.join_command(()) is not None:
            return then
        group = self.group

        def run() -> None:
            group.join()
            if then is not None:
                then()

        return run

    @property
    def members(self) -> Callable[[], list[int]] | None:
        """How to read every process of the tree, if its group can tell."""
        return self.group.members if self.group.knows_members else None

    def started(self, pid: int) -> None:
        """The root process exists (its own process group): start watching it."""
        self.group.attach(pid)
        self.watch.pgid = pid
        self.watcher.add(self.watch)

    async def finish(self) -> Resources:
        """The tree's figures once its root has ended (or never started); a limit it
        passed is its ``killed_by``."""
        return await self.watcher.finish(self.watch, ran=self.watch.pgid is not None)
