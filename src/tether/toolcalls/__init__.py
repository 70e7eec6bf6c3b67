"""Tool-call coordination: the in-flight registry, deadlines, cancel and offload, output."""
