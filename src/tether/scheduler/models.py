"""Cron job models and their validation.

These are the request/response bodies of the cron API (``POST /api/cron/jobs``,
``PUT /api/cron/jobs/{id}``) and the shape in which jobs are stored.  Everything
here is pure: no I/O beyond reading the system time-zone database.

Validation that depends on the current time (a ``once`` job must not be in the
past) only runs when the caller supplies ``now``, either through
:func:`validate_job_spec` or as ``context={"now": now}`` to ``model_validate``.
Re-loading a stored job (whose ``once`` time may legitimately have passed) must
therefore validate *without* a ``now``.

Error locations follow pydantic's rules for discriminated unions: the tag is part
of the path, so a bad cron expression is reported at ``("schedule", "cron", "cron")``
and a bad zone at ``("schedule", "cron", "timezone")``; a past or naive ``run_at``
at ``("schedule", "once", "run_at")``.
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from croniter import croniter
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tether.scheduler.job_parts import (
    CRON_USER,
    STORED_CONTEXT_KEY,
    DispatchSpec,
    DispatchTarget,
    JobRequest,
    JobRuntime,
    is_stored,
)

__all__ = [
    "APPROVAL_LEVELS",
    "DEFAULT_APPROVAL_LEVEL",
    "NOW_CONTEXT_KEY",
    "STORED_CONTEXT_KEY",
    "CronSchedule",
    "JobSpec",
    "OnceSchedule",
    "Schedule",
    "default_session_id",
    "load_zone",
    "normalize_cron_expression",
    "validate_job_spec",
]

#: Key under which the current time is passed in the pydantic validation context.
NOW_CONTEXT_KEY: Final = "now"

APPROVAL_LEVELS: Final = ("off", "auto", "smart", "strict")
DEFAULT_APPROVAL_LEVEL: Final = "auto"

_CRON_FIELD_NAMES: Final = ("minute", "hour", "day-of-month", "month", "day-of-week")
#: Longer than any useful expression (every minute, hour and day listed is under 400);
#: each read of a job checks its expression again, so a huge one would stall the server.
MAX_CRON_LENGTH: Final = 1000
#: A ``once`` time must come before this, so date arithmetic on it cannot overflow.
LATEST_RUN_AT: Final = datetime(9000, 1, 1, tzinfo=UTC)
#: Zone keys that exist on disk but do not name a fixed IANA zone.
_REJECTED_ZONE_KEYS: Final = frozenset({"localtime", "posixrules"})
#: A fixed reference point for the "does this expression ever fire" check.
_CRON_PROBE_START: Final = datetime(2000, 1, 1)


class _Strict(BaseModel):
    """Base for every model here: unknown fields are an error at every level."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- schedules


def _cron_error(expr: str, reason: str) -> PydanticCustomError:
    return PydanticCustomError(
        "cron_expression",
        "invalid cron expression '{expr}': {reason}",
        {"expr": expr, "reason": reason},
    )


def normalize_cron_expression(value: str) -> str:
    """Validate a standard 5-field cron expression and return it with single spaces.

    Rejects macros (``@daily``, ``@reboot``), 6/7-field forms (seconds, years),
    croniter's non-deterministic hash/random extensions (``H``, ``R``), anything
    croniter cannot parse, and expressions that never fire (``0 0 30 2 *``).
    Raises :class:`PydanticCustomError` so it can be used inside validators.
    """
    fields = value.split()
    if not fields:
        raise _cron_error(value, "expression is empty")
    if fields[0].startswith("@"):
        raise _cron_error(value, "macros such as @daily or @reboot are not supported; use 5 fields")
    if len(fields) != len(_CRON_FIELD_NAMES):
        raise _cron_error(
            value,
            f"expected exactly 5 fields ({' '.join(_CRON_FIELD_NAMES)}), got {len(fields)}",
        )
    for name, field in zip(_CRON_FIELD_NAMES, fields, strict=True):
        # croniter's "H" (hashed) and "R" (random) values are not standard cron and
        # would make the schedule depend on an id or on chance.  No month or weekday
        # name starts with h or r, so a prefix test is exact.
        if any(part[:1].lower() in ("h", "r") for part in field.split(",")):
            raise _cron_error(value, f"hash/random values are not supported ({name} field)")
    normalized = " ".join(fields)
    try:
        probe = croniter(normalized, _CRON_PROBE_START)
    except Exception as exc:  # croniter raises assorted ValueError/KeyError subclasses
        # croniter sometimes wraps a whole traceback; its last line is the useful part
        lines = str(exc).strip().splitlines()
        raise _cron_error(value, (lines[-1] if lines else type(exc).__name__)[:200]) from exc
    try:
        probe.get_next(datetime)
    except Exception as exc:
        raise _cron_error(value, "the expression never matches a real date") from exc
    return normalized


@functools.cache
def _known_zone_keys() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _REJECTED_ZONE_KEYS


def load_zone(key: str) -> zoneinfo.ZoneInfo:
    """Return the IANA zone ``key`` or raise :class:`PydanticCustomError`."""
    error = PydanticCustomError("timezone", "unknown IANA time zone '{zone}'", {"zone": key})
    known = _known_zone_keys()
    # An empty set means the zone database cannot be listed; fall back to loading.
    if key in _REJECTED_ZONE_KEYS or (known and key not in known):
        raise error
    try:
        return zoneinfo.ZoneInfo(key)
    except (ValueError, OSError, zoneinfo.ZoneInfoNotFoundError) as exc:
        raise error from exc


class CronSchedule(_Strict):
    """Fire whenever the 5-field ``cron`` expression matches wall time in ``timezone``."""

    type: Literal["cron"]
    cron: str
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str, info: ValidationInfo) -> str:
        if len(value) > MAX_CRON_LENGTH and not is_stored(info):
            too_long = f"expression is longer than {MAX_CRON_LENGTH} characters"
            raise _cron_error(value[:40] + "...", too_long)
        return normalize_cron_expression(value)

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        load_zone(value)
        return value

    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)


class OnceSchedule(_Strict):
    """Fire a single time at ``run_at`` (must carry a UTC offset)."""

    type: Literal["once"]
    run_at: AwareDatetime

    @field_validator("run_at")
    @classmethod
    def _not_in_past(cls, value: datetime, info: ValidationInfo) -> datetime:
        if value >= LATEST_RUN_AT and not is_stored(info):
            raise PydanticCustomError(
                "run_at_too_late",
                "run_at {run_at} is too far ahead (it must be before {latest})",
                {"run_at": value.isoformat(), "latest": LATEST_RUN_AT.isoformat()},
            )
        now = _now_from_context(info)
        if now is not None and value < now:
            raise PydanticCustomError(
                "run_at_in_past",
                "run_at {run_at} is in the past (now is {now})",
                {"run_at": value.isoformat(), "now": now.isoformat()},
            )
        return value


Schedule = Annotated[CronSchedule | OnceSchedule, Field(discriminator="type")]


def _now_from_context(info: ValidationInfo) -> datetime | None:
    context = info.context
    if not isinstance(context, Mapping):
        return None
    now = context.get(NOW_CONTEXT_KEY)
    if now is None:
        return None
    if not isinstance(now, datetime) or now.utcoffset() is None:
        # A programming error in the caller, not a problem with the request.
        raise TypeError(f"validation context {NOW_CONTEXT_KEY!r} must be an aware datetime")
    return now


# --------------------------------------------------------------------------- jobs

JobId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class JobSpec(_Strict):
    """A cron job as submitted by a client, stored and returned: QwenPaw's job spec.

    ``task_type`` ``agent`` runs the agent with ``request``; ``text`` posts ``text``.
    ``dispatch`` may be omitted (a Tether extension): the job then talks to its own
    session, :func:`default_session_id`, filled in once the id is known.
    ``approval_level`` is Tether's: the level the job's turns run at.
    """

    id: JobId | None = None
    name: Name
    enabled: Annotated[bool, Field(strict=True)] = True
    schedule: Schedule
    task_type: Literal["agent", "text"] = "agent"
    text: str | None = None
    request: JobRequest | None = None
    dispatch: DispatchSpec | None = None
    save_result_to_inbox: bool | None = None
    runtime: JobRuntime = Field(default_factory=JobRuntime)
    meta: dict[str, Any] = Field(default_factory=dict)
    approval_level: str = DEFAULT_APPROVAL_LEVEL
    #: A call that needs a person's approval: refused at once (``deny``) or waits for
    #: someone to answer (``wait``). None: the session's, then the server's policy, and
    #: ``deny`` by default (nobody watches a cron run).
    when_unattended: Literal["deny", "wait"] | None = None

    @field_validator("approval_level", mode="before")
    @classmethod
    def _normalize_approval_level(cls, value: object) -> object:
        if isinstance(value, str):
            normalized = value.strip().lower()
            if normalized in APPROVAL_LEVELS:
                return normalized
            raise PydanticCustomError(
                "approval_level",
                "approval_level must be one of {allowed}, got '{value}'",
                {"allowed": ", ".join(APPROVAL_LEVELS), "value": value},
            )
        return value  # non-strings fail the ``str`` type check with the usual error

    @model_validator(mode="after")
    def _task_fields(self) -> JobSpec:
        if self.task_type == "text":
            if not (self.text and self.text.strip()):
                raise ValueError("task_type is text but text is empty")
            if self.dispatch is not None and self.dispatch.silent:
                raise ValueError("silent delivery is only supported for agent tasks")
            self.request = None
        else:
            if self.request is None:
                raise ValueError("task_type is agent but request is missing")
            if not self.request.prompt():
                raise ValueError("request.input must contain a non-empty text message")
            self.text = None
        if self.dispatch is not None:
            self._follow_target(self.dispatch.target)
        if self.save_result_to_inbox is None:
            # QwenPaw's rule; Tether has no inbox, so it only round-trips.
            self.save_result_to_inbox = not (
                self.task_type == "text" and self.schedule.type == "cron"
            )
        return self

    def _follow_target(self, target: DispatchTarget) -> None:
        if self.request is not None:
            self.request = self.request.model_copy(
                update={"user_id": target.user_id, "session_id": target.session_id}
            )

    def with_id(self, job_id: str) -> JobSpec:
        """The spec with its id, and its default target if it had none."""
        spec = self.model_copy(update={"id": job_id})
        if spec.dispatch is None:
            spec.dispatch = DispatchSpec(target=spec.target)
            spec._follow_target(spec.dispatch.target)
        return spec

    @property
    def target(self) -> DispatchTarget:
        """Where runs go: the dispatch target, or the job's own session."""
        if self.dispatch is not None:
            return self.dispatch.target
        return DispatchTarget(user_id=CRON_USER, session_id=default_session_id(self.id or ""))


def default_session_id(job_id: str) -> str:
    """The session a job talks to when the client did not choose one."""
    return f"cron:{job_id}"


def validate_job_spec(data: Mapping[str, object], *, now: datetime | None) -> JobSpec:
    """Validate a request body, additionally rejecting a ``once`` time before ``now``
    (None: a time the job already had, which may have passed, is not judged).

    Raises :class:`pydantic.ValidationError` for every problem with ``data`` and
    :class:`ValueError` if ``now`` is naive.
    """
    if now is None:
        return JobSpec.model_validate(dict(data))
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return JobSpec.model_validate(dict(data), context={NOW_CONTEXT_KEY: now})
