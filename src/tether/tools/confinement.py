"""Where tools may reach on disk: the workspace, and never Tether's own state."""

from __future__ import annotations

from pathlib import Path

from tether.tools.base import RunContext, ToolInputError


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _process_file(path: Path) -> bool:
    """Whether ``path`` (resolved) is under /proc/<pid>: a process's memory, environment,
    descriptors."""
    parts = path.parts
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit()


def confine(raw: str, ctx: RunContext) -> Path:
    """The real path ``raw`` names (relative to the workspace, symlinks resolved), if a
    tool may use it.

    Tether's own state (``ctx.protected``, i.e. TETHER_HOME) is refused, except the
    workspace itself when it lies inside it (the default ``TETHER_HOME/workspace``).
    Anything else outside the workspace needs a person's approval of the call.
    Blocking (it touches the file system): call it from a worker thread.
    """
    workspace = ctx.workspace.resolve()
    path = (workspace / Path(raw).expanduser()).resolve()
    in_workspace = _within(path, workspace)
    for protected in ctx.protected:
        # The workspace is only exempt when it is strictly inside the protected tree;
        # a workspace that contains TETHER_HOME (say, $HOME) must not expose it.
        exempt = in_workspace and workspace != protected and _within(workspace, protected)
        if _within(path, protected) and not exempt:
            raise ToolInputError(f"{raw!r} is inside Tether's own state and cannot be used")
    if _process_file(path):
        # /proc/self/environ through a link resolves here: the server's own environment
        # (its token, provider keys) or another process's.
        raise ToolInputError(f"{raw!r} is a process's own file and cannot be used")
    if not in_workspace and not ctx.human_approved:
        raise ToolInputError(f"{raw!r} is outside the workspace ({workspace})")
    return path
