"""Chain drafting (Leviathan et al.): one draft token per layer, up to k layers, with the early-stopping
rules the papers compare (C2T Table 3; Gunjur's "simple cutoff")."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes

STOPS = ("none", "entropy", "dymax", "dyjoint")


@dataclass
class ChainPolicy(Policy):
    stop: str = "none"  # early-stopping rule
    threshold: float = 0.0

    name = "chain"

    @property
    def features(self) -> frozenset:
        return frozenset({"entropy"}) if self.stop == "entropy" else frozenset()

    def __post_init__(self):
        super().__post_init__()
        if self.stop not in STOPS:
            raise SpectreeError(f"chain: unknown stop rule '{self.stop}': use one of {STOPS}")

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        # K = 1: the single candidate is the top-1 (or the sampled) child
        if self.stop == "entropy":  # Gunjur: stop drafting when the draft distribution's entropy exceeds H
            return cand.entropy <= self.threshold
        if self.stop == "dymax":  # stop when the draft's max probability falls below the threshold
            return cand.confidence >= self.threshold
        if self.stop == "dyjoint":  # stop when the path's joint probability falls below the threshold
            return cand.joint >= self.threshold
        return torch.ones(len(cand), dtype=torch.bool)


def chain_policy(k: int = 4, stop: str = "none", threshold: float = 0.0) -> ChainPolicy:
    """A chain of up to k draft tokens (k = 0 is plain autoregressive decoding). Early stopping:
    stop=entropy (threshold H, Gunjur's cutoff 1.0), stop=dymax (0.3), stop=dyjoint (0.08)."""
    return ChainPolicy(K=1, d_max=k, stop=stop, threshold=threshold)
