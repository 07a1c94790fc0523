"""Entropy-informed dynamic trees (Gunjur et al.): branching factor B(H) from the entropy of each node's
draft distribution."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes


def gunjur_branching(h: float) -> int:
    """The paper's best rule: B(H) = 1 if H < 0.02; 2 if 0.02 <= H < 1; min(ceil(4H), 7) if H >= 1."""
    if h < 0.02:
        return 1
    if h < 1.0:
        return 2
    return min(math.ceil(4 * h), 7)


@dataclass
class EntropyBranchingPolicy(Policy):
    branching: Callable[[float], int] = field(default=gunjur_branching)
    cutoff: float = float("inf")  # "dyn width + depth": B(H) = 0 (stop this branch) when H > cutoff

    name = "entropy"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        # every candidate of one parent carries that parent's entropy H: keep ranks < B(H)
        width = torch.tensor([0 if h > self.cutoff else self.branching(h) for h in cand.entropy.tolist()])
        return cand.rank < width


def entropy_branching(d: int = 4, k_max: int = 7, cutoff: float = float("inf"),
                      branching: Callable[[float], int] = gunjur_branching) -> EntropyBranchingPolicy:
    """"Dyn width only": B(H) children per node (H in nats over the full vocabulary), fixed depth d.
    With a finite `cutoff` (and a larger d) it is "dyn width + depth": a branch stops where H > cutoff."""
    return EntropyBranchingPolicy(K=k_max, d_max=d, branching=branching, cutoff=cutoff)


@dataclass
class NaiveWidthPolicy(Policy):
    name = "naive_width"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return cand.rank < (self.K if int(cand.depth[0]) == self.d_max else 1)


def naive_width(k: int = 4, d: int = 4) -> NaiveWidthPolicy:
    """Gunjur's "naive width": the greedy chain, with the top-k alternatives at its last index only."""
    return NaiveWidthPolicy(K=k, d_max=d)
