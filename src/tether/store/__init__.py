"""Persistence: tables, migrations and repositories. All SQL in Tether lives here."""
