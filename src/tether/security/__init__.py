"""Secrets at rest, the API token, and request perimeter checks."""
