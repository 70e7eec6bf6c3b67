"""HTTP: one module per resource. Translation only; the services hold the logic."""
