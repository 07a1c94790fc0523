"""Entropy-informed dynamic trees (Gunjur et al.): branching factor B(H) from the entropy of each node's
draft distribution."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..tree import DraftTree, Nodes
from .base import Policy


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

    name = "entropy"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        # every candidate of one parent carries that parent's entropy H: keep ranks < B(H)
        width = torch.tensor([self.branching(float(h)) for h in cand.entropy.tolist()])
        return cand.rank < width


def entropy_branching(d: int = 4, k_max: int = 7, branching: Callable[[float], int] = gunjur_branching
                      ) -> EntropyBranchingPolicy:
    """"Dyn width only": B(H) children per node (H in nats over the full vocabulary), fixed depth d."""
    return EntropyBranchingPolicy(K=k_max, d_max=d, branching=branching)
