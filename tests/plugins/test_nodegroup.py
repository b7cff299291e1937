"""nodegroup: a queue's pods stay on the node groups its spec.affinity allows, and a
refusal names the queue and the group."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.api.parse import parse_queue
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler

LABEL = "volcano.sh/nodegroup-name"
CONF = conf("allocate", ["gang"], ["predicates", "nodegroup", "nodeorder"])
GROUPS = ("g1", "g2", "g3", "g4")


def q(name: str, **lists: list[str]) -> dict:
    """A queue with ``spec.affinity`` from ``required``, ``preferred``, ``anti_required``
    and ``anti_preferred`` lists (no affinity at all when none is given)."""
    out = queue(name)
    if lists:
        aff: dict = {}
        for key, part in (("nodeGroupAffinity", ""), ("nodeGroupAntiAffinity", "anti_")):
            for kind in ("required", "preferred"):
                names = lists.get(part + kind)
                if names:
                    field = f"{kind}DuringSchedulingIgnoredDuringExecution"
                    aff.setdefault(key, {})[field] = names
        out["spec"]["affinity"] = aff
    return out


def grouped(name: str, group: str | None, cpu: str = "4") -> dict:
    return node(name, cpu, labels={LABEL: group} if group else {})


def test_refusals_name_the_queue_and_the_group() -> None:
    d = run(
        [
            q("team", required=["g1"], anti_required=["g2"]),
            podgroup("pg", queue="team"),
            pod("p", group="pg", cpu="8"),
            grouped("n1", "g1"),
            grouped("n2", "g2"),
            grouped("n3", None),
        ],
        CONF,
    )
    why = d.pending["default/pg"]
    assert "1 node does not satisfy the node group affinity (queue team, group g2)" in why
    assert "1 node group label not found (queue team" in why
    assert "1 insufficient cpu" in why  # (n1 is allowed, only too small)


def test_strict_false_lets_a_queue_without_affinity_use_unlabelled_nodes() -> None:
    objs = [queue(), podgroup("pg"), pod("p", group="pg"), grouped("n1", "g1"), grouped("n2", None)]
    strict = run(objs, CONF)
    assert strict.binds == {}
    assert "1 node group affinity not specified (queue default" in strict.pending["default/pg"]
    lenient = conf(
        "allocate", ["gang"], ["predicates", {"name": "nodegroup", "arguments": {"strict": False}}]
    )
    assert run(objs, lenient).binds == {"default/p": "n2"}


@pytest.mark.parametrize(("key", "value"), [("strict", "yes"), ("enablePreferredOrder", 2)])
def test_bad_arguments_are_refused_naming_the_key(key: str, value: object) -> None:
    config = conf("allocate", [{"name": "nodegroup", "arguments": {key: value}}])
    with pytest.raises(InputError) as err:
        Scheduler.create(parse_config(yaml.safe_load(config)))
    assert err.value.field is not None and err.value.field.endswith(f"arguments.{key}")


def test_malformed_queue_affinity_is_refused_naming_the_field() -> None:
    obj = queue("team")
    obj["spec"]["affinity"] = {
        "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "g1"}
    }
    with pytest.raises(InputError) as err:
        parse_queue(obj)
    assert err.value.field == (
        "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    )
    obj["spec"]["affinity"] = {"nodeGroupAntiAffinity": {"preferred": 1}, "x": 1}
    assert parse_queue(obj).affinity is not None  # (unknown keys are not read)


def test_a_changed_queue_affinity_is_followed_by_the_next_cycle() -> None:
    """The living plugin rebuilds its queue rules every cycle."""
    sched = Scheduler.create(parse_config(yaml.safe_load(CONF)))

    def cycle(group: str) -> dict[str, str]:
        objs = [
            q("team", required=[group]),
            podgroup("pg", queue="team"),
            pod("p", group="pg"),
            grouped("n1", "g1"),
            grouped("n2", "g2"),
        ]
        return sched.cycle(build_snapshot([SourcedObject(o, "t") for o in objs])).binds

    assert cycle("g1") == {"default/p": "n1"}
    assert cycle("g2") == {"default/p": "n2"}


def allowed(spec: dict, group: str | None) -> bool:
    """What strict nodegroup allows, from the queue's lists (Volcano's rule)."""
    if group is None or not any(spec.values()):
        return False
    if group in spec.get("anti_preferred", ()):
        return True
    if group in spec.get("anti_required", ()):
        return False
    return group in spec.get("required", ()) or group in spec.get("preferred", ())


subsets = st.lists(st.sampled_from(GROUPS), unique=True, max_size=2)
affinities = st.fixed_dictionaries(
    {"required": subsets, "preferred": subsets, "anti_required": subsets, "anti_preferred": subsets}
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(affinities, min_size=1, max_size=3),
    node_groups=st.lists(st.sampled_from((*GROUPS, None)), min_size=1, max_size=6),
    pods=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["1", "2", "3"])), max_size=8),
)
def test_strict_never_binds_a_pod_outside_its_queues_groups(specs, node_groups, pods) -> None:
    objs: list[dict] = [grouped(f"n{i}", g) for i, g in enumerate(node_groups)]
    for k, spec in enumerate(specs):
        objs.append(q(f"q{k}", **spec))
    for j, (k, cpu) in enumerate(pods):
        k %= len(specs)
        objs += [podgroup(f"pg{j}", queue=f"q{k}"), pod(f"p{j}", group=f"pg{j}", cpu=cpu)]
    d = run(objs, CONF)
    for j, (k, _) in enumerate(pods):
        bound = d.binds.get(f"default/p{j}")
        if bound is not None:
            group = node_groups[int(bound[1:])]
            assert allowed(specs[k % len(specs)], group), (bound, group, specs[k % len(specs)])
        else:
            assert f"default/pg{j}" in d.pending
