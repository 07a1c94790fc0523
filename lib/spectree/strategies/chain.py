"""Chain drafting (Leviathan et al. 2023): one draft token per layer, up to k, with the early-stopping rules the
papers compare (C2T Table 3; Gunjur et al.'s "simple cutoff")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy, Rows

STOPS = ("none", "entropy", "dymax", "dyjoint")


@dataclass
class Chain(Policy):
    """A chain of up to k draft tokens (k = 0: plain autoregressive decoding through the same loop).

    Early stopping: stop=entropy is Gunjur's "simple cutoff" (§3.1, 1.0 nats): the token drawn from a distribution
    of entropy H > `threshold` is still drafted, as the chain's last token ("we return early"; "the final sequence
    element typically contains the token of greatest entropy"); stop=dymax drafts no token from a distribution whose
    max probability is below `threshold` (C2T Table 3: 0.3); stop=dyjoint keeps no token whose joint probability P
    is below it (0.08)."""

    k: int = 4  # draft tokens per step
    stop: str = "none"  # none | entropy | dymax | dyjoint
    threshold: float = 0.0

    name = "chain"
    K: ClassVar[int] = 1  # the single candidate is the top-1 (or the sampled) child
    param_names: ClassVar[dict[str, str]] = {"d_max": "k"}

    def __post_init__(self):
        super().__post_init__()
        if self.stop not in STOPS:
            raise SpectreeError(f"chain: unknown stop rule '{self.stop}': use one of {STOPS}")

    @property
    def d_max(self) -> int:
        return self.k

    @property
    def fixed_size(self) -> bool:
        return self.stop == "none"

    @property
    def features(self) -> frozenset:
        return {"none": frozenset(), "entropy": frozenset({"entropy"})}.get(self.stop, frozenset({"draft_prob"}))

    @property
    def sampling_safe(self) -> bool:  # DyJoint keeps a sample because of its own probability
        return self.stop != "dyjoint"

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        if self.stop == "dymax":
            return cand.confidence >= self.threshold
        if self.stop == "dyjoint":
            return cand.joint >= self.threshold
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        if self.stop == "entropy":  # drawn from a distribution above the cutoff: the chain's last token
            return new.entropy <= self.threshold
        return np.ones(len(new), dtype=bool)


def autoregressive() -> Chain:
    """`ar`: no draft tokens, one target forward per token."""
    return Chain(k=0)
