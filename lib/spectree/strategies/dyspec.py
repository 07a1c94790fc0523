"""DySpec (Xiong et al.): grow the tree where the estimated acceptance value is highest.

With greedy drafting the value of a node is its joint draft probability P (the product of the p along its path),
an estimate of the chance the target accepts the whole path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from spectree.core.groups import kth_largest
from spectree.core.policy import Policy, Rows


@dataclass
class DySpec(Policy):
    """Alg. 1 with budget m: the m nodes of largest value, the set a global max-heap pops (values shrink along
    paths, so every ancestor of a chosen node is chosen first); K children offered per node."""

    m: int = 64  # draft tokens per tree
    K: int = 8
    d_max: int = 11

    name = "dyspec"
    features = frozenset({"draft_prob"})
    size_params = ("m", "K")

    def layer_cap(self) -> int:
        return max(self.m, 1)  # a layer keeps at most the m best values seen (ties aside)

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # a candidate can only end up among the m best nodes if it beats the m-th best value seen so far; a value
        # of 0 (a draft probability that underflowed: a sharp draft's other children) never does, even while fewer
        # than m values are positive — else every such tie would pass and the tree would grow without bound
        drafted = tree.depth > 0
        bar = kth_largest(np.concatenate([tree.tree[drafted], cand.tree]),
                          np.concatenate([tree.joint[drafted], cand.joint]), self.m, cand.n_trees)  # [trees]
        return (cand.joint >= bar[cand.tree]) & (cand.joint > 0)

    def finalize(self, tree: Rows) -> np.ndarray:
        return tree.top(tree.joint, self.m + 1)


@dataclass
class DySpecThreshold(Policy):
    """Alg. 2: layer by layer, keep (and expand) every child whose value P is at least t."""

    t: float = 0.05  # expand while the value is at least t
    K: int = 8
    d_max: int = 11

    name = "dyspec_threshold"
    features = frozenset({"draft_prob"})
    probabilities = ("t",)

    def layer_cap(self) -> Optional[int]:
        return int(1 / self.t) if self.t > 0 else None  # the joint P of one layer's nodes sums to at most 1

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return cand.joint >= self.t
