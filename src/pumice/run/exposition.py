"""Prometheus' text format for ``pumice run``'s registry, Volcano's counter names kept.

Volcano's counters whose names do not end in ``_total`` (``volcano_job_retry_counts``,
``volcano_total_preemption_attempts``) are exported as counters under their exact
names: ``prometheus_client`` would append ``_total``, so :func:`render` writes them
itself (serve ``/metrics`` with it, not with ``generate_latest``).

Contract: :func:`exact_counter` makes such a family; :func:`render` writes a registry
as ``generate_latest`` does, byte for byte, except for those families' ``# HELP`` and
``# TYPE`` lines.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest


def exact_counter(name: str, documentation: str) -> Metric:
    """A counter family exported under ``name`` exactly, with samples named ``name``
    (add them with ``family.add_sample(family.name, labels, value)``), for Volcano's
    counters that have no ``_total`` suffix. :func:`render` writes it as such."""
    return Metric(name, documentation, "counter")


class _Families:
    """Metric families already collected, in the shape ``generate_latest`` reads."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _is_exact_counter(family: Metric) -> bool:
    return family.type == "counter" and all(s.name == family.name for s in family.samples)


def render(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format, as ``generate_latest`` writes it, except
    that a counter family whose samples carry its own name (:func:`exact_counter`)
    keeps that name on its ``# HELP`` and ``# TYPE`` lines: ``generate_latest`` would
    name it ``<name>_total``, which its samples do not match."""
    out: list[bytes] = []
    plain: list[Metric] = []
    for family in registry.collect():
        if not _is_exact_counter(family):
            plain.append(family)
            continue
        if plain:
            out.append(generate_latest(_Families(plain)))
            plain = []
        untyped = Metric(family.name, family.documentation, "unknown")
        untyped.samples = family.samples
        help_line, _type_line, rest = generate_latest(_Families([untyped])).split(b"\n", 2)
        out.append(b"%s\n# TYPE %s counter\n%s" % (help_line, family.name.encode(), rest))
    if plain:
        out.append(generate_latest(_Families(plain)))
    return b"".join(out)


__all__ = ["exact_counter", "render"]
