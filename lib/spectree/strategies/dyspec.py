"""DySpec (Xiong et al.): grow the tree where the estimated acceptance value is highest.

With greedy drafting the value of a node is its joint draft probability P (the product of the p along its
path), an estimate of the chance the target accepts the whole path.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes
from spectree.strategies.eagle2 import top_by_joint


@dataclass
class DySpecBudgetPolicy(Policy):
    budget: int = 64  # m: draft tokens per tree

    name = "dyspec"
    features = frozenset()

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        # a candidate can only end up among the m best nodes if it beats the m-th best value seen so far
        joints = torch.cat([tree.joint[1:], cand.joint])
        if len(joints) <= self.budget:
            return torch.ones(len(cand), dtype=torch.bool)
        bar = joints.topk(self.budget).values[-1]
        return cand.joint >= bar

    def finalize(self, tree: DraftTree) -> torch.Tensor:
        return top_by_joint(tree.joint, tree.depth, self.budget + 1)


def dyspec_greedy(m: int = 64, K: int = 8, d_max: int = 11) -> DySpecBudgetPolicy:
    """Alg. 1 with budget m: the m nodes of largest value, the same set a global max-heap pops (values
    shrink along paths, so every ancestor of a chosen node is chosen first); K children offered per node."""
    return DySpecBudgetPolicy(K=K, d_max=d_max, budget=m)


@dataclass
class DySpecThresholdPolicy(Policy):
    threshold: float = 0.05  # t: expand while the value is at least t

    name = "dyspec_threshold"
    features = frozenset()
    probabilities = ("threshold",)

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return cand.joint >= self.threshold


def dyspec_threshold(t: float = 0.05, K: int = 8, d_max: int = 11) -> DySpecThresholdPolicy:
    """Alg. 2: layer by layer, keep (and expand) every child whose value is at least t."""
    return DySpecThresholdPolicy(K=K, d_max=d_max, threshold=t)
