"""Background chat tasks: submit, poll, stream, stop."""
