"""Cron jobs: job models, schedule arithmetic and misfire planning."""
