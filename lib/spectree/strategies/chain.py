"""Chain drafting (Leviathan et al.): one draft token per layer, k layers."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..tree import DraftTree, Nodes
from .base import Policy


@dataclass
class ChainPolicy(Policy):
    name = "chain"

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return torch.ones(len(cand), dtype=torch.bool)  # K = 1: the top-1 (or the sampled) child


def chain_policy(k: int = 4) -> ChainPolicy:
    """Draft a chain of k tokens (k = 0 is plain autoregressive decoding)."""
    return ChainPolicy(K=1, d_max=k)
