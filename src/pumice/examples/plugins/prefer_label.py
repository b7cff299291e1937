"""prefer-label: place pods on nodes that carry a label, where they fit.

A node-order plugin of the kind a cluster owner writes: prefer reserved or on-premises
nodes to spot or burst ones, a newer GPU generation to an older one, a rack to the rest.
The filter is untouched (a pod still goes anywhere it fits when no preferred node has
room); among the nodes that fit, every node with the label scores ``weight * 100`` more.

Arguments (in the plugin's entry of a tier)::

    - name: prefer-label
      arguments:
        label: pool          # the node label's key (required)
        value: reserved      # the value it must have (default: any value)
        weight: 10           # default 10: ahead of nodeorder's and binpack's scores

Load it with ``--plugins-dir src/pumice/examples/plugins`` (every mode takes it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pumice.conf.arguments import Arguments
from pumice.errors import InputError

if TYPE_CHECKING:
    from pumice.api.task import TaskInfo
    from pumice.framework.session import Session

MAX_SCORE = 100.0


class PreferLabelPlugin:
    name = "prefer-label"

    def __init__(self, arguments: Arguments) -> None:
        # Read and check the arguments here: pumice builds every configured plugin once
        # at start, so a bad argument stops the start instead of a cycle.
        self.label = arguments.get_str("label", "")
        if not self.label:
            raise InputError(
                "is required: the key of the node label to prefer",
                obj=f"plugin {self.name}",
                field="arguments.label",
            )
        self.value: str | None = arguments.get_str("value", "") or None
        self.weight = arguments.get_float("weight", 10.0)
        if self.weight < 0:
            raise InputError(
                f"must be >= 0, got {self.weight:g}",
                obj=f"plugin {self.name}",
                field="arguments.weight",
            )

    def on_session_open(self, session: Session) -> None:
        # Node labels do not change within a session: one score per node, computed once.
        values, present = session.nodes.labels.column(self.label)
        match = present if self.value is None else present & (values == self.value)
        bonus = np.where(match, self.weight * MAX_SCORE, 0.0)
        session.on("node_order", self.name, LabelScore(bonus))


class LabelScore:
    """The ``node_order`` function: ``score(task, candidates) -> scores``.

    It also offers the separable form (``context``, ``rows``, ``one``) that allocate's
    fast path asks every node-order function for; a plain function works too, but then
    allocate scores every candidate node for every task (same decisions, slower)."""

    def __init__(self, bonus: np.ndarray) -> None:
        self.bonus = bonus

    def __call__(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        return self.bonus[cand]

    def context(self, task: TaskInfo, cand: np.ndarray) -> None:
        return None  # a node's score does not depend on the other candidates

    def rows(self, task: TaskInfo, rows: np.ndarray, _ctx: None) -> np.ndarray:
        return self.bonus[rows]

    def one(self, task: TaskInfo, i: int, _ctx: None) -> float:
        return float(self.bonus[i])


#: What pumice loads from this file.
plugins = [PreferLabelPlugin]
