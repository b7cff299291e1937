"""The scale curve: cycle time against nodes, one line per pending-pod count."""

from __future__ import annotations

from collections.abc import Sequence

from pumice.bench.runner import Result


def plot_scale(results: Sequence[Result], path: str) -> bool:
    """Write the PNG of the ``scale-NxP`` results to ``path``; False if there are none."""
    points: dict[int, list[tuple[int, float, float]]] = {}
    for r in results:
        if r.name.startswith("scale-"):
            points.setdefault(r.pending, []).append((r.nodes, r.cycle_p50_s, r.pods_per_s))
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for pods, pts in sorted(points.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        ax1.plot(xs, [p[1] for p in pts], marker="o", label=f"{pods:,} pending pods")
        ax2.plot(xs, [p[2] for p in pts], marker="o", label=f"{pods:,} pending pods")
    ax1.set(xlabel="nodes", ylabel="cycle time, p50 (s)", title="one scheduling cycle")
    ax2.set(xlabel="nodes", ylabel="pods decided per second", title="throughput")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax2.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
