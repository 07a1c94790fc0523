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

Two narrower shapes log only what one reader needs (`shape`): "path" expands the nodes on the target's greedy
path (`path`: the continuation after the root, set per position) and the rank-0 chain, so every draft token a
greedy verifier could examine in any tree of K and d_max is stored, and nothing else (notebooks 04–07 read only
those); "c2t" expands only C2T's tree at `c2t_beta` (the C2T settings of notebook 02 replay on it, nothing else).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from spectree.core.errors import SpectreeError
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
    shape: str = "full"  # "full": every beam above; "path": the greedy path and the rank-0 chain; "c2t": C2T's tree
    path: Optional[Sequence[int]] = spec_field(default=None)  # "path": the greedy tokens after the root [≥ d_max]

    name = "logtree"
    SHAPES = ("full", "path", "c2t")

    def __post_init__(self):
        super().__post_init__()
        if self.shape not in self.SHAPES:
            raise SpectreeError(f"logtree: shape must be one of {', '.join(self.SHAPES)}, got {self.shape!r}")
        if self.shape == "c2t" and self.c2t_model is None:
            raise SpectreeError("logtree: shape 'c2t' needs a C2T classifier")
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
        if self.shape == "path":  # off the greedy path: the parent is off it, or the token is not the path's
            if self.path is None or len(self.path) < self.d_max:
                raise SpectreeError(f"logtree: shape 'path' needs the {self.d_max} greedy tokens after the root")
            on = (cand.parent_state("off_path") == 0) & (cand.tokens == np.asarray(self.path)[cand.depth - 1])
            cand.set_state("off_path", ~on)
        if self.c2t_model is not None:  # off C2T's tree at c2t_beta: the parent is off it, or C ≤ c2t_beta
            passes = self.c2t_model.confidence(cand).numpy() > self.c2t_beta
            cand.set_state("off_c2t", ~((cand.parent_state("off_c2t") == 0) & passes))
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        max_rank = new.state("max_rank")
        if self.shape == "path":
            return (new.state("off_path") == 0) | (max_rank == 0)
        if self.shape == "c2t":
            return new.state("off_c2t") == 0
        in_env = (max_rank < self.b_env) & (new.depth < self.d_env)
        beams = (new.state("off_beam") == 0) | (new.state("off_k") == 0)
        if self.c2t_model is not None:
            beams |= new.state("off_c2t") == 0
        return beams | in_env | (max_rank == 0) | (new.state("tail_rank") == 0)
