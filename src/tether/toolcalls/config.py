"""The coordinator's settings (built from the server's Settings by the app)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoordinatorConfig:
    offload_after: float | None
    cancel_grace: float
    model_output_chars: int
    output_memory_bytes: int
    max_per_session: int
    max_total: int
    marker_prefix: str
    # Where a person or the model can read a call's whole output, named in the model's
    # text when the output was cut; ``{session_id}`` and ``{call_id}`` are filled in.
    # (toolcalls knows no HTTP route: the app passes the route's path here.)
    output_location: str
    # Output kept per call (memory and store together); None: unlimited.
    output_store_bytes: int | None = None

    def where_output_is(self, session_id: str, call_id: str) -> str:
        """``output_location`` for one call."""
        return self.output_location.format(session_id=session_id, call_id=call_id)
