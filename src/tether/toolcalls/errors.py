"""Errors the coordinator raises; the HTTP layer maps their kinds once."""

from tether.errors import Conflict, NotFound
from tether.tools.base import ToolInputError

#: The wording QwenPaw's clients see for an unknown call.
TOOL_CALL_NOT_FOUND = "Tool call not found"


class ToolCallNotFound(NotFound):
    """No such call in this session."""

    def __init__(self, call_id: str) -> None:
        super().__init__(TOOL_CALL_NOT_FOUND)
        self.call_id = call_id


class ToolCallConflict(Conflict):
    """The call exists but is not in a state that allows the request."""


class CapacityExceeded(ToolInputError):
    """Too many calls are in flight (per session or on the server); the call never ran."""
