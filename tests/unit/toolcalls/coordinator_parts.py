"""What the coordinator's unit tests share: a small configuration and a delivery that
drops background results."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tether.toolcalls import deadlines
from tether.toolcalls.call import Invocation
from tether.toolcalls.config import CoordinatorConfig
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.output import OutputBuffer

SMALL = CoordinatorConfig(
    offload_after=None,
    cancel_grace=1.0,
    model_output_chars=1000,
    output_memory_bytes=10_000,
    max_per_session=4,
    max_total=8,
    marker_prefix="test",
    output_location="/out/{session_id}/{call_id}",
)


def small_config(**changes: Any) -> CoordinatorConfig:
    """The small configuration, with ``changes``."""
    return replace(SMALL, **changes)


async def no_delivery(session_id: str, call_id: str, text: str) -> None:
    return None


def running_call(call_id: str = "c1", session_id: str = "s1") -> LiveCall:
    """A shell call in ``session_id``, running, with nothing printed yet."""
    return LiveCall(
        invocation=Invocation(call_id, session_id, "t1", "default", "execute_shell_command", {}),
        status="running",
        deadlines=deadlines.initial(0.0, None, None, None),
        buffer=OutputBuffer(10_000, 1000),
        marker=f"test:{call_id}",
    )
