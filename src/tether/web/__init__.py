"""The web console: a login by the token URL and the static single-page app."""
