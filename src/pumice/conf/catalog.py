"""Volcano's scheduler configuration vocabulary, as data.

Every name Volcano's current scheduler reads from its configuration: the top-level keys
(``SchedulerConfiguration``), the enable flags of a plugin entry (``PluginOption``), the
plugins and actions it registers and the argument keys each of them reads (from
``pkg/scheduler/conf``, ``pkg/scheduler/plugins/*`` and ``pkg/scheduler/actions/*``).

The loader (:mod:`pumice.conf.check`) tells three cases apart with it: a name pumice
implements is used; a name in this catalog that pumice does not implement loads with a
warning saying what its absence means for the decisions (the ``meaning`` texts below);
any other name is a misspelling and is refused with the closest known name.

Argument keys ending in ``*`` are prefixes (``binpack.resources.*`` stands for
``binpack.resources.nvidia.com/gpu`` and the like). A plugin whose ``keys`` is None
takes free-form arguments that are not checked.

Keep the texts true: they are what a user reads when pumice ignores part of a
configuration that Volcano would act on.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: What an argument key pumice does not read means, when the catalog says nothing more.
IGNORED = "pumice does not read it; the plugin behaves as with Volcano's default"
#: A speed option of Volcano's that changes no decision.
_ERROR_CACHE = (
    "a speed option in Volcano (predicate failures cached per pod template); pumice "
    "computes each pod placement's node mask once per cycle anyway, decisions are the same"
)
_NO_DRA = (
    "devices allocated through ResourceClaims are not counted against queue capacity: "
    "queues are measured by their pods' resource requests"
)
_NO_CAPACITY_SCORE = (
    "pumice does not score nodes by the storage capacity left for a claim (kube-scheduler's "
    "StorageCapacityScoring, off by default): it has no effect"
)
_ALWAYS = "pumice always checks {what}, as Volcano does with the default true"
_NO_NPU = "pumice does not share Ascend NPUs: vNPU requests are not fitted card by card "
_NO_NPU += "and no NPU is assigned, such pods are placed on their resource requests alone"
_NO_DEVICE_CONFIG = "pumice reads no device ConfigMap: vGPUs keep Volcano's default "
_NO_DEVICE_CONFIG += "resource names and are shared the hami-core way (no MIG geometries)"


@dataclass(frozen=True, slots=True)
class Entry:
    """A Volcano plugin or action: its argument keys and, for the ones pumice lacks,
    what their absence means."""

    name: str
    #: Argument key (or ``prefix*``) -> what it means that pumice does not read it
    #: ("" for the generic :data:`IGNORED`). None: free-form arguments, not checked.
    keys: Mapping[str, str] | None = field(default_factory=dict)
    #: What it means that pumice does not implement this plugin or action.
    meaning: str = ""

    def key_meaning(self, key: str) -> str | None:
        """The text for ``key`` (a Volcano key of this entry), or None if it is not one."""
        if self.keys is None:
            return IGNORED
        found = match_key(key, self.keys)
        if found is None:
            return None
        return self.keys[found] or IGNORED


@dataclass(frozen=True, slots=True)
class Flag:
    """One of Volcano's per-plugin enable flags (a key of a tier's plugin entry)."""

    key: str
    #: pumice's hooks (rows of :data:`pumice.framework.hooks.HOOKS`, or ``hierarchy``)
    #: the flag gates; empty when pumice has no counterpart.
    hooks: tuple[str, ...]
    #: Why the flag means nothing to pumice (when ``hooks`` is empty).
    meaning: str = ""
    #: The value a missing flag has.
    default: bool = True


def _entries(*entries: Entry) -> dict[str, Entry]:
    return {e.name: e for e in entries}


#: Every plugin Volcano registers (``pkg/scheduler/plugins/factory.go``).
PLUGINS: dict[str, Entry] = _entries(
    Entry(
        "binpack",
        {
            "binpack.weight": "",
            "binpack.cpu": "",
            "binpack.memory": "",
            "binpack.resources": "",
            "binpack.resources.*": "",
        },
    ),
    Entry(
        "capacity",
        {
            "ancestorReclaimLevel": "",
            "capacity.DynamicResourceAllocationEnable": _NO_DRA,
            "capacity.DRAConsumableCapacityEnable": _NO_DRA,
        },
    ),
    Entry("cdp"),
    Entry("conformance"),
    Entry(
        "deviceshare",
        {
            "deviceshare.GPUSharingEnable": "",
            "deviceshare.NodeLockEnable": "pumice takes no node lock before a bind (the "
            "lock annotation device plugins wait on is not written); cards are still "
            "chosen and written on the pod",
            "deviceshare.GPUNumberEnable": "",
            "deviceshare.VGPUEnable": "",
            "deviceshare.AscendMindClusterVNPUEnable": _NO_NPU,
            "deviceshare.AscendHAMiVNPUEnable": _NO_NPU,
            "deviceshare.SchedulePolicy": "",
            "deviceshare.ScheduleWeight": "",
            "deviceshare.KnownGeometriesCMName": _NO_DEVICE_CONFIG,
            "deviceshare.KnownGeometriesCMNamespace": _NO_DEVICE_CONFIG,
            "deviceshare.GPUExclusiveRules": "pumice has no exclusivity rules: pods "
            "matching a rule may share a card with each other",
        },
    ),
    Entry("drf"),
    Entry(
        "extender",
        {
            "extender.urlPrefix": "",
            "extender.httpTimeout": "",
            "extender.onSessionOpenVerb": "",
            "extender.onSessionCloseVerb": "",
            "extender.predicateVerb": "",
            "extender.prioritizeVerb": "",
            "extender.preemptableVerb": "",
            "extender.reclaimableVerb": "",
            "extender.queueOverusedVerb": "",
            "extender.jobEnqueueableVerb": "",
            "extender.jobEnqueuedVerb": "",
            "extender.jobReadyVerb": "",
            "extender.allocateFuncVerb": "",
            "extender.deallocateFuncVerb": "",
            "extender.ignorable": "",
            "extender.managedResources": "",
        },
    ),
    Entry("gang"),
    Entry(
        "network-topology-aware",
        {
            "weight": "",
            "hypernode.binpack.cpu": "",
            "hypernode.binpack.memory": "",
            "hypernode.binpack.resources": "",
            "hypernode.binpack.resources.*": "",
            "hypernode.binpack.normal-pod.enable": "",
            "hypernode.binpack.normal-pod.fading": "",
            "hypernode.gradient.evict.max-hypernodes": "",
        },
    ),
    Entry(
        "nodegroup",
        {"strict": "", "enablePreferredOrder": ""},
    ),
    Entry(
        "nodeorder",
        {
            "nodeaffinity.weight": "",
            "podaffinity.weight": "pumice scores no preferred inter-pod affinity: "
            "the weight has no effect",
            "leastrequested.weight": "",
            "balancedresource.weight": "",
            "mostrequested.weight": "",
            "tainttoleration.weight": "",
            "imagelocality.weight": "pumice knows no container images on nodes: "
            "no image locality score is added, the weight has no effect",
            "podtopologyspread.weight": "",
        },
    ),
    Entry("numa-aware", {"weight": ""}),
    Entry("overcommit", {"overcommit-factor": ""}),
    Entry("pdb"),
    Entry(
        "predicates",
        {
            "predicate.NodeAffinityEnable": _ALWAYS.format(
                what="nodeSelector and required node affinity"
            ),
            "predicate.NodePortsEnable": _ALWAYS.format(what="host ports"),
            "predicate.TaintTolerationEnable": _ALWAYS.format(
                what="NoSchedule and NoExecute taints"
            ),
            "predicate.PodAffinityEnable": _ALWAYS.format(
                what="required inter-pod affinity and anti-affinity"
            ),
            "predicate.NodeVolumeLimitsEnable": "",
            "predicate.VolumeZoneEnable": "",
            "predicate.VolumeBindingEnable": "",
            "volumebinding.bindTimeoutSeconds": "",
            "volumebinding.shape": _NO_CAPACITY_SCORE,
            "volumebinding.weight": _NO_CAPACITY_SCORE,
            "predicate.PodTopologySpreadEnable": _ALWAYS.format(
                what="hard pod topology spread constraints (DoNotSchedule)"
            ),
            "predicate.DynamicResourceAllocationEnable": "",
            "dynamicresources.filterTimeoutSeconds": "pumice's device search stops after a "
            "number of devices tried (the claim is then reported too complex), not after a "
            "time: it has no effect",
            "predicate.CacheEnable": _ERROR_CACHE,
            # Older Volcano releases' keys, still in its documentation; its current
            # predicates plugin ignores them as well (GPU sharing moved to deviceshare).
            "predicate.GPUSharingEnable": "an older Volcano key (GPU sharing is now the "
            "deviceshare plugin's): the predicates plugin does not check shared GPU "
            "requests card by card; enable deviceshare.GPUSharingEnable instead",
            "predicate.GPUNumberEnable": "an older Volcano key (now the deviceshare "
            "plugin's): the predicates plugin does not check GPU number requests card by "
            "card; enable deviceshare.GPUNumberEnable instead",
            "predicate.ProportionalEnable": "an older Volcano key: no proportional "
            "cpu/memory-per-GPU check is made",
            "predicate.resources": "an older Volcano key: no proportional check is made",
            "predicate.resources.*": "an older Volcano key: no proportional check is made",
        },
    ),
    Entry("priority"),
    Entry("proportion"),
    Entry(
        "rescheduling",
        {
            "interval": "",
            "strategies": "",
            "metricsPeriod": "pumice's rescheduling works on what the pods request, not on "
            "measured load, so the metrics period changes nothing",
        },
    ),
    Entry(
        "resource-strategy-fit",
        {
            "resourceStrategyFitWeight": "",
            "resources": "",
            "sra": "",
            "sra.weight": "Volcano does not read it either: the SRA weight is the weight "
            "key of the sra section",
            "proportional": "",
        },
    ),
    Entry("resourcequota"),
    Entry("sla", {"sla-waiting-time": ""}),
    Entry(
        "task-topology",
        {"task-topology.weight": ""},
    ),
    Entry("tdm", {"tdm.revocable-zone.*": "", "tdm.evict.period": ""}),
    Entry(
        "usage",
        {
            "usage.weight": "",
            "cpu.weight": "",
            "memory.weight": "",
            "thresholds": "",
            "estimator": "",
        },
    ),
)

#: Every action Volcano registers (``pkg/scheduler/actions/factory.go``).
ACTIONS: dict[str, Entry] = _entries(
    Entry("enqueue"),
    Entry("allocate", {"predicateErrorCacheEnable": _ERROR_CACHE}),
    Entry("backfill", {"predicateErrorCacheEnable": _ERROR_CACHE}),
    Entry(
        "preempt",
        {
            "predicateErrorCacheEnable": _ERROR_CACHE,
            "enableTopologyAwarePreemption": "",
            "topologyAwarePreemptWorkerNum": "the number of Volcano's parallel search "
            "workers; pumice searches in one thread, the victims are the same",
            "minCandidateNodesPercentage": "",
            "minCandidateNodesAbsolute": "",
            "maxCandidateNodesAbsolute": "",
        },
    ),
    Entry("reclaim", {"predicateErrorCacheEnable": _ERROR_CACHE}),
    Entry("gangpreempt", {"maxDomains": "", "allowWholeBundle": ""}),
    Entry("gangreclaim", {"maxDomains": "", "allowWholeBundle": ""}),
    Entry("shuffle"),
)

#: ``configurations`` entries Volcano reads that name no action.
OTHER_CONFIGURATIONS: dict[str, Entry] = _entries(
    Entry(
        "init-params",
        None,
        "the deviceshare plugin's Ascend vNPU parameters; pumice does not share Ascend "
        "NPUs, so nothing reads them",
    ),
)


def _flags(*flags: Flag) -> dict[str, Flag]:
    return {f.key: f for f in flags}


#: Volcano's enable flags (``PluginOption`` in ``pkg/scheduler/conf/scheduler_conf.go``),
#: in its YAML spelling, with the hooks each gates in pumice.
FLAGS: dict[str, Flag] = _flags(
    Flag("enableJobOrder", ("job_order",)),
    Flag("enableHierarchy", ("hierarchy",), default=False),
    Flag("enableJobReady", ("job_ready",)),
    Flag("enableJobPipelined", ("job_pipelined",)),
    Flag("enableTaskOrder", ("task_order",)),
    Flag("enablePreemptable", ("preemptable",)),
    Flag("enableReclaimable", ("reclaimable",)),
    Flag("enablePreemptive", ("preemptive",)),
    Flag("enableQueueOrder", ("queue_order",)),
    Flag(
        "enabledClusterOrder",
        (),
        "pumice schedules a single cluster: there is no cluster order to gate",
        default=False,
    ),
    Flag("enablePredicate", ("predicate",)),
    Flag(
        "enableBestNode",
        (),
        "no plugin of pumice picks the best node itself: the highest summed node-order "
        "score wins, ties going to the first node by name",
    ),
    Flag("enableNodeOrder", ("node_order",)),
    Flag(
        "enableTargetJob",
        (),
        "pumice elects no target job (Volcano's elect and reserve actions are gone too)",
    ),
    Flag("enableReservedNodes", (), "pumice reserves no nodes for a target job"),
    # Volcano gates both the enqueueable vote and the enqueued notice with this flag.
    Flag("enableJobEnqueued", ("job_enqueueable", "job_enqueued")),
    Flag("enabledVictim", ("victim_tasks",)),
    Flag("enableJobStarving", ("job_starving",)),
    Flag("enabledOverused", ("overused",)),
    Flag("enabledAllocatable", ("allocatable",)),
    Flag("enabledHyperNodeOrder", ("hypernode_order",)),
    Flag("enabledSubJobReady", ("subjob_ready",)),
    Flag("enabledSubJobPipelined", ("subjob_pipelined",)),
    Flag("enabledSubJobOrder", ("subjob_order",)),
    Flag("enabledHyperNodeGradient", ("hypernode_gradient",)),
)

#: Spellings earlier pumice releases accepted that are not Volcano's -> Volcano's key.
#: Still read (as the right key), with a warning: Volcano ignores these spellings.
MISSPELT_FLAGS: dict[str, str] = {
    "EnabledClusterOrder": "enabledClusterOrder",
    "enableSubJobReady": "enabledSubJobReady",
    "enableSubJobPipelined": "enabledSubJobPipelined",
    "enableSubJobOrder": "enabledSubJobOrder",
}

#: Flags older Volcano releases had and its current configuration no longer reads.
RETIRED_FLAGS: dict[str, Flag] = _flags(
    Flag(
        "enableNamespaceOrder",
        ("namespace_order",),
        "no longer a key of Volcano's configuration (Volcano ignores it), and no plugin "
        "of pumice orders namespaces: it has no effect",
    ),
)

#: The top-level keys of ``SchedulerConfiguration``.
TOP_LEVEL = ("actions", "tiers", "configurations", "metrics")
#: The keys of the ``metrics`` section (Volcano's ``metrics``: a string map handed to its
#: node-load sources), and the source types it may name.
METRICS_KEYS = (
    "type",
    "address",
    "interval",
    "tls.insecureSkipVerify",
    "elasticsearch.index",
    "elasticsearch.hostnameFieldName",
    "elasticsearch.username",
    "elasticsearch.password",
)
METRICS_PROMETHEUS = "prometheus"
METRICS_TYPES = ("prometheus", "prometheus_adaptor", "elasticsearch")
#: What a ``metrics`` source type pumice does not query means.
METRICS_MEANING = (
    "pumice queries only a Prometheus source itself ({type} is not queried): nodes' "
    "load comes from the cluster's NodeMetrics (metrics.k8s.io) alone, if it serves them"
)
#: The keys of a tier's plugin entry besides the enable flags.
PLUGIN_ENTRY_KEYS = ("name", "arguments")


def match_key(key: str, patterns: Iterable[str]) -> str | None:
    """The pattern of ``patterns`` that ``key`` matches (exactly, or a ``prefix*`` with a
    non-empty rest), or None."""
    for p in patterns:
        if p.endswith("*"):
            prefix = p[:-1]
            if key.startswith(prefix) and len(key) > len(prefix):
                return p
        elif key == p:
            return p
    return None


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` was most likely meant to be (difflib), or None.

    A candidate equal but for case wins; a prefix pattern stands for its prefix."""
    names = {c[:-1] if c.endswith("*") else c: c for c in candidates}
    for name in names:
        if name.lower() == word.lower():
            return name
    found = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    if not found:
        return None
    best = found[0]
    return best + "<name>" if names[best].endswith("*") else best


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean X?)`` or ``""``."""
    guess = closest(word, candidates)
    return f" (did you mean {guess}?)" if guess else ""
