"""Errors the coordinator raises for the HTTP layer (and the agent) to translate."""

from tether.tools.base import ToolInputError


class ToolCallNotFound(LookupError):
    """No such call in this session."""


class ToolCallConflict(Exception):
    """The call exists but is not in a state that allows the request."""


class CapacityExceeded(ToolInputError):
    """Too many calls are in flight (per session or on the server); the call never ran."""
