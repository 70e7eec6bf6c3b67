"""Tools the agent can call: their JSON-schema specs and built-in implementations."""
