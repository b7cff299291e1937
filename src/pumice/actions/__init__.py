"""What a cycle does, in order. Each module holds one action."""

from __future__ import annotations

from pumice.framework.plugin import Registry


def default_registry() -> Registry:
    """Every action pumice ships, by its Volcano name."""
    from pumice.actions.allocate import AllocateAction
    from pumice.actions.backfill import BackfillAction
    from pumice.actions.enqueue import EnqueueAction
    from pumice.actions.gangpreempt import GangPreemptAction
    from pumice.actions.gangreclaim import GangReclaimAction
    from pumice.actions.preempt import PreemptAction
    from pumice.actions.reclaim import ReclaimAction
    from pumice.actions.shuffle import ShuffleAction

    return Registry(
        "action",
        [
            EnqueueAction,
            AllocateAction,
            BackfillAction,
            PreemptAction,
            ReclaimAction,
            GangPreemptAction,
            GangReclaimAction,
            ShuffleAction,
        ],
    )
