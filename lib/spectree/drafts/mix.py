"""A synthetic draft of controlled quality, `mix:λ:DRAFT`: at every tree node its distribution is

    q_λ = (1 − λ) · q_draft + λ · p_target

with p_target from a target forward over the same frontier (tree attention, its own KV cache of the committed
tokens, the machinery of every other drafter). λ = 0 is the real draft (its logits returned untouched, no target
forward), λ = 1 an oracle (the target's logits). Every node feature (p, joint P, entropies, rank, confidence) is
read from q_λ by the unchanged drafting code, so policies, the logbook, replay and the analyses work as they are.

Its wall time is not a draft's (a target forward per layer): `bench` reports its rows as synthetic (τ, γ only),
and `speed.costmodel` projects the speed a draft of that quality would give with the real draft's cost.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from transformers import PreTrainedModel

from spectree.core.drafting import CachedLM, draft_tree
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree


def check_weight(weight: float) -> float:
    if not 0.0 <= weight <= 1.0 or math.isnan(weight):
        raise SpectreeError(f"mix:λ:DRAFT needs 0 <= λ <= 1 (the target's share of the draft distribution), "
                            f"got {weight}")
    return float(weight)


def mix_logits(draft: torch.Tensor, target: torch.Tensor, weight: float) -> torch.Tensor:
    """log q_λ [..., V] from draft and target logits [..., V]: log((1 − λ)·softmax(draft) + λ·softmax(target)),
    the draft's logits themselves at λ = 0 and the target's at λ = 1 (no rounding: λ = 0 equals the real draft)."""
    if weight == 0.0:
        return draft
    if weight == 1.0:
        return target.to(draft.dtype)
    return torch.logaddexp(torch.log_softmax(draft.float(), -1) + math.log1p(-weight),  # [..., V], one pass
                           torch.log_softmax(target.float(), -1) + math.log(weight))  # (a stacked logsumexp: 4× slower)


class MixedLM:
    """What `draft_tree` drives for a mix draft: each `feed_nodes` (and `feed_tree`, as `CachedLM`'s) feeds the real
    draft's model and the target's (each with its own cache) and returns the mixed logits. Its `forwards` are the
    real draft's: the target's forwards inside it count as tree construction (a mix's wall time is no draft's, and
    `bench` blanks it)."""

    def __init__(self, inner: CachedLM, target: CachedLM, weight: float):
        self.inner, self.target, self.weight = inner, target, weight

    @property
    def model(self) -> PreTrainedModel:
        return self.inner.model  # the real draft (packed kernels, the cost model of its forward)

    @property
    def kept_ids(self) -> Optional[torch.Tensor]:
        return self.inner.kept_ids if self.weight == 0.0 else None  # the target scores every token

    @property
    def forwards(self) -> list[tuple[int, float]]:
        return self.inner.forwards

    def feed_nodes(self, parents: np.ndarray, nodes: np.ndarray, tokens: torch.Tensor, positions: torch.Tensor,
                   output_hidden_states: bool = False):
        out = self.inner.feed_nodes(parents, nodes, tokens, positions, output_hidden_states) if self.weight < 1 else None
        if self.weight == 0.0:
            return out
        tgt = self.target.feed_nodes(parents, nodes, tokens.to(self.target.model.device),
                                     positions.to(self.target.model.device))
        if out is None:
            return tgt
        out.logits = mix_logits(out.logits, tgt.logits.to(out.logits.device), self.weight)
        return out

    feed_tree = CachedLM.feed_tree  # a tree's nodes through `feed_nodes` (acceptance's forced chains)

    def rollback(self) -> None:
        self.inner.rollback()
        if self.weight > 0:  # at λ = 0 the target's cache is never fed
            self.target.rollback()


class MixDrafter:
    """A drafter (`start`, `advance`, `draft`) whose distributions are q_λ of a real drafter and the target."""

    synthetic = True  # its wall time is not a draft's: τ and γ only

    def __init__(self, inner, target: PreTrainedModel, weight: float):
        self.inner, self.weight = inner, check_weight(weight)
        self.needs_hidden = inner.needs_hidden
        self.hidden_layer = getattr(inner, "hidden_layer", None)
        self.lm = MixedLM(inner.lm, CachedLM(target), self.weight)

    def _target_root(self, tokens: list[int]) -> Optional[torch.Tensor]:
        """Commit `tokens` to the target's cache; its logits [V] at the last (the new root), None at λ = 0."""
        if self.weight == 0.0:
            return None
        ids = torch.tensor(tokens, device=self.lm.target.model.device)
        return self.lm.target.feed_chain(ids, last_only=True).logits[0, -1]

    def start(self, prompt_ids: list[int], hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        root = self.inner.start(prompt_ids, hidden)
        self.lm.target.reset()
        return self._mix(root, self._target_root(prompt_ids))

    def advance(self, new_tokens: list[int], hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._mix(self.inner.advance(new_tokens, hidden), self._target_root(new_tokens))

    def _mix(self, root: torch.Tensor, target: Optional[torch.Tensor]) -> torch.Tensor:
        return root if target is None else mix_logits(root, target.to(root.device), self.weight)

    def draft(self, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
              sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
        return draft_tree(self.lm, root_token, root_logits, prefix_len, policy, sampling, generator)


__all__ = ["MixDrafter", "MixedLM", "mix_logits", "check_weight"]
