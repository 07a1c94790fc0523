"""Sampling settings shared by drafting and verification (temperature 0 = greedy)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import SpectreeError


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 → greedy verification
    top_p: float = 1.0

    def __post_init__(self):
        if not 0.0 <= self.temperature <= 10.0:
            raise SpectreeError(f"temperature must be in [0, 10], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise SpectreeError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """[..., V] logits → the distribution we sample from (temperature, then nucleus top-p)."""
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            outside = sorted_p.cumsum(-1) - sorted_p >= self.top_p  # keep the smallest prefix reaching top_p
            sorted_p = sorted_p.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats over the last dim."""
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)


def topm_entropy(probs: torch.Tensor, m: int) -> torch.Tensor:
    """Entropy of the renormalised top-m probabilities (C2T's cheap entropy, M = 1000 by default)."""
    top = probs.topk(min(m, probs.shape[-1]), dim=-1).values
    return entropy(top / top.sum(-1, keepdim=True))
