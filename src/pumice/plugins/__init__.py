"""Scheduling policies. Each module holds one plugin; :func:`default_registry` lists them."""

from __future__ import annotations

from pumice.framework.plugin import Registry


def default_registry() -> Registry:
    """Every plugin pumice ships, by its Volcano name."""
    from pumice.plugins.binpack import BinpackPlugin
    from pumice.plugins.capacity import CapacityPlugin
    from pumice.plugins.cdp import CdpPlugin
    from pumice.plugins.conformance import ConformancePlugin
    from pumice.plugins.deviceshare import DeviceSharePlugin
    from pumice.plugins.drf import DrfPlugin
    from pumice.plugins.extender import ExtenderPlugin
    from pumice.plugins.gang import GangPlugin
    from pumice.plugins.network_topology import NetworkTopologyPlugin
    from pumice.plugins.nodegroup import NodeGroupPlugin
    from pumice.plugins.nodeorder import NodeOrderPlugin
    from pumice.plugins.numa_aware import NumaAwarePlugin
    from pumice.plugins.overcommit import OvercommitPlugin
    from pumice.plugins.pdb import PdbPlugin
    from pumice.plugins.predicates import PredicatesPlugin
    from pumice.plugins.priority import PriorityPlugin
    from pumice.plugins.proportion import ProportionPlugin
    from pumice.plugins.rescheduling import ReschedulingPlugin
    from pumice.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
    from pumice.plugins.resourcequota import ResourceQuotaPlugin
    from pumice.plugins.sla import SlaPlugin
    from pumice.plugins.task_topology import TaskTopologyPlugin
    from pumice.plugins.tdm import TdmPlugin
    from pumice.plugins.usage import UsagePlugin

    return Registry(
        "plugin",
        [
            PriorityPlugin,
            GangPlugin,
            ConformancePlugin,
            DrfPlugin,
            ProportionPlugin,
            OvercommitPlugin,
            PredicatesPlugin,
            NodeOrderPlugin,
            BinpackPlugin,
            CapacityPlugin,
            PdbPlugin,
            CdpPlugin,
            SlaPlugin,
            NetworkTopologyPlugin,
            ReschedulingPlugin,
            NodeGroupPlugin,
            TaskTopologyPlugin,
            ResourceStrategyFitPlugin,
            DeviceSharePlugin,
            TdmPlugin,
            UsagePlugin,
            ExtenderPlugin,
            NumaAwarePlugin,
            ResourceQuotaPlugin,
        ],
    )
