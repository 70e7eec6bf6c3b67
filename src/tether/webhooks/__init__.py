"""Outgoing webhooks: signed notifications of what waits for a person or has ended."""
