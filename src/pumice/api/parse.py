"""Kubernetes-shaped dicts -> validated records of the fields pumice uses.

Each ``parse_*`` function takes one object as a dict (as YAML/JSON or the API server give
it) and either returns a record or raises :class:`~pumice.errors.InputError` naming the
object and the field. Nothing here knows about resource columns; the snapshot builder
turns records into the model.
"""

from __future__ import annotations

import copy
import marshal
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pumice.api.gpus import DEVICE_RESOURCES, NODE_ANNOTATIONS, NODE_CAPACITY, DeviceAsk, device_ask
from pumice.api.node import NodeSpec
from pumice.api.pdb import parse_label_selector
from pumice.api.quantity import PODS, check_total, to_canonical
from pumice.api.queue import NodeGroupAffinity
from pumice.api.spread import SpreadConstraint, parse_spread
from pumice.api.task import (
    NUMA_POLICY_ANNOTATION,
    NumaAsk,
    Placement,
    PodAffinity,
    PodTerm,
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
    revocable_zone,
)
from pumice.api.topology_spec import (
    NetworkTopology,
    SubGroupPolicy,
    parse_network_topology,
    parse_sub_group_policies,
)
from pumice.errors import InputError, shown, shown_text

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: How long a pod runs once started (seconds, or a duration such as ``2h``): the
#: simulator's and the sandbox's kubelets end the pod after it, and a start forecast
#: counts on it.
DURATION_ANNOTATION = "pumice.sim/duration"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
TASK_SPEC_ANNOTATION_ALT = "volcano.sh/task-name"
DEFAULT_QUEUE = "default"

_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


def object_name(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name``) for messages."""
    kind = shown_text(obj.get("kind", "object")) if isinstance(obj, Mapping) else "object"
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return kind
    name, ns = shown_text(meta.get("name", "?")), meta.get("namespace")
    return f"{kind} {shown_text(ns)}/{name}" if ns else f"{kind} {name}"


def as_mapping(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` as a mapping (None: an empty one), or an InputError naming ``path``."""
    if type(value) is dict:  # (the usual, told without an abstract-class check)
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {type(value).__name__}", field=path)
    return value


def as_list(value: Any, path: str) -> list[Any]:
    """``value`` as a list (None: an empty one), or an InputError naming ``path``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__}", field=path)
    return value


def copy_tree(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy(value)`` for Kubernetes-shaped values, a few times faster: plain
    dicts and lists are copied (an object met twice is copied once, as deepcopy does),
    strings, numbers, booleans and None are shared; anything else goes to deepcopy."""
    kind = type(value)
    if kind is dict or kind is list:
        if memo is None:
            memo = {}
        got = memo.get(id(value))
        if got is not None:
            return got
        if kind is dict:
            out: Any = {}
            memo[id(value)] = out
            for k, x in value.items():
                t = type(x)
                out[k] = (
                    x
                    if t is str or t is int or t is float or t is bool or x is None
                    else copy_tree(x, memo)
                )
        else:
            out = []
            memo[id(value)] = out
            for x in value:
                t = type(x)
                out.append(
                    x
                    if t is str or t is int or t is float or t is bool or x is None
                    else copy_tree(x, memo)
                )
        return out
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is tuple:
        if memo is None:
            memo = {}
        return tuple([copy_tree(x, memo) for x in value])
    return copy.deepcopy(value, memo)


def as_str(value: Any, path: str, *, required: bool = False) -> str:
    """``value`` as text (None: empty, or an error when ``required``; YAML's numbers as
    written), or an InputError naming ``path``."""
    if type(value) is str:  # (the usual)
        return value
    if value is None:
        if required:
            raise InputError("is required", field=path)
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise InputError(f"expected a string, got {type(value).__name__}", field=path)
    if isinstance(value, int) and abs(value) > 10**40:
        raise InputError(f"expected a string, got {shown_text(value)}", field=path)
    return str(value)


#: Kubernetes keeps the integers pumice reads (minMember, priorities, weights, ports,
#: counts) in an int32.
INT32_MAX = 2**31 - 1


def as_int(value: Any, path: str, default: int, *, minimum: int | None = None) -> int:
    """``value`` as an int32 of at least ``minimum`` (None: ``default``; digits in a string
    count), or an InputError naming ``path``."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        text = value.strip() if isinstance(value, str) else ""
        if text.lstrip("-").isdigit() and len(text) <= 20:
            value = int(text)
        else:
            raise InputError(f"expected an integer, got {shown(value)}", field=path)
    if minimum is not None and value < minimum:
        raise InputError(f"must be at least {minimum}, got {shown_text(value)}", field=path)
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise InputError(
            f"must be between {-INT32_MAX - 1} and {INT32_MAX}, got {shown_text(value)}", field=path
        )
    return value


def _key(key: Any, path: str) -> str:
    """A map's key as text (YAML gives numbers and booleans as they are)."""
    if type(key) is str:  # (the usual)
        return key
    if isinstance(key, int) and abs(key) > 10**40:
        raise InputError(f"invalid key {shown_text(key)}", field=path)
    return str(key)


def as_labels(value: Any, path: str) -> dict[str, str]:
    """``value`` as a map of text to text (labels, annotations, selectors), or an
    InputError naming ``path`` or the entry (a new dict)."""
    if value is None:
        return {}
    if type(value) is dict:
        # (the usual: text already, taken as it is; every pod has two such maps)
        for k, v in value.items():
            if type(k) is not str or type(v) is not str:
                break
        else:
            return dict(value)
    out = {}
    for k, v in as_mapping(value, path).items():
        key = _key(k, path)
        out[key] = as_str(v, f"{path}.{key}")
    return out


def timestamp(value: Any, path: str) -> float:
    """RFC 3339 timestamp -> seconds since the epoch (0.0 when absent)."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, datetime):  # PyYAML turns unquoted timestamps into datetimes
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not abs(value) < 1e12:  # (NaN too) some 30,000 years
            raise InputError(f"invalid timestamp {shown_text(value)}", field=path)
        return float(value)
    if type(value) is str:  # (the usual: pods made together carry one time, read once)
        got = _TIMES.get(value)
        if got is not None:
            return got
    try:
        got = datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise InputError(f"invalid timestamp {shown(value)}", field=path) from exc
    if type(value) is str:
        if len(_TIMES) >= _TIMES_KEPT:
            _TIMES.clear()
        _TIMES[value] = got
    return got


#: RFC 3339 text -> its time, as :func:`timestamp` last read it (at most
#: ``_TIMES_KEPT``; cleared when full).
_TIMES: dict[str, float] = {}
_TIMES_KEPT = 4096


_NATIVE = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def is_scheduling_resource(name: str) -> bool:
    """Whether a ResourceList key is something a node offers and a pod consumes.

    Quota-style keys that tools write into PodGroup ``minResources`` (``requests.cpu``,
    ``limits.memory``, ``count/pods``) and unknown bare names are not; Volcano ignores
    them too. Extended resources (``vendor.com/thing``) and hugepages are."""
    if name in _NATIVE or name.startswith("hugepages-"):
        return True
    if name.startswith(("requests.", "limits.", "count/")):
        return False
    return "/" in name


def resources(value: Any, path: str) -> dict[str, float]:
    """A ResourceList (``{cpu: 500m, memory: 1Gi}``) -> canonical amounts. Every
    quantity is validated; keys that are not scheduling resources are then dropped."""
    out: dict[str, float] = {}
    amounts = _AMOUNTS
    for key, q in as_mapping(value, path).items():
        name = _key(key, path)
        if type(q) is str:  # (the usual: a quantity string, parsed once per name)
            got = amounts.get((name, q))
            if got is None:
                got = (
                    to_canonical(quota_base(name), q, field=f"{path}.{name}"),
                    is_scheduling_resource(name),
                )
                if len(amounts) >= _AMOUNTS_KEPT:
                    amounts.clear()
                amounts[(name, q)] = got
            if got[1]:
                out[name] = got[0]
            continue
        amount = to_canonical(quota_base(name), q, field=f"{path}.{name}")
        if is_scheduling_resource(name):
            out[name] = amount
    return out


def quota_base(name: str) -> str:
    """The resource a quota-style key counts (``requests.cpu`` and ``limits.cpu``:
    ``cpu``), whose unit its amount is kept in."""
    if name.startswith("requests."):
        return name[9:]
    if name.startswith("limits."):
        return name[7:]
    return name


def quota_amounts(value: Any, path: str) -> dict[str, float]:
    """A ResourceList with every key kept, quota-style ones (``requests.cpu``,
    ``limits.memory``, ``count/pods``) included, each amount in the canonical unit of
    the resource it counts (``requests.cpu`` in millicores, like ``cpu``): what a
    ResourceQuota's ``hard`` and ``used`` and a PodGroup's ``minResources`` are
    compared in. Every quantity is validated (a negative one is refused)."""
    out: dict[str, float] = {}
    amounts = _AMOUNTS
    for key, q in as_mapping(value, path).items():
        name = _key(key, path)
        base = quota_base(name)
        got = amounts.get((base, q)) if type(q) is str else None
        if got is None:
            amount = to_canonical(base, q, field=f"{path}.{name}")
        else:
            amount = got[0]
        out[name] = amount
    return out


#: Canonical amounts of the quantity strings seen, and whether the name is a scheduling
#: resource, by (resource name, string): pods and PodGroups repeat a few requests, whose
#: parse need not be done again.
_AMOUNTS: dict[tuple[str, str], tuple[float, bool]] = {}
_AMOUNTS_KEPT = 4096


def _add(into: dict[str, float], other: Mapping[str, float]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0.0) + v


def _max(into: dict[str, float], other: Mapping[str, float]) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0.0), v)


# -- Node --------------------------------------------------------------------------------


def _taints(value: Any, path: str) -> tuple[Taint, ...]:
    out = []
    for i, t in enumerate(as_list(value, path)):
        p = f"{path}[{i}]"
        t = as_mapping(t, p)
        effect = as_str(t.get("effect"), f"{p}.effect", required=True)
        if effect not in _EFFECTS:
            raise InputError(f"unknown taint effect {shown(effect)}", field=f"{p}.effect")
        out.append(
            Taint(
                as_str(t.get("key"), f"{p}.key", required=True), as_str(t.get("value"), p), effect
            )
        )
    return tuple(out)


def parse_node(obj: Mapping[str, Any]) -> NodeSpec:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    if "allocatable" in status:
        alloc = resources(status["allocatable"], "status.allocatable")
    elif "capacity" in status:
        alloc = resources(status["capacity"], "status.capacity")
    else:
        raise InputError(
            "is required (the node's schedulable resources)", field="status.allocatable"
        )
    alloc.setdefault(PODS, 110.0)
    ready = True
    for i, cond in enumerate(as_list(status.get("conditions"), "status.conditions")):
        cond = as_mapping(cond, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready = cond.get("status") in ("True", True)  # (unquoted YAML gives a bool)
    # Only what a plugin reads (see NodeSpec): a heartbeat must stay cheap to parse.
    notes = as_mapping(meta.get("annotations"), "metadata.annotations")
    annotations = {
        k: as_str(notes[k], f"metadata.annotations.{k}") for k in NODE_ANNOTATIONS if k in notes
    }
    cap = as_mapping(status.get("capacity"), "status.capacity")
    capacity = {
        k: to_canonical(k, cap[k], field=f"status.capacity.{k}") if k in cap else alloc[k]
        for k in NODE_CAPACITY
        if k in cap or k in alloc
    }
    return NodeSpec(
        name=name,
        labels=as_labels(meta.get("labels"), "metadata.labels"),
        taints=_taints(spec.get("taints"), "spec.taints"),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        allocatable=alloc,
        annotations=annotations,
        capacity=capacity,
    )


# -- Pod ---------------------------------------------------------------------------------


@dataclass(slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    scheduler_name: str
    node_name: str
    phase: str
    terminating: bool
    resreq: dict[str, float]
    init_resreq: dict[str, float]
    priority: int | None
    priority_class: str
    preemption_policy: str
    placement: Placement
    host_ports: tuple[tuple[str, int], ...]
    creation: float
    group: str
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    #: lastTransitionTime of the PodScheduled=True condition (0.0 when absent).
    scheduled_at: float = 0.0
    pod_affinity: PodAffinity | None = None
    #: How many entries ``spec.containers`` has (none: a pod Kubernetes would refuse).
    containers: int = 1
    #: ``spec.topologySpreadConstraints`` (see :mod:`pumice.api.spread`).
    spread: tuple[SpreadConstraint, ...] = ()
    #: The uid of the pod's controlling owner (the ownerReference marked
    #: ``controller: true``), "" when it has none: unannotated pods of one owner are one
    #: job, as Volcano's PodGroup controller groups them.
    owner: str = ""
    #: The gang of another dialect the pod joins (see :mod:`pumice.api.gang_apis`):
    #: None when it has none, or when the Volcano annotation (``group``) names one.
    gang: GangRef | None = None
    #: The PersistentVolumeClaims the pod mounts (see :func:`pod_claims`).
    claims: tuple[str, ...] = ()
    #: The DRA ResourceClaims the pod needs (see :func:`pod_device_claims`).
    device_claims: tuple[PodClaimRef, ...] = ()
    #: The shared GPUs it asks (Volcano's deviceshare resources), None when none.
    devices: DeviceAsk | None = None
    #: What the numa-aware plugin reads of a Guaranteed pod (see :func:`numa_ask`).
    numa: NumaAsk | None = None

    @property
    def role(self) -> str:
        """The task role (Volcano's task spec), from the annotation or the label."""
        for source in (self.annotations, self.labels):
            for key in (TASK_SPEC_ANNOTATION, TASK_SPEC_ANNOTATION_ALT):
                if source.get(key):
                    return source[key]
        return ""


#: The label by which a pod joins a scheduler-plugins coscheduling PodGroup.
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True, slots=True)
class GangRef:
    """How a pod names its gang in a dialect other than Volcano's.

    ``api`` is "coscheduling" (the ``scheduling.x-k8s.io/pod-group`` label names a
    ``scheduling.x-k8s.io`` PodGroup), or "workload": ``spec.workloadRef`` (``name`` a
    ``scheduling.k8s.io/v1alpha1`` Workload, ``pod_group`` one of its pod groups,
    ``replica_key`` the replica) or, with ``pod_group`` empty, ``spec.schedulingGroup``
    (``name`` a ``scheduling.k8s.io/v1alpha2`` PodGroup)."""

    api: str
    name: str
    pod_group: str = ""
    replica_key: str = ""

    def uid(self, namespace: str) -> str:
        """The uid of the job the pod joins (see :func:`job_uid`)."""
        return job_uid(self.api, namespace, self.name, self.pod_group, self.replica_key)


def job_uid(api: str, namespace: str, name: str, pod_group: str = "", replica: str = "") -> str:
    """The uid of a gang's job, unique across dialects: a Volcano PodGroup's is
    ``ns/<name>``; the others carry a prefix with a colon, which no object name can
    hold: ``ns/coscheduling:<name>`` (scheduler-plugins), ``ns/podgroup:<name>``
    (a ``scheduling.k8s.io/v1alpha2`` PodGroup), ``ns/workload:<workload>:<podGroup>``
    and ``...:<replicaKey>`` (a pod group of a ``scheduling.k8s.io/v1alpha1`` Workload,
    one job per replica key)."""
    if api == "volcano":
        return f"{namespace}/{name}"
    if api == "coscheduling":
        return f"{namespace}/coscheduling:{name}"
    if not pod_group:
        return f"{namespace}/podgroup:{name}"
    tail = f":{replica}" if replica else ""
    return f"{namespace}/workload:{name}:{pod_group}{tail}"


def group_of(uid: str) -> tuple[str, str, str]:
    """The object a job uid of :func:`job_uid` names: (``volcano``, ``coscheduling``,
    ``podgroup`` or ``workload``, its namespace, its name)."""
    namespace, _, rest = uid.partition("/")
    prefix, colon, tail = rest.partition(":")
    if not colon:
        return "volcano", namespace, rest
    return prefix, namespace, tail.partition(":")[0]


def _gang_ref(spec: Mapping[str, Any], labels: Mapping[str, str]) -> GangRef | None:
    """The pod's gang outside Volcano: ``spec.schedulingGroup``, else
    ``spec.workloadRef``, else the coscheduling label."""
    if spec.get("schedulingGroup") is not None:
        path = "spec.schedulingGroup.podGroupName"
        group = as_mapping(spec["schedulingGroup"], "spec.schedulingGroup")
        return GangRef("workload", as_str(group.get("podGroupName"), path, required=True))
    if spec.get("workloadRef") is not None:
        ref = as_mapping(spec["workloadRef"], "spec.workloadRef")
        return GangRef(
            "workload",
            as_str(ref.get("name"), "spec.workloadRef.name", required=True),
            as_str(ref.get("podGroup"), "spec.workloadRef.podGroup", required=True),
            as_str(ref.get("podGroupReplicaKey"), "spec.workloadRef.podGroupReplicaKey"),
        )
    if labels.get(COSCHEDULING_LABEL):
        return GangRef("coscheduling", labels[COSCHEDULING_LABEL])
    return None


def _container_requests(c: Mapping[str, Any], path: str) -> dict[str, float]:
    res = as_mapping(c.get("resources"), f"{path}.resources")
    req = resources(res.get("requests"), f"{path}.resources.requests")
    # The API server defaults a missing request to the limit.
    for name, amount in resources(res.get("limits"), f"{path}.resources.limits").items():
        req.setdefault(name, amount)
    return req


def _requirements(value: Any, path: str, *, fields: bool) -> tuple[Requirement, ...]:
    out = []
    for i, e in enumerate(as_list(value, path)):
        p = f"{path}[{i}]"
        e = as_mapping(e, p)
        op = as_str(e.get("operator"), f"{p}.operator", required=True)
        if op not in _OPERATORS:
            raise InputError(f"unknown operator {shown(op)}", field=f"{p}.operator")
        values = tuple(as_str(v, f"{p}.values") for v in as_list(e.get("values"), f"{p}.values"))
        if op in ("In", "NotIn") and not values:
            raise InputError(f"operator {op} needs values", field=f"{p}.values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise InputError(f"operator {op} needs one integer value", field=f"{p}.values")
        key = as_str(e.get("key"), f"{p}.key", required=True)
        out.append(Requirement(key, op, values, fields))
    return tuple(out)


def selector_term(value: Any, path: str) -> SelectorTerm:
    """A node selector term (``matchExpressions`` and ``matchFields``)."""
    t = as_mapping(value, path)
    reqs = _requirements(t.get("matchExpressions"), f"{path}.matchExpressions", fields=False)
    reqs += _requirements(t.get("matchFields"), f"{path}.matchFields", fields=True)
    return SelectorTerm(reqs)


def _placement(spec: Mapping[str, Any], revocable: bool = False) -> Placement:
    selector = tuple(sorted(as_labels(spec.get("nodeSelector"), "spec.nodeSelector").items()))
    na_path = "spec.affinity.nodeAffinity"
    na = as_mapping(as_mapping(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), na_path)
    required = None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rp = f"{na_path}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = as_list(as_mapping(req, rp).get("nodeSelectorTerms"), f"{rp}.nodeSelectorTerms")
        required = tuple(
            selector_term(t, f"{rp}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)
        )
    preferred = []
    pp = f"{na_path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, p in enumerate(as_list(na.get("preferredDuringSchedulingIgnoredDuringExecution"), pp)):
        p = as_mapping(p, f"{pp}[{i}]")
        weight = as_int(p.get("weight"), f"{pp}[{i}].weight", 1, minimum=0)
        preferred.append((weight, selector_term(p.get("preference"), f"{pp}[{i}].preference")))
    tolerations = []
    for i, t in enumerate(as_list(spec.get("tolerations"), "spec.tolerations")):
        p = f"spec.tolerations[{i}]"
        t = as_mapping(t, p)
        op = as_str(t.get("operator"), f"{p}.operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise InputError(f"unknown toleration operator {shown(op)}", field=f"{p}.operator")
        tolerations.append(
            Toleration(
                as_str(t.get("key"), f"{p}.key"),
                op,
                as_str(t.get("value"), f"{p}.value"),
                as_str(t.get("effect"), f"{p}.effect"),
            )
        )
    return Placement(selector, required, tuple(preferred), tuple(tolerations), revocable)


def pod_claims(spec: Mapping[str, Any], pod_name: str) -> tuple[str, ...]:
    """The PersistentVolumeClaims a pod's volumes name, in order: ``persistentVolumeClaim``
    volumes by their claim name, generic ephemeral volumes by the claim Kubernetes
    creates for them (``<pod>-<volume>``)."""
    out: list[str] = []
    for i, v in enumerate(as_list(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{i}]"
        v = as_mapping(v, path)
        pvc = v.get("persistentVolumeClaim")
        if pvc is not None:
            claim = as_str(as_mapping(pvc, f"{path}.persistentVolumeClaim").get("claimName"),
                           f"{path}.persistentVolumeClaim.claimName", required=True)  # fmt: skip
        elif v.get("ephemeral") is not None:
            claim = f"{pod_name}-{as_str(v.get('name'), f'{path}.name', required=True)}"
        else:
            continue
        if claim not in out:
            out.append(claim)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One entry of a pod's ``spec.resourceClaims``: the ResourceClaim it names
    (``claim_name``, in the pod's namespace), directly or, for a template, as the
    resource-claim controller recorded it in ``status.resourceClaimStatuses``.
    ``claim_name`` is empty while a template's claim is not made yet (``waiting``)."""

    name: str
    namespace: str
    claim_name: str
    template: str = ""

    @property
    def waiting(self) -> bool:
        """A template's claim the controller has not made yet: the pod cannot be
        scheduled until it exists."""
        return not self.claim_name

    @property
    def key(self) -> str:
        """``namespace/claim name`` ("" while waiting)."""
        return f"{self.namespace}/{self.claim_name}" if self.claim_name else ""


def pod_device_claims(
    spec: Mapping[str, Any], status: Mapping[str, Any], namespace: str
) -> tuple[PodClaimRef, ...]:
    """The DRA ResourceClaims a pod needs, in ``spec.resourceClaims`` order: by name, or
    for a template entry as the resource-claim controller recorded it in
    ``status.resourceClaimStatuses`` (waiting while it has not). A template entry whose
    status records no claim name (the controller decided none is needed) is left out."""
    generated: dict[str, str | None] = {}
    sp = "status.resourceClaimStatuses"
    for i, s in enumerate(as_list(status.get("resourceClaimStatuses"), sp)):
        s = as_mapping(s, f"{sp}[{i}]")
        name = as_str(s.get("name"), f"{sp}[{i}].name", required=True)
        generated[name] = as_str(s.get("resourceClaimName"), f"{sp}[{i}].resourceClaimName") or None
    out = []
    for i, c in enumerate(as_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        p = f"spec.resourceClaims[{i}]"
        c = as_mapping(c, p)
        name = as_str(c.get("name"), f"{p}.name", required=True)
        direct = as_str(c.get("resourceClaimName"), f"{p}.resourceClaimName")
        template = as_str(c.get("resourceClaimTemplateName"), f"{p}.resourceClaimTemplateName")
        if bool(direct) == bool(template):
            raise InputError(
                "set exactly one of resourceClaimName and resourceClaimTemplateName", field=p
            )
        if direct:
            out.append(PodClaimRef(name, namespace, direct))
        elif name not in generated:
            out.append(PodClaimRef(name, namespace, "", template))
        elif generated[name]:
            out.append(PodClaimRef(name, namespace, generated[name] or "", template))
        # (recorded without a claim name: the controller found no claim was needed)
    return tuple(out)


def _controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the ownerReference marked ``controller: true`` ("" when none)."""
    path = "metadata.ownerReferences"
    for i, ref in enumerate(as_list(meta.get("ownerReferences"), path)):
        ref = as_mapping(ref, f"{path}[{i}]")
        if ref.get("controller") in (True, "true"):
            return as_str(ref.get("uid"), f"{path}[{i}].uid")
    return ""


#: The fields of a :class:`PodRecord` that :func:`parse_pod` reads from the pod's spec
#: alone, with two annotations (``volcano.sh/revocable-zone`` or
#: ``volcano.sh/preemptable`` for the placement, the NUMA policy): see ``_POD_SPECS``.
_SPEC_FIELDS = (
    "scheduler_name",
    "node_name",
    "resreq",
    "init_resreq",
    "priority",
    "priority_class",
    "preemption_policy",
    "placement",
    "host_ports",
    "pod_affinity",
    "spread",
    "containers",
    "devices",
    "numa",
)

#: The spec fields (``_SPEC_FIELDS``) of the pods parsed, by their spec's ``marshal``
#: bytes and the two annotation values they also read (at most ``_POD_SPECS_KEPT``;
#: cleared when full). Why: a job's pods (and the jobs of one template) share one spec,
#: whose requests, placement and affinity are most of a pod's parse; ``marshal`` tells
#: ``True`` from ``1`` and ``1`` from ``1.0`` and refuses every type but the exact
#: builtins, so equal bytes mean a spec that parses the same (the fields are read-only
#: values but the request dicts, which are copied).
_POD_SPECS: dict[tuple[bytes, bool, str], dict[str, Any]] = {}
_POD_SPECS_KEPT = 1024


def _spec_bytes(spec: Mapping[str, Any]) -> bytes | None:
    """``spec``'s ``marshal`` bytes, the key of the spec memos (``_POD_SPECS``,
    ``_PODGROUP_SPECS``); None for a type ``marshal`` refuses (parsed each time)."""
    if type(spec) is not dict:
        return None
    try:
        return marshal.dumps(spec)
    except (ValueError, TypeError):
        return None


def _keep_spec(
    kept: dict[Any, dict[str, Any]],
    key: Any,
    rec: Any,
    fields: tuple[str, ...],
    dicts: tuple[str, ...],
) -> None:
    """Keep ``rec``'s spec ``fields`` in ``kept`` under ``key`` (cleared when full), the
    ``dicts`` among them copied: a record's dicts are its own."""
    if len(kept) >= _POD_SPECS_KEPT:
        kept.clear()
    made = {f: getattr(rec, f) for f in fields}
    for f in dicts:
        if made[f] is not None:
            made[f] = dict(made[f])
    kept[key] = made


def _pod_spec_key(
    spec: Mapping[str, Any], annotations: dict[str, str]
) -> tuple[bytes, bool, str] | None:
    """The key of ``spec`` (with the annotations it is read with) in ``_POD_SPECS``;
    None when it has none (a type ``marshal`` refuses: parsed each time)."""
    raw = _spec_bytes(spec)
    if raw is None:
        return None
    return raw, revocable_zone(annotations) == "*", annotations.get(NUMA_POLICY_ANNOTATION, "")


#: A pod's metadata, name, namespace, spec, status and annotations.
_PodHead = tuple[Mapping[str, Any], str, str, Mapping[str, Any], Mapping[str, Any], dict[str, str]]


def _pod_head(obj: Mapping[str, Any]) -> _PodHead:
    """What every pod's record starts from, read in this order (a bad pod's first
    error comes from here): metadata, name, namespace, spec, status, annotations."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    annotations = as_labels(meta.get("annotations"), "metadata.annotations")
    return meta, name, namespace, spec, status, annotations


def parse_pod(obj: Mapping[str, Any]) -> PodRecord:
    """A pod's record. The fields read from its spec alone are taken from the last pod
    of the same spec when there was one (see ``_POD_SPECS``); the rest is read as
    :func:`_parse_pod` reads it, in its order (so that a bad pod's first error is the
    same: a spec parsed before raises none)."""
    head = _pod_head(obj)
    meta, name, namespace, spec, status, annotations = head
    key = _pod_spec_key(spec, annotations)
    known = _POD_SPECS.get(key) if key is not None else None
    if known is None:
        rec = _parse_pod(obj, head)
        if key is not None:
            _keep_spec(_POD_SPECS, key, rec, _SPEC_FIELDS, ("resreq", "init_resreq"))
        return rec
    labels = as_labels(meta.get("labels"), "metadata.labels")
    gang = _gang_ref(spec, labels)
    rec = PodRecord(
        uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        phase=as_str(status.get("phase"), "status.phase") or "Pending",
        terminating=meta.get("deletionTimestamp") is not None,
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        group=annotations.get(GROUP_ANNOTATION, ""),
        annotations=annotations,
        labels=labels,
        scheduled_at=pod_scheduled_at(status),
        owner=_controller_uid(meta),
        gang=None if annotations.get(GROUP_ANNOTATION) else gang,
        claims=pod_claims(spec, name),
        device_claims=pod_device_claims(spec, status, namespace),
        **known,
    )
    rec.resreq, rec.init_resreq = dict(rec.resreq), dict(rec.init_resreq)
    return rec


def _parse_pod(obj: Mapping[str, Any], head: _PodHead) -> PodRecord:
    """A pod's record, every field read from ``obj`` (``head``: its :func:`_pod_head`)."""
    meta, name, namespace, spec, status, annotations = head

    containers = as_list(spec.get("containers"), "spec.containers")
    resreq: dict[str, float] = {}
    ports: list[tuple[str, int]] = []
    for i, c in enumerate(containers):
        path = f"spec.containers[{i}]"
        c = as_mapping(c, path)
        _add(resreq, _container_requests(c, path))
        for j, port in enumerate(as_list(c.get("ports"), f"{path}.ports")):
            port = as_mapping(port, f"{path}.ports[{j}]")
            hp = as_int(port.get("hostPort"), f"{path}.ports[{j}].hostPort", 0, minimum=0)
            if hp:
                ports.append((as_str(port.get("protocol"), "protocol") or "TCP", hp))
    # Init containers: restartable ones (sidecars) run alongside; the others one by one.
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for i, c in enumerate(as_list(spec.get("initContainers"), "spec.initContainers")):
        path = f"spec.initContainers[{i}]"
        c = as_mapping(c, path)
        req = _container_requests(c, path)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _max(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, req)
            _max(init_peak, step)
    _add(resreq, sidecars)
    overhead = resources(spec.get("overhead"), "spec.overhead")
    _add(resreq, overhead)
    init_resreq = dict(resreq)
    peak = dict(init_peak)
    _add(peak, overhead)
    _max(init_resreq, peak)
    check_total(init_resreq, what="the pod's containers request", field="spec.containers")
    for r in (resreq, init_resreq):
        r[PODS] = 1.0
    devices = _device_ask(spec) if not DEVICE_RESOURCES.isdisjoint(init_resreq) else None

    priority = spec.get("priority")
    if priority is not None:
        priority = as_int(priority, "spec.priority", 0)
    labels = as_labels(meta.get("labels"), "metadata.labels")
    gang = _gang_ref(spec, labels)
    policy = as_str(spec.get("preemptionPolicy"), "spec.preemptionPolicy") or "PreemptLowerPriority"
    if policy not in ("PreemptLowerPriority", "Never"):
        raise InputError(
            f"unknown preemption policy {shown(policy)}", field="spec.preemptionPolicy"
        )
    return PodRecord(
        uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        scheduler_name=as_str(spec.get("schedulerName"), "spec.schedulerName"),
        node_name=as_str(spec.get("nodeName"), "spec.nodeName"),
        phase=as_str(status.get("phase"), "status.phase") or "Pending",
        terminating=meta.get("deletionTimestamp") is not None,
        resreq=resreq,
        init_resreq=init_resreq,
        priority=priority,
        priority_class=as_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        preemption_policy=policy,
        placement=_placement(spec, revocable_zone(annotations) == "*"),
        host_ports=tuple(sorted(set(ports))),
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        group=annotations.get(GROUP_ANNOTATION, ""),
        annotations=annotations,
        labels=labels,
        scheduled_at=pod_scheduled_at(status),
        pod_affinity=_pod_affinity(spec),
        spread=parse_spread(spec),
        containers=len(containers),
        owner=_controller_uid(meta),
        gang=None if annotations.get(GROUP_ANNOTATION) else gang,
        claims=pod_claims(spec, name),
        device_claims=pod_device_claims(spec, status, namespace),
        devices=devices,
        numa=numa_ask(spec, annotations),
    )


def _device_ask(spec: Mapping[str, Any]) -> DeviceAsk | None:
    """The shared GPUs the pod asks (see :mod:`pumice.api.gpus`), read per container
    from limits (and requests, where Volcano reads them too); only for a pod whose
    requests name such a resource."""

    def both(key: str) -> list[tuple[dict[str, float], dict[str, float]]]:
        out = []
        for i, c in enumerate(as_list(spec.get(key), f"spec.{key}")):
            path = f"spec.{key}[{i}].resources"
            res = as_mapping(as_mapping(c, f"spec.{key}[{i}]").get("resources"), path)
            out.append((resources(res.get("limits"), f"{path}.limits"),
                        resources(res.get("requests"), f"{path}.requests")))  # fmt: skip
        return out

    return device_ask(both("containers"), [lim for lim, _ in both("initContainers")])


#: The resources Kubernetes' QoS class is computed over.
_QOS_RESOURCES = ("cpu", "memory")


def numa_ask(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> NumaAsk | None:
    """What the numa-aware plugin reads of a pod: None unless the pod is of the
    Guaranteed QoS class and asks for something NUMA placement decides (a container
    with whole CPUs, or a ``volcano.sh/numa-topology-policy`` other than ``none``).

    Guaranteed as Kubernetes computes it (``GetPodQOS``, over containers and init
    containers): every container has positive cpu and memory limits, and the summed
    requests (a missing request defaulting to its limit, as the API server does) equal
    the summed limits. Called after the pod's resources were validated."""
    requests = dict.fromkeys(_QOS_RESOURCES, 0.0)
    limits = dict.fromkeys(_QOS_RESOURCES, 0.0)
    cpus: list[tuple[str, int]] = []
    for kind in ("containers", "initContainers"):
        for i, c in enumerate(as_list(spec.get(kind), f"spec.{kind}")):
            c = as_mapping(c, f"spec.{kind}[{i}]")  # (read as the requests were: null is {})
            path = f"spec.{kind}[{i}].resources"
            res = as_mapping(c.get("resources"), path)
            lim = resources(res.get("limits"), f"{path}.limits")
            if not all(lim.get(r, 0.0) > 0 for r in _QOS_RESOURCES):
                return None
            req = resources(res.get("requests"), f"{path}.requests")
            for r in _QOS_RESOURCES:
                requests[r] += req.get(r, lim[r])
                limits[r] += lim[r]
            if kind == "containers":
                milli = req.get("cpu", lim["cpu"])
                whole = int(milli // 1000) if milli % 1000 == 0 else 0
                cpus.append((str(c.get("name") or f"#{i}"), whole))
    if not cpus or requests != limits:
        return None
    policy = annotations.get(NUMA_POLICY_ANNOTATION, "")
    policy = "" if policy == "none" else policy
    if not policy and not any(n for _, n in cpus):
        return None
    return NumaAsk(tuple(cpus), policy)


def _pod_terms(value: Any, path: str) -> tuple[PodTerm, ...]:
    out = []
    for i, t in enumerate(as_list(value, path)):
        p = f"{path}[{i}]"
        t = as_mapping(t, p)
        spaces = tuple(
            as_str(n, f"{p}.namespaces") for n in as_list(t.get("namespaces"), f"{p}.namespaces")
        )
        out.append(
            PodTerm(
                parse_label_selector(t.get("labelSelector"), f"{p}.labelSelector"),
                as_str(t.get("topologyKey"), f"{p}.topologyKey", required=True),
                spaces,
            )
        )
    return tuple(out)


def _pod_affinity(spec: Mapping[str, Any]) -> PodAffinity | None:
    """Required podAffinity / podAntiAffinity terms (preferred ones are scores)."""
    affinity = as_mapping(spec.get("affinity"), "spec.affinity")
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    terms = []
    for kind in ("podAffinity", "podAntiAffinity"):
        path = f"spec.affinity.{kind}"
        terms.append(_pod_terms(as_mapping(affinity.get(kind), path).get(req), f"{path}.{req}"))
    if not terms[0] and not terms[1]:
        return None
    return PodAffinity(terms[0], terms[1])


def pod_scheduled_at(status: Mapping[str, Any]) -> float:
    """When the PodScheduled condition turned True (Volcano's cdp plugin reads it)."""
    conditions = status.get("conditions")
    if type(conditions) is list:  # (the usual: a list of dicts, read without checks)
        for i, c in enumerate(conditions):
            if type(c) is not dict:
                break
            if c.get("type") == "PodScheduled" and c.get("status") == "True":
                return timestamp(c.get("lastTransitionTime"), f"status.conditions[{i}]")
        else:
            return 0.0
    for i, c in enumerate(as_list(conditions, "status.conditions")):
        c = as_mapping(c, f"status.conditions[{i}]")
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return timestamp(c.get("lastTransitionTime"), f"status.conditions[{i}]")
    return 0.0


# -- PodGroup ----------------------------------------------------------------------------


@dataclass(slots=True)
class PodGroupRecord:
    namespace: str
    name: str
    min_member: int
    min_task_member: dict[str, int]
    min_resources: dict[str, float] | None
    queue: str
    priority_class: str
    phase: str
    conditions: list[dict]
    creation: float
    annotations: dict[str, str]
    #: ``status.running`` / ``succeeded`` / ``failed`` (what the scheduler last wrote).
    counts: tuple[int, int, int] = (0, 0, 0)
    network_topology: NetworkTopology | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    #: When scheduling of the gang started (coscheduling's ``status.scheduleStartTime``,
    #: seconds since the epoch; None: not said).
    schedule_start: float | None = None
    #: The dialect: "volcano", "coscheduling" or "workload" (see
    #: :mod:`pumice.api.gang_apis`).
    api: str = "volcano"
    #: coscheduling's ``spec.scheduleTimeoutSeconds`` (None: not set), carried only.
    schedule_timeout: float | None = None
    #: Every entry of ``spec.minResources``, quota-style keys included (see
    #: :func:`quota_amounts`); None when the PodGroup has no minResources.
    min_quota: dict[str, float] | None = None

    @property
    def uid(self) -> str:
        """The job's uid (see :func:`job_uid`)."""
        return job_uid(self.api, self.namespace, self.name)


#: The phases a PodGroup status may say.
PODGROUP_PHASES = frozenset({"Pending", "Inqueue", "Running", "Unknown", "Completed"})


def podgroup_status(obj: Mapping[str, Any]) -> tuple[str, list[dict], tuple[int, int, int]]:
    """A PodGroup's status, validated: (phase, conditions, (running, succeeded, failed)).
    Apart from :func:`parse_podgroup` for the status writes that change nothing else."""
    status = as_mapping(obj.get("status"), "status")
    phase = as_str(status.get("phase"), "status.phase") or "Pending"
    if phase not in PODGROUP_PHASES:
        raise InputError(f"unknown phase {shown(phase)}", field="status.phase")
    conditions = [
        dict(as_mapping(c, f"status.conditions[{i}]"))
        for i, c in enumerate(as_list(status.get("conditions"), "status.conditions"))
    ]
    running, succeeded, failed = (
        as_int(status.get(k), f"status.{k}", 0, minimum=0)
        for k in ("running", "succeeded", "failed")
    )
    return phase, conditions, (running, succeeded, failed)


#: The fields of a :class:`PodGroupRecord` that :func:`parse_podgroup` reads from the
#: PodGroup's spec alone (with the default queue): see ``_PODGROUP_SPECS``.
_PODGROUP_SPEC_FIELDS = (
    "min_member",
    "min_task_member",
    "min_resources",
    "min_quota",
    "queue",
    "priority_class",
    "network_topology",
    "sub_groups",
)
#: The dict fields among them, copied for each record.
_PODGROUP_SPEC_DICTS = ("min_task_member", "min_resources", "min_quota")

#: The spec fields of the PodGroups parsed, by their spec's ``marshal`` bytes and the
#: default queue (at most ``_POD_SPECS_KEPT``; cleared when full): the PodGroups of one
#: template share a spec (see ``_POD_SPECS``, kept the same way).
_PODGROUP_SPECS: dict[tuple[bytes, str], dict[str, Any]] = {}


def parse_podgroup(obj: Mapping[str, Any], default_queue: str = DEFAULT_QUEUE) -> PodGroupRecord:
    """A PodGroup's record. The fields read from its spec alone are taken from the last
    PodGroup of the same spec when there was one (see ``_PODGROUP_SPECS``); the rest is
    read as :func:`_parse_podgroup` reads it, in its order (so that a bad PodGroup's
    first error is the same: a spec parsed before raises none)."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    raw = _spec_bytes(spec)
    key = (raw, default_queue) if raw is not None else None
    known = _PODGROUP_SPECS.get(key) if key is not None else None
    if known is None:
        rec = _parse_podgroup(obj, default_queue)
        if key is not None:
            _keep_spec(_PODGROUP_SPECS, key, rec, _PODGROUP_SPEC_FIELDS, _PODGROUP_SPEC_DICTS)
        return rec
    phase, conditions, counts = podgroup_status(obj)
    rec = PodGroupRecord(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=name,
        phase=phase,
        conditions=conditions,
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=as_labels(meta.get("annotations"), "metadata.annotations"),
        counts=counts,
        labels=as_labels(meta.get("labels"), "metadata.labels"),
        **known,
    )
    rec.min_task_member = dict(rec.min_task_member)
    if rec.min_resources is not None:
        rec.min_resources = dict(rec.min_resources)
    if rec.min_quota is not None:
        rec.min_quota = dict(rec.min_quota)
    return rec


def _parse_podgroup(obj: Mapping[str, Any], default_queue: str) -> PodGroupRecord:
    """A PodGroup's record, every field read from ``obj``."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    mtm = {
        _key(k, "spec.minTaskMember"): as_int(
            v, f"spec.minTaskMember.{shown_text(k)}", 0, minimum=0
        )
        for k, v in as_mapping(spec.get("minTaskMember"), "spec.minTaskMember").items()
    }
    phase, conditions, counts = podgroup_status(obj)
    min_res = spec.get("minResources")
    return PodGroupRecord(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=name,
        min_member=as_int(spec.get("minMember"), "spec.minMember", 1, minimum=0),
        min_task_member=mtm,
        min_resources=None if min_res is None else resources(min_res, "spec.minResources"),
        min_quota=None if min_res is None else quota_amounts(min_res, "spec.minResources"),
        queue=as_str(spec.get("queue"), "spec.queue") or default_queue,
        priority_class=as_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        phase=phase,
        conditions=conditions,
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=as_labels(meta.get("annotations"), "metadata.annotations"),
        counts=counts,
        network_topology=parse_network_topology(
            spec.get("networkTopology"), "spec.networkTopology"
        ),
        sub_groups=parse_sub_group_policies(spec.get("subGroupPolicy"), "spec.subGroupPolicy"),
        labels=as_labels(meta.get("labels"), "metadata.labels"),
    )


# -- Queue -------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueRecord:
    name: str
    weight: int
    capability: dict[str, float] | None
    deserved: dict[str, float] | None
    guarantee: dict[str, float]
    reclaimable: bool
    parent: str | None
    state: str
    creation: float
    annotations: dict[str, str]
    priority: int = 0
    affinity: NodeGroupAffinity | None = None


def _group_names(value: Any, path: str) -> tuple[str, ...]:
    return tuple(as_str(v, f"{path}[{i}]") for i, v in enumerate(as_list(value, path)))


def parse_node_group_affinity(value: Any, path: str) -> NodeGroupAffinity | None:
    """A Queue's ``spec.affinity`` (``nodeGroupAffinity`` / ``nodeGroupAntiAffinity``,
    each with required and preferred lists of node group names); None when absent."""
    if value is None:
        return None
    spec = as_mapping(value, path)
    lists: dict[str, tuple[str, ...]] = {}
    for key, prefix in (("nodeGroupAffinity", ""), ("nodeGroupAntiAffinity", "anti_")):
        part = as_mapping(spec.get(key), f"{path}.{key}")
        for kind, name in (("required", "required"), ("preferred", "preferred")):
            field_ = f"{kind}DuringSchedulingIgnoredDuringExecution"
            lists[prefix + name] = _group_names(part.get(field_), f"{path}.{key}.{field_}")
    return NodeGroupAffinity(**lists)


def parse_queue(obj: Mapping[str, Any]) -> QueueRecord:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    cap = spec.get("capability")
    des = spec.get("deserved")
    guarantee = as_mapping(spec.get("guarantee"), "spec.guarantee")
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        raise InputError(
            f"expected true or false, got {shown_text(reclaimable)}", field="spec.reclaimable"
        )
    state = as_str(status.get("state"), "status.state") or "Open"
    if state not in ("Open", "Closed", "Closing", "Unknown"):
        raise InputError(f"unknown queue state {shown(state)}", field="status.state")
    return QueueRecord(
        name=name,
        weight=as_int(spec.get("weight"), "spec.weight", 1, minimum=0),
        capability=None if cap is None else resources(cap, "spec.capability"),
        deserved=None if des is None else resources(des, "spec.deserved"),
        guarantee=resources(guarantee.get("resource"), "spec.guarantee.resource"),
        reclaimable=reclaimable,
        parent=as_str(spec.get("parent"), "spec.parent") or None,
        state=state,
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=as_labels(meta.get("annotations"), "metadata.annotations"),
        priority=as_int(spec.get("priority"), "spec.priority", 0),
        affinity=parse_node_group_affinity(spec.get("affinity"), "spec.affinity"),
    )


# -- PriorityClass -----------------------------------------------------------------------


@dataclass(slots=True)
class PriorityClassRecord:
    name: str
    value: int
    global_default: bool


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClassRecord:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    if obj.get("value") is None:
        raise InputError("is required", field="value")
    value = as_int(obj.get("value"), "value", 0)
    return PriorityClassRecord(name, value, bool(obj.get("globalDefault", False)))
