"""Confidence-driven trees of the EDD paper: PCT (its method) and CAPE (its baseline)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes

CAPE_BOUNDS = torch.tensor([0.3, 0.6, 0.8])  # confidence buckets (0, .3], (.3, .6], (.6, .8], (.8, 1]
CAPE_WIDTHS = torch.tensor([7, 5, 3, 1])


@dataclass
class PCTPolicy(Policy):
    ratio: float = 0.1  # s_d / s_t: a drafting step pays off only if P(accept the path) exceeds it
    leaf_min: float = 0.01  # finally drop leaves whose path confidence is below this

    name = "pct"
    features = frozenset()
    probabilities = ("ratio", "leaf_min")

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return torch.ones(len(cand), dtype=torch.bool)

    def expand(self, tree: DraftTree, new: torch.Tensor) -> torch.Tensor:
        return tree.joint[new] >= self.ratio  # expected time gain s_d − p·s_t < 0

    def finalize(self, tree: DraftTree) -> torch.Tensor:
        leaf = torch.ones(len(tree), dtype=torch.bool)
        leaf[tree.parents[tree.parents >= 0]] = False
        return ~(leaf & (tree.joint < self.leaf_min))


def pct_prune(ratio: float = 0.1, k: int = 5, d_max: int = 10, leaf_min: float = 0.01) -> PCTPolicy:
    """PCT: top-k children per expandable node; a node is expandable if its path confidence
    c = Π p along the path is ≥ s_d/s_t; leaves with c < leaf_min are removed at the end."""
    return PCTPolicy(K=k, d_max=d_max, ratio=ratio, leaf_min=leaf_min)


@dataclass
class CapePolicy(Policy):
    name = "cape"
    features = frozenset({"rank"})

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return cand.rank < CAPE_WIDTHS[torch.bucketize(cand.confidence.contiguous(), CAPE_BOUNDS)]


def cape_policy(d: int = 5) -> CapePolicy:
    """CAPE: widths 7 / 5 / 3 / 1 for parent confidence (max prob) in (0, .3], (.3, .6], (.6, .8], (.8, 1]."""
    return CapePolicy(K=7, d_max=d)
