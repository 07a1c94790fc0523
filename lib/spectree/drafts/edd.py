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

from spectree.core.drafting import CachedLM, draft_tree
from spectree.core.policy import Policy
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree
from spectree.core.treeattn import truncate


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


class FusedEmbedding(torch.nn.Module):
    """Token embedding plus a learned projection of the newest target hidden state h_{s-1} (EAGLE-style
    fusion, optional in EDD here): every token of the draft block reads h_{s-1} in its residual stream,
    not only through attention. `context` (raw target states, [H] or [B, T, H] in training) is set before
    each block and passes through the target's final norm (`norm`, shared and frozen) before the projection."""

    def __init__(self, embed: torch.nn.Embedding, norm: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.embed, self.norm = embed, norm
        self.fuse = torch.nn.Linear(hidden_size, hidden_size, bias=False, device=embed.weight.device,
                                    dtype=embed.weight.dtype)
        torch.nn.init.zeros_(self.fuse.weight)
        self.context: Optional[torch.Tensor] = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)  # [..., H]
        return x if self.context is None else x + self.fuse(self.norm(self.context))


def add_fusion(draft: PreTrainedModel) -> FusedEmbedding:
    fused = FusedEmbedding(draft.model.embed_tokens, draft.model.norm, draft.config.hidden_size)
    draft.model.embed_tokens = fused
    return fused


class ReducedHead(torch.nn.Module):
    """The draft's LM head restricted to `ids` (the target's most frequent tokens): a [V', H] matmul instead
    of [V, H], its logits scattered into a full-vocabulary row where every other token gets the row's lowest
    kept logit minus GAP: below every kept token (so never among the top candidates), all of them together
    < V·e^-GAP of the probability, and finite so entropies stay defined. (A fill like −1e4 makes every exp
    underflow, and softmax/logsumexp over the row run 5–15× slower on this CPU: measured.) Only the
    draft's head is replaced; the target scores every token, so decoding stays lossless."""

    GAP = 20.0

    def __init__(self, head: torch.nn.Module, ids: torch.Tensor):
        super().__init__()
        self.register_buffer("kept_ids", ids.long().to(head.weight.device))  # read by drafting (top-M entropy)
        weight = head.weight.detach()[self.kept_ids]  # [V', H] (indexing copies)
        self.small = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False).requires_grad_(False)
        self.small.weight.data = weight  # a Linear, so that `kernels.pack_linears` reaches it too
        self.vocab = head.weight.shape[0]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        small = self.small(h)  # [..., V']
        fill = small.amin(-1, keepdim=True) - self.GAP  # [..., 1]
        full = fill.expand(*small.shape[:-1], self.vocab).clone()  # [..., V]
        return full.index_copy_(-1, self.kept_ids, small)


def reduce_vocab(draft: PreTrainedModel, ids: torch.Tensor) -> PreTrainedModel:
    """Give a one-layer draft (not the target it shares modules with) a ReducedHead over `ids`."""
    draft.lm_head = ReducedHead(draft.lm_head, ids)
    return draft


def block_starts(n: int, block: int, offset: int = 0) -> torch.Tensor:
    """long [n]: the start s of the training block each token position belongs to (blocks of length
    `block`, the first one shortened by `offset`)."""
    i = torch.arange(n)
    return (((i + offset) // block) * block - offset).clamp(min=0)


def dual_block_allowed(n: int, block: int, offset: int = 0) -> torch.Tensor:
    """EDD's dual-block training mask, bool [2n, 2n] over entries [h_0 … h_{n-1}, t_0 … t_{n-1}].

    Hidden entries are causal among themselves. Token t_i in the block starting at s (blocks of length
    `block`, the first one shortened by `offset`) sees h_k for k < s and t_s … t_i: exactly what it sees
    at inference when t_s is the root and the draft has reached depth i − s.
    """
    i, start = torch.arange(n), block_starts(n, block, offset)
    allowed = torch.zeros(2 * n, 2 * n, dtype=torch.bool)
    allowed[:n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
    allowed[n:, :n] = i[None, :] < start[:, None]
    allowed[n:, n:] = (i[None, :] >= start[:, None]) & (i[None, :] <= i[:, None])
    return allowed


def soft_prompt(draft: PreTrainedModel, hidden: torch.Tensor, hidden_norm: bool) -> torch.Tensor:
    """The EDD soft prompt from target hidden states [..., H]: passed through the target's final RMSNorm
    when `hidden_norm` (SmolLM2's middle layers carry massive activations — one dimension reaches
    ~25,000 against a typical RMS of ~26 — which the final norm's weights tame)."""
    return draft.model.norm(hidden) if hidden_norm else hidden


class EDDDrafter:
    """Drafting with EDD: the cache holds soft-prompt entries for the committed tokens the target has
    encoded, then the root token (not encoded yet: the target scores it in the next tree forward)."""

    needs_hidden = True

    def __init__(self, model: PreTrainedModel, hidden_layer: int, hidden_norm: bool = True):
        self.lm, self.hidden_layer, self.hidden_norm = CachedLM(model), hidden_layer, hidden_norm

    def _soft_prompt(self, hidden: torch.Tensor) -> torch.Tensor:
        embed = self.lm.model.model.embed_tokens
        if isinstance(embed, FusedEmbedding):  # h_{s-1}: the newest target state, fused into every draft token
            embed.context = hidden[-1] if len(hidden) else None  # (none before a one-token prompt's root)
        return soft_prompt(self.lm.model, hidden, self.hidden_norm)  # [k, H]

    def _feed(self, hidden: torch.Tensor, root: int) -> torch.Tensor:
        """One forward over soft-prompt entries for `hidden` [k, H] and then the root token; the root's logits [V]."""
        embed = self.lm.model.model.embed_tokens
        entries = torch.cat([self._soft_prompt(hidden), embed(torch.tensor([root], device=hidden.device))])  # [k+1, H]
        return self.lm.feed_chain(entries, last_only=True).logits[0, -1]

    def start(self, prompt_ids: list[int], hidden: Optional[torch.Tensor]) -> torch.Tensor:
        """hidden: [L-1, H] target states for the prompt without its last token (the root); None (or [0, H])
        for a one-token prompt, whose root is the draft's only entry."""
        self.lm.reset()
        if hidden is None:
            model = self.lm.model
            hidden = torch.zeros(0, model.config.hidden_size, device=model.device, dtype=model.dtype)
        return self._feed(hidden, prompt_ids[-1])

    def advance(self, new_tokens: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [k+1, H] target states of the old root and the k accepted tokens."""
        self.lm.committed -= 1  # the old root's token entry gives way to its encoding
        truncate(self.lm.cache, self.lm.committed)
        return self._feed(hidden, new_tokens[-1])

    def draft(self, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
              sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
        return draft_tree(self.lm, root_token, root_logits, prefix_len, policy, sampling, generator)
