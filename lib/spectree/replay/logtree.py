"""The logbook's "full tree" policy: what is drafted (and stored) at every position so that replay can score
other policies exactly.

Every expanded node offers its top-K children (all kept and stored). The nodes expanded at the next layer are
the beam — the top-`beam` by joint probability among the children of the previous layer's beam (EAGLE-2's
expansion: with beam = K it is exactly EAGLE-2's top-K per layer; C2T's full trees use K = 10, d_max = 11) —
plus an envelope that keeps static shapes replayable: every node whose path ranks are all < b_env at depth
< d_env (k-ary trees up to b_env × d_env), and the rank-0 chain at every depth.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectree.core.policy import OPTIONAL_FEATURES, Policy, Rows


@dataclass
class LogTree(Policy):
    K: int = 10
    d_max: int = 11
    beam: int = 10
    b_env: int = 2
    d_env: int = 4

    name = "logtree"
    max_nodes = None  # the logbook's tree is as large as its config asks
    features = OPTIONAL_FEATURES  # the logbook stores every feature

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # memory along paths: the largest rank on the path, and whether the node is off the beam (the root is on it)
        cand.set_state("max_rank", np.maximum(cand.parent_state("max_rank"), cand.rank))
        eligible = cand.parent_state("off_beam") == 0  # [c] children of the previous layer's beam
        beam = eligible & cand.top(np.where(eligible, cand.joint, -1.0), self.beam)
        cand.set_state("off_beam", ~beam)
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        max_rank = new.state("max_rank")
        in_env = (max_rank < self.b_env) & (new.depth < self.d_env)
        return (new.state("off_beam") == 0) | in_env | (max_rank == 0)
