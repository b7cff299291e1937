"""Fault injection against a real API server: ``pumice bench faults`` (see docs/run.md)."""
