"""The parts of a cron job beyond its schedule, in QwenPaw's shape.

``request`` says what the agent is asked, ``dispatch`` where the answer goes and
``runtime`` how long a run may take. Pure models, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tether import nesting

#: Where a job's answer can go in Tether; QwenPaw has more channels (DingTalk, ...).
KNOWN_CHANNELS: Final = ("console",)
DEFAULT_CHANNEL: Final = "console"
#: Who a job speaks as when its target names no one.
CRON_USER: Final = "cron"
DEFAULT_TIMEOUT_SECONDS: Final = 120
DEFAULT_MISFIRE_GRACE_SECONDS: Final = 600
#: The most a run's timeout or a tick's misfire grace may be: ten years, far past any
#: use, and far below what date arithmetic overflows at (QwenPaw sets no bound).
MAX_SECONDS: Final = 10 * 365 * 86400
#: How deeply ``request.input`` (or ``meta``, or a kept field) may nest lists and
#: objects (a chat turn's input nests 3).
MAX_INPUT_DEPTH: Final = 32

SessionId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
UserId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class DispatchTarget(BaseModel):
    """The session (and its user) a job's runs talk to."""

    model_config = ConfigDict(extra="forbid")
    user_id: UserId
    session_id: SessionId


class DispatchSpec(BaseModel):
    """Where a run's result is delivered."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["channel"] = "channel"
    # Any name is accepted here (QwenPaw's are); a run to one Tether does not have
    # ends as an error run that says so.
    channel: Annotated[str, StringConstraints(min_length=1, max_length=64)] = DEFAULT_CHANNEL
    target: DispatchTarget
    mode: Literal["stream", "final"] = "stream"
    silent: Annotated[bool, Field(strict=True)] = False
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("meta")
    @classmethod
    def _not_too_deep(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        _not_deeper(value, info)
        return value


class JobRequest(BaseModel):
    """What an agent job asks: QwenPaw's agent request (``input`` as in a chat turn).

    Extra fields are kept, as QwenPaw keeps them; ``session_id`` and ``user_id``
    always follow the dispatch target.
    """

    model_config = ConfigDict(extra="allow")
    input: Any = None
    session_id: str | None = None
    user_id: str | None = None

    @field_validator("input")
    @classmethod
    def _not_too_deep(cls, value: Any, info: ValidationInfo) -> Any:
        return _not_deeper(value, info)

    @model_validator(mode="after")
    def _extras_not_too_deep(self, info: ValidationInfo) -> JobRequest:
        # Kept fields are stored and sent back as they are, so bounded the same.
        for name, value in (self.model_extra or {}).items():
            _not_deeper(value, info, f"{name!r} ")
        return self

    def prompt(self) -> str:
        """The text the agent is given: every text part of ``input``, in order."""
        return "\n".join(t for t in _texts(self.input) if t.strip())


#: Set in the validation context when a stored job is read, not a request: the bounds
#: added since it may have been stored are for requests, so that an older job still
#: loads (and can be corrected with a PUT, which they do apply to).
STORED_CONTEXT_KEY: Final = "stored"


def is_stored(info: ValidationInfo) -> bool:
    """Whether a stored job is being read (``STORED_CONTEXT_KEY``), not a request."""
    context = info.context
    return isinstance(context, Mapping) and bool(context.get(STORED_CONTEXT_KEY))


def _not_deeper(value: Any, info: ValidationInfo, what: str = "") -> Any:
    """``value`` if it nests at most MAX_INPUT_DEPTH deep (or a stored job is read)."""
    if not is_stored(info) and nesting.depth(value, MAX_INPUT_DEPTH) > MAX_INPUT_DEPTH:
        raise ValueError(f"{what}nests lists and objects more than {MAX_INPUT_DEPTH} deep")
    return value


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        if value.get("type") == "text" and isinstance(value.get("text"), str):
            return [value["text"]]
        return _texts(value.get("content"))
    return []


class JobRuntime(BaseModel):
    """How runs behave: at most this long, and how late a missed tick may still run."""

    model_config = ConfigDict(extra="forbid")
    max_concurrency: Annotated[int, Field(strict=True, ge=1)] = 1
    timeout_seconds: Annotated[int, Field(strict=True, ge=1)] = DEFAULT_TIMEOUT_SECONDS
    misfire_grace_seconds: Annotated[int, Field(strict=True, ge=0)] = DEFAULT_MISFIRE_GRACE_SECONDS
    share_session: Annotated[bool, Field(strict=True)] = False
    tool_safety: Annotated[bool, Field(strict=True)] = False

    @field_validator("timeout_seconds", "misfire_grace_seconds")
    @classmethod
    def _at_most_ten_years(cls, value: int, info: ValidationInfo) -> int:
        if value <= MAX_SECONDS:
            return value
        if is_stored(info):
            # Stored by an older version: read as the longest there is (more overflowed
            # the date arithmetic at every tick, or failed every run).
            return MAX_SECONDS
        raise ValueError(f"must be at most {MAX_SECONDS} seconds (ten years)")
