"""Benchmarks of the scheduling core: scenarios built in memory, timed through the same
``build_snapshot`` + ``Scheduler.cycle`` code that ``pumice cycle`` runs."""
