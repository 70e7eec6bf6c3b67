"""Governance analysis: decide whether an agent tool call may run (pure, no I/O)."""
