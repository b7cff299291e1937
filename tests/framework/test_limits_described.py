"""A queue's limit is worded from its figures, and the wording is kept by those figures
(an explanation asks it again every cycle): each change of an amount, a source or a
resource must give the sentence a first call gives."""

from __future__ import annotations

from pumice.api.resources import ResourceSpace
from pumice.framework.limits import CAPABILITY, DESERVED, describe

GPU = "nvidia.com/gpu"


def test_described_follows_each_amount_source_and_resource() -> None:
    space = ResourceSpace(["cpu", "memory", GPU])
    cpu, mem, gpu = space.index["cpu"], space.index["memory"], space.index[GPU]
    limit = space.vector({"cpu": 4000.0, "memory": 4 * 2.0**30, GPU: 2.0})
    sources = [DESERVED] * space.size
    both = "its deserved share (cpu 4, memory 4Gi)"
    assert describe(space, limit, sources, [cpu, mem]) == both
    assert describe(space, limit, sources, [cpu, mem]) == both  # (asked again)
    assert describe(space, limit, sources, iter([cpu, mem])) == both  # (any iterable)

    grown = limit.copy()
    grown[cpu] = 6500.0
    assert describe(space, grown, sources, [cpu, mem]) == (
        "its deserved share (cpu 6500m, memory 4Gi)"
    )
    assert describe(space, limit, sources, [cpu, mem]) == both  # (the first figures again)

    capped = list(sources)
    capped[cpu] = CAPABILITY
    assert (
        describe(space, limit, capped, [cpu, mem])
        == "its capability (cpu 4) and its deserved share (memory 4Gi)"
    )
    assert describe(space, limit, sources, [mem, cpu]) == ("its deserved share (memory 4Gi, cpu 4)")
    assert describe(space, limit, sources, [gpu]) == f"its deserved share ({GPU} 2)"
    other = ResourceSpace(["cpu", "memory", "example.com/fpga"])
    fpga = other.index["example.com/fpga"]
    assert describe(other, other.vector({"example.com/fpga": 2.0}), sources, [fpga]) == (
        "its deserved share (example.com/fpga 2)"
    )
