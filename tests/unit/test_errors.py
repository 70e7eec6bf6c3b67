"""The error kinds and the one place that maps them to HTTP statuses."""

from __future__ import annotations

import pytest

from tether.api.errors import status_of
from tether.errors import Busy, Conflict, Forbidden, Invalid, NotFound, TetherError
from tether.governance.approvals import ApprovalDecided, ApprovalForbidden, ApprovalNotFound
from tether.llm.provider_service import ProviderExists, UnknownModel, UnknownProvider
from tether.scheduler.jobs import JobBusy, JobExists, JobNotFound
from tether.tasks.chats import ChatNotFound
from tether.tasks.service import TaskNotFound, TooManyTasks
from tether.toolcalls.errors import ToolCallConflict, ToolCallNotFound


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ToolCallNotFound("c1"), 404),
        (ApprovalNotFound("r" * 32), 404),
        (UnknownProvider("p"), 404),
        (JobNotFound("j"), 404),
        (ChatNotFound("s"), 404),
        (TaskNotFound("t"), 404),
        (ToolCallConflict("done"), 409),
        (ApprovalDecided(), 409),
        (ProviderExists("p"), 409),
        (JobExists("j"), 409),
        (JobBusy("j"), 409),
        (ApprovalForbidden(), 403),
        (TooManyTasks("full"), 429),
        (UnknownModel("m"), 422),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_each_domain_error_maps_by_its_kind(error: TetherError, status: int) -> None:
    assert status_of(error) == status


def test_kinds_are_tether_errors_and_keep_the_builtin_they_replace() -> None:
    for kind in (NotFound, Conflict, Forbidden, Busy, Invalid):
        assert issubclass(kind, TetherError)
    assert issubclass(NotFound, LookupError) and issubclass(Invalid, ValueError)


def test_invalid_locates_a_field_or_keeps_a_sentence() -> None:
    assert Invalid("bad id", field="id").errors == [
        {"loc": ("body", "id"), "msg": "bad id", "type": "value_error"}
    ]
    assert Invalid("invalid rules: x").errors is None


def test_messages_are_qwenpaws_wording() -> None:
    assert str(ToolCallNotFound("c1")) == "Tool call not found"
    assert str(ApprovalNotFound("0123456789abcdef-tail")) == (
        "Approval request not found: 0123456789abcdef"
    )
    assert str(JobNotFound("nightly")) == "job not found"
    assert str(TaskNotFound("task-1")) == "Task not found: task-1"
    assert str(ChatNotFound("s1")) == "Chat not found: s1"
