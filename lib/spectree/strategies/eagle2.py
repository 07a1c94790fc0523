"""EAGLE-2 (Li et al. 2024): expand the top-K nodes of each layer by joint probability, then rerank every
drafted node by joint probability and keep the top N."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectree.core.policy import Policy, Rows


@dataclass
class Eagle2(Policy):
    """EAGLE-2's dynamic tree: K children offered per node, the top K of each layer by joint probability P kept
    (and expanded), depth d_max; finally the top N drafted nodes by P (C2T's baseline, K = 10, d_max = 6)."""

    K: int = 10  # children offered per node; nodes kept per layer
    d_max: int = 6
    N: int = 50  # draft tokens kept after reranking

    name = "eagle2"
    features = frozenset({"draft_prob"})
    fixed_size = True  # greedy: every layer keeps and expands K nodes, K children each

    def layer_cap(self) -> int:
        return self.K

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return cand.top(cand.joint, self.K)  # [c] the K likeliest children of this layer, per tree

    def finalize(self, tree: Rows) -> np.ndarray:
        return tree.top(tree.joint, self.N + 1)  # rerank: the top N by P, plus the root (P = 1)
