"""The logbook's "full tree" policy: what is drafted (and stored) at every position so that replay can score
other policies exactly.

Every expanded node offers its top-K children (all kept and stored). The nodes expanded at the next layer are
the beam — the top-`beam` by joint probability among the children of the previous layer's beam (the nodes DySpec
and PCT expand lie there while there are at most `beam` per layer) — and EAGLE-2's own expansion at K, the top-K
among the children of its previous top-K (so EAGLE-2 with the logbook's K always replays; C2T's full trees use
K = 10, d_max = 11), plus an envelope that keeps static shapes replayable: every node whose path ranks are all
< b_env at depth < d_env (k-ary trees up to b_env × d_env), the rank-0 chain at every depth (CAPE's top-1
expansion, chains) and the rank-0 continuation of every root child (SpecInfer-style sequences of up to K).

C2T keeps nodes by its classifier's confidence F(P, H, d), which is not the joint's order: its kept nodes can lie
off every beam above (issue 45: most C2T settings of notebook 02 did not replay). With a classifier (`c2t_model`)
the logbook also expands C2T's own tree at `c2t_beta` without second pruning — every node whose confidence
exceeds c2t_beta and whose parent's does. A node's confidence reads only its own path, so C2T at any β ≥ c2t_beta,
any topk and any K ≤ the logbook's keeps a subset of that tree: all of them replay.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from spectree.core.policy import OPTIONAL_FEATURES, Policy, Rows, spec_field
from spectree.strategies.c2t import C2TClassifier


@dataclass
class LogTree(Policy):
    K: int = 10
    d_max: int = 11
    beam: int = 10
    b_env: int = 2
    d_env: int = 4
    c2t_beta: float = 1.0  # with c2t_model: C2T's tree at this β is expanded too (1.0: no node passes)
    c2t_model: Optional[C2TClassifier] = spec_field(default=None)

    name = "logtree"
    max_nodes = None  # the logbook's tree is as large as its config asks
    features = OPTIONAL_FEATURES  # the logbook stores every feature

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # memory along paths: the largest rank on the path (and below the root's child), whether the node is off the
        # beam and off EAGLE-2's top-K beam (the root is on both)
        cand.set_state("max_rank", np.maximum(cand.parent_state("max_rank"), cand.rank))
        cand.set_state("tail_rank", np.where(cand.depth > 1, np.maximum(cand.parent_state("tail_rank"), cand.rank), 0))
        for state, width in (("off_beam", self.beam), ("off_k", self.K)):
            eligible = cand.parent_state(state) == 0  # [c] children of the previous layer's beam
            cand.set_state(state, ~(eligible & cand.top(np.where(eligible, cand.joint, -1.0), width)))
        if self.c2t_model is not None:  # off C2T's tree at c2t_beta: the parent is off it, or C ≤ c2t_beta
            passes = self.c2t_model.confidence(cand).numpy() > self.c2t_beta
            cand.set_state("off_c2t", ~((cand.parent_state("off_c2t") == 0) & passes))
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        max_rank = new.state("max_rank")
        in_env = (max_rank < self.b_env) & (new.depth < self.d_env)
        beams = (new.state("off_beam") == 0) | (new.state("off_k") == 0)
        if self.c2t_model is not None:
            beams |= new.state("off_c2t") == 0
        return beams | in_env | (max_rank == 0) | (new.state("tail_rank") == 0)
