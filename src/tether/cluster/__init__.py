"""Several nodes on one database: each node's identity and lease."""
