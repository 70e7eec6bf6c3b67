"""The boundary under shell calls: bubblewrap, per-call limits, and what each call used.

``Sandbox.prepare`` turns a command into a :class:`Launch` (argv, pre-exec step,
accounting); whatever starts the process uses it, so the launcher can change without
this package knowing.
"""
