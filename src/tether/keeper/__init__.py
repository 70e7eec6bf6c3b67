"""The keeper: one detached runner per node that owns tool calls' process trees.

The server asks the runner (over a unix socket under ``TETHER_HOME``) to start a call;
the runner starts it in its own session, writes its output and its end to files under
``TETHER_HOME/calls/<call_id>/`` and enforces its kill deadline, so the call outlives
the server (a restart, an upgrade or a ``kill -9``). See docs/ARCHITECTURE.md.
"""
