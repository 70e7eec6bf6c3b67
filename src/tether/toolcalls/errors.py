"""Errors the coordinator raises for the HTTP layer to translate."""


class ToolCallNotFound(LookupError):
    """No such call in this session."""


class ToolCallConflict(Exception):
    """The call exists but is not in a state that allows the request."""
