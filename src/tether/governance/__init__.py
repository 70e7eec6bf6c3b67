"""Governance: whether an agent's tool call may run.

The analysis (shell parsing, rules, findings, levels) is pure and has no I/O; the gate,
the approval service and the rule book use the store to audit decisions, keep approval
requests and persist user rules.
"""
