"""EAGLE-2 (Li et al. 2024): expand the top-K nodes of each layer by joint probability, then rerank all
drafted nodes by joint probability and keep the top N."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes


def top_by_joint(joint: torch.Tensor, depth: torch.Tensor, n: int) -> torch.Tensor:
    """bool mask of the n largest joints; ties broken towards shallower nodes, so the kept set stays
    root-connected (a child's joint never exceeds its parent's)."""
    order = np.lexsort((np.arange(len(joint)), depth.numpy(), -joint.numpy()))  # last key sorts first
    keep = torch.zeros(len(joint), dtype=torch.bool)
    keep[torch.from_numpy(order[:n])] = True
    return keep


@dataclass
class Eagle2Policy(Policy):
    top_n: int = 50  # N: draft tokens kept after reranking

    name = "eagle2"
    features = frozenset()

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return top_by_joint(cand.joint, cand.depth, self.K)  # top-K of the K·K children

    def finalize(self, tree: DraftTree) -> torch.Tensor:
        return top_by_joint(tree.joint, tree.depth, self.top_n + 1)  # + the root (joint 1)


def eagle2_rerank(K: int = 10, d_max: int = 6, N: int = 50) -> Eagle2Policy:
    return Eagle2Policy(K=K, d_max=d_max, top_n=N)
