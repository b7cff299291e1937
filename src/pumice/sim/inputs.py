"""The cluster and the workload a ``pumice simulate`` command line asks for.

``--cluster`` or ``--nodes`` (else the built-in cluster), ``--topology``; workload
files, a trace (``--trace-format``), or a generated workload (``--jobs``, ``--load``,
``--seed``; else the built-in one). ``pumice simulate`` reads its arguments with these,
and ``pumice bench``'s simulator scenarios build the same run from the same arguments,
so a benchmark times exactly what the command would run.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pumice.errors import InputError

if TYPE_CHECKING:
    from pumice.sim.cluster_spec import ClusterSpec
    from pumice.sim.workload import Workload

GPU = "nvidia.com/gpu"


def cluster_from_args(args: argparse.Namespace) -> ClusterSpec:
    from pumice.sim.cluster_spec import (
        ClusterSpec,
        default_cluster,
        load_cluster_spec,
        node_object,
    )

    if args.nodes is not None:
        if args.nodes < 1:
            raise InputError("must be >= 1", field="--nodes")
        if args.cluster:
            raise InputError("give --cluster or --nodes, not both")
        width = max(4, len(str(args.nodes - 1)))
        spec = ClusterSpec(
            [
                node_object(
                    f"gpu-{i:0{width}d}",
                    {"cpu": 96000.0, "memory": 768.0 * 2**30, GPU: 8.0},
                    labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                )
                for i in range(args.nodes)
            ]
        )
    elif args.cluster and args.trace_format == "alibaba2023" and args.cluster.endswith(".csv"):
        from pumice.sim.traces import alibaba2023

        spec = ClusterSpec(alibaba2023.load_nodes(args.cluster))
    elif args.cluster:
        notes: list[str] = []
        spec = load_cluster_spec(args.cluster, notes)
        for note in notes:
            print(f"pumice: note: {note}", file=sys.stderr)
    else:
        spec = ClusterSpec(default_cluster())
    if args.topology is not None:
        from pumice.sim.topology import TreeShape, hypernode_objects

        if spec.hypernodes:
            raise InputError(
                f"{args.cluster} has its own HyperNodes; --topology would replace them",
                field="--topology",
            )
        shape = TreeShape.from_text(args.topology)
        spec.hypernodes = hypernode_objects([n["metadata"]["name"] for n in spec.nodes], shape)
    return spec


def _gpus(nodes: list[dict[str, Any]]) -> int:
    from pumice.sim.engine import node_allocatable

    return int(sum(a.get(GPU, 0.0) for a in node_allocatable(nodes)))


def workload_from_args(args: argparse.Namespace, nodes: list[dict[str, Any]]) -> Workload:
    from pumice.sim import synthetic
    from pumice.sim.loader import load_workload

    if args.trace_format:
        if not args.workload:
            raise InputError(f"--trace-format {args.trace_format} needs a trace file or directory")
        if len(args.workload) > 1:
            raise InputError("one trace at a time (a file or a directory)")
        import importlib

        mod = importlib.import_module(f"pumice.sim.traces.{args.trace_format}")
        return mod.load(args.workload[0], limit=args.limit)
    if args.workload:
        if args.jobs is not None:
            raise InputError("give WORKLOAD files or --jobs, not both")
        return load_workload(args.workload)
    if args.jobs is not None:
        if args.jobs < 0:
            raise InputError("must be >= 0", field="--jobs")
        gpus = max(_gpus(nodes), 8)
        if args.load <= 0:
            raise InputError("must be > 0", field="--load")
        return synthetic.generate(
            args.jobs,
            seed=args.seed,
            capacity_gpus=gpus,
            n_queues=12 if args.jobs < 20000 else 20,
            max_gang=max(1, min(32, gpus // 8)),  # no gang wider than the cluster
            load=args.load,
        )
    if args.nodes is None and not args.cluster:
        return synthetic.default_workload(args.seed)
    return synthetic.generate(3000, seed=args.seed, capacity_gpus=max(_gpus(nodes), 8))


__all__ = ["cluster_from_args", "workload_from_args"]
