"""Static trees: the same shape at every step."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..tree import DraftTree, Nodes
from .base import Policy


@dataclass
class KaryPolicy(Policy):
    name = "kary"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return torch.ones(len(cand), dtype=torch.bool)  # every offered child: K per node


def kary_policy(b: int = 2, d: int = 4) -> KaryPolicy:
    """Full b-ary tree of depth d (Gunjur et al.'s static baseline is b = 2, d = 4)."""
    return KaryPolicy(K=b, d_max=d)


@dataclass
class SequencesPolicy(Policy):
    name = "sequences"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        if int(cand.depth[0]) == 1:
            return torch.ones(len(cand), dtype=torch.bool)  # k different first tokens
        return cand.rank == 0  # then each sequence continues greedily


def sequences_policy(k: int = 4, d: int = 5) -> SequencesPolicy:
    """SpecInfer-style: k draft sequences that share the root and differ in their first token."""
    return SequencesPolicy(K=k, d_max=d)
