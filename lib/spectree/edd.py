"""EDD (Effective Draft Decoder, EDD paper §3.1) and VDM: one-decoder-layer drafts of the target.

Both are plain HF `LlamaForCausalLM`s with ONE decoder layer whose embeddings, final norm and LM head are
the target's own (shared, frozen). VDM reads tokens only (a standalone model that also works as HF's
`assistant_model`). EDD additionally reads the target's hidden states (layer `hidden_layer`, the 4th to
last by default) as a soft prompt: entries [h_0 … h_{s-1}] fed as input embeddings, followed by the block
of tokens t_s … t_i it drafts from, where t_s is the last committed token (the root).
"""
from __future__ import annotations

from typing import Optional

import torch
from transformers import PreTrainedModel

from .drafting import CachedLM, draft_tree
from .sampling import Sampling
from .strategies.base import Policy
from .tree import DraftTree
from .treeattn import truncate


def default_hidden_layer(target: PreTrainedModel) -> int:
    """Index into `hidden_states` of the 4th-to-last decoder layer's output (27 for SmolLM2's 30)."""
    return target.config.num_hidden_layers - 3


def one_layer_draft(target: PreTrainedModel, init_layer: Optional[int] = None) -> PreTrainedModel:
    """A one-layer draft sharing the target's embeddings, final norm and head; its layer starts as a copy
    of target layer `init_layer` (the last one by default)."""
    cfg = target.config.__class__.from_dict(target.config.to_dict())
    cfg.num_hidden_layers = 1
    with torch.device("meta"):
        draft = type(target)(cfg)
    src = target.model.layers[target.config.num_hidden_layers - 1 if init_layer is None else init_layer]
    layer = type(src)(cfg, layer_idx=0)
    layer.load_state_dict(src.state_dict())
    draft.model.layers = torch.nn.ModuleList([layer.to(target.device, target.dtype)])
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.norm = target.model.norm
    draft.model.rotary_emb = target.model.rotary_emb
    draft.lm_head = target.lm_head
    return draft.eval()


def draft_layer_state(draft: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The trainable part of a one-layer draft (what a checkpoint stores)."""
    return {f"layer.{k}": v for k, v in draft.model.layers[0].state_dict().items()}


def dual_block_allowed(n: int, block: int, offset: int = 0) -> torch.Tensor:
    """EDD's dual-block training mask, bool [2n, 2n] over entries [h_0 … h_{n-1}, t_0 … t_{n-1}].

    Hidden entries are causal among themselves. Token t_i in the block starting at s (blocks of length
    `block`, the first one shortened by `offset`) sees h_k for k < s and t_s … t_i: exactly what it sees
    at inference when t_s is the root and the draft has reached depth i − s.
    """
    i = torch.arange(n)
    start = ((i + offset) // block) * block - offset
    start = start.clamp(min=0)  # [n] block start of each token
    allowed = torch.zeros(2 * n, 2 * n, dtype=torch.bool)
    allowed[:n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
    allowed[n:, :n] = i[None, :] < start[:, None]
    allowed[n:, n:] = (i[None, :] >= start[:, None]) & (i[None, :] <= i[:, None])
    return allowed


class EDDDrafter:
    """Drafting with EDD: the cache holds soft-prompt entries for the committed tokens the target has
    encoded, then the root token (not encoded yet: the target scores it in the next tree forward)."""

    needs_hidden = True

    def __init__(self, model: PreTrainedModel, hidden_layer: int):
        self.lm, self.hidden_layer = CachedLM(model), hidden_layer

    def start(self, prompt_ids: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [L-1, H] target states for the prompt without its last token (the root)."""
        self.lm.reset()
        self.lm.feed_chain(hidden)
        return self.lm.feed_chain(torch.tensor(prompt_ids[-1:])).logits[0, -1]

    def advance(self, new_tokens: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [k+1, H] target states of the old root and the k accepted tokens."""
        self.lm.committed -= 1  # the old root's token entry gives way to its encoding
        truncate(self.lm.cache, self.lm.committed)
        self.lm.feed_chain(hidden)
        return self.lm.feed_chain(torch.tensor(new_tokens[-1:])).logits[0, -1]

    def draft(self, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
              sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
        return draft_tree(self.lm, root_token, root_logits, prefix_len, policy, sampling, generator)
