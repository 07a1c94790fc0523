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

"dyspec" logs DySpec's own trees (`budget_policies`): it runs each of the given DySpec policies (`ghosts`: Alg. 1 at
budget m, capped at K or not, and Alg. 2 at t = 1/m; with an acceptance vector, Sequoia's trees of those budgets,
`sequoia_union`) alongside, each on the nodes it drafted itself, and stores the children each selects plus every
expanded node's first child, and expands what any of them expands. A DySpec
policy's slots fall with their rank among siblings, so what it selects of a node is a prefix of its children, and
a child it rejected lies below the m-th best slot value, whose absence leaves that value unchanged: each ghost (at
any depth up to d_max) replays exactly, at a width (K = m: Alg. 1 uncapped) the full shape could not store.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import OPTIONAL_FEATURES, Policy, Rows, spec_field
from spectree.strategies.c2t import C2TClassifier
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.sequoia import Sequoia
from spectree.strategies.static import StaticShape


def budget_policies(budgets: Sequence[int], cap: int, d_max: int) -> list[Policy]:
    """DySpec at each budget m (DySpec Tables 1–2): Alg. 1 uncapped (K = m: no node can keep more than m children),
    Alg. 1 with at most `cap` children a node (live drafting's guard) and Alg. 2 at t = 1/m (capped): what
    notebook 02 scores and the "dyspec" shape logs."""
    policies = [p for m in budgets for p in (DySpec(m=m, K=m, d_max=d_max), DySpec(m=m, K=min(cap, m), d_max=d_max),
                                             DySpecThreshold(t=round(1 / m, 4), K=cap, d_max=d_max))]
    return list({p.spec: p for p in policies}.values())  # at m ≤ cap the capped DySpec is the uncapped one


def sequoia_p(acceptance: Sequence[float]) -> str:
    """A positional acceptance vector as Sequoia's spec writes it ('0.4282/0.117/…')."""
    return "/".join(f"{p:.4g}" for p in acceptance)


def sequoia_union(budgets: Sequence[int], p: str) -> StaticShape:
    """One static shape holding Sequoia's trees of every budget for acceptance vector `p`: logged beside DySpec's,
    it makes each of them replay (Sequoia's DP gives a node's children a prefix of the ranks, so their union does)."""
    return StaticShape(shape=frozenset().union(*(Sequoia(n=m, p=p).shape for m in budgets)))


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
    ghosts: tuple = spec_field(default=())  # "dyspec": the DySpec policies whose trees are logged

    name = "logtree"
    SHAPES = ("full", "path", "c2t", "dyspec")

    def __post_init__(self):
        super().__post_init__()
        if self.shape not in self.SHAPES:
            raise SpectreeError(f"logtree: shape must be one of {', '.join(self.SHAPES)}, got {self.shape!r}")
        if self.shape == "c2t" and self.c2t_model is None:
            raise SpectreeError("logtree: shape 'c2t' needs a C2T classifier")
        if self.shape == "dyspec" and (not self.ghosts or max(g.K for g in self.ghosts) > self.K):
            raise SpectreeError(f"logtree: shape 'dyspec' needs DySpec policies of K ≤ {self.K}")
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
        if self.shape == "dyspec":
            return self._ghosts_select(cand, tree)
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        max_rank = new.state("max_rank")
        if self.shape == "path":
            return (new.state("off_path") == 0) | (max_rank == 0)
        if self.shape == "c2t":
            return new.state("off_c2t") == 0
        if self.shape == "dyspec":
            return self._ghosts_expand(new, tree)
        in_env = (max_rank < self.b_env) & (new.depth < self.d_env)
        beams = (new.state("off_beam") == 0) | (new.state("off_k") == 0)
        if self.c2t_model is not None:
            beams |= new.state("off_c2t") == 0
        return beams | in_env | (max_rank == 0) | (new.state("tail_rank") == 0)

    # "dyspec": each ghost j grows its own tree inside the logged one; state f"out{j}" is 1 on nodes it did not
    # draft, f"shut{j}" on nodes it did not expand (0 at the root: drafted and expanded)
    def _ghosts_select(self, cand: Rows, tree: Rows) -> np.ndarray:
        stored = cand.rank == 0  # an expanded node's first child: replay sees it was expanded
        for j, ghost in enumerate(self.ghosts):
            offered = (cand.parent_state(f"shut{j}") == 0) & (cand.rank < ghost.K)  # [c] what ghost j is offered
            keep = np.zeros(len(cand), dtype=bool)
            if offered.any():
                keep[offered] = ghost.select(cand.subset(offered), tree.subset(tree.state(f"out{j}") == 0))
            cand.set_state(f"out{j}", (~keep).astype(np.int64))
            stored |= keep
        return stored

    def _ghosts_expand(self, new: Rows, tree: Rows) -> np.ndarray:
        expand = np.zeros(len(new), dtype=bool)
        for j, ghost in enumerate(self.ghosts):
            mine = new.state(f"out{j}") == 0
            grows = np.zeros(len(new), dtype=bool)
            if mine.any():
                grows[mine] = ghost.expand(new.subset(mine), tree.subset(tree.state(f"out{j}") == 0))
            new.set_state(f"shut{j}", (~grows).astype(np.int64))
            expand |= grows
        return expand
