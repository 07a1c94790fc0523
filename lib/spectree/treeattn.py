"""Tree attention on transformers' own Llama modeling: a 4-D additive mask, true position ids and a
`DynamicCache` holding the committed prefix (no forked modeling files).

Cache layout (transformers `DynamicCache`): per layer `keys`/`values` of shape [B=1, H_kv, S, D_head];
slot s of the cache holds the token fed s-th.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool [m, S] → additive float mask [1, 1, m, S] (0 where allowed, dtype-min elsewhere)."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def forward_with_mask(model: PreTrainedModel, cache: DynamicCache, inputs: torch.Tensor,
                      position_ids: torch.Tensor, allowed: torch.Tensor,
                      output_hidden_states: bool = False):
    """Run `model` on m new entries appended to `cache`.

    inputs: token ids [m] (long) or input embeddings [m, H] (float, e.g. EDD's soft prompt);
    position_ids: [m]; allowed: bool [m, cache_len + m] (which slots each new entry sees).
    Returns the model output (logits [1, m, V]); the m entries are appended to `cache`.
    """
    dev = model.device
    feed = {"input_ids": inputs[None].to(dev)} if not inputs.is_floating_point() else {
        "inputs_embeds": inputs[None].to(dev, model.dtype)}
    return model(**feed, position_ids=position_ids[None].to(dev),
                 attention_mask=additive_mask(allowed.to(dev), model.dtype), past_key_values=cache,
                 use_cache=True, output_hidden_states=output_hidden_states)


def causal_allowed(cache_len: int, m: int) -> torch.Tensor:
    """bool [m, cache_len + m]: m new tokens in a chain after the cached prefix."""
    return torch.cat([torch.ones(m, cache_len, dtype=torch.bool),
                      torch.ones(m, m, dtype=torch.bool).tril()], dim=1)


def tree_allowed(ancestors: torch.Tensor, prefix_len: int, slots: torch.Tensor, cache_len: int) -> torch.Tensor:
    """bool [m, cache_len]: tree nodes see the whole prefix plus the cache slots of their ancestors.

    ancestors: bool [m, n] ancestor-or-self rows of the m nodes being fed, over all n tree nodes;
    slots: [n] cache slot of every tree node (-1 if not in the cache); slots >= prefix_len are tree slots.
    """
    allowed = torch.zeros(ancestors.shape[0], cache_len, dtype=torch.bool)
    allowed[:, :prefix_len] = True
    fed = (slots >= prefix_len).nonzero().flatten()
    allowed[:, slots[fed]] = ancestors[:, fed]
    return allowed


def cache_len(cache: DynamicCache) -> int:
    return int(cache.get_seq_length())


@torch.inference_mode()
def keep_slots(cache: DynamicCache, prefix_len: int, slots: torch.Tensor) -> None:
    """Keep the first `prefix_len` cache slots and then `slots` (ascending long indices >= prefix_len, e.g. an
    accepted path), in place: only those k rows move (to prefix_len .. prefix_len + k - 1) and the prefix stays
    a view, so no step copies the whole cache (an index_select of it cost ~3 ms a step here, 6% of a token)."""
    k = int(slots.shape[0])
    for layer in cache.layers:
        idx = slots.to(layer.keys.device)
        layer.keys[:, :, prefix_len:prefix_len + k] = layer.keys.index_select(2, idx)
        layer.values[:, :, prefix_len:prefix_len + k] = layer.values.index_select(2, idx)
    truncate(cache, prefix_len + k)


def truncate(cache: DynamicCache, length: int) -> None:
    """Drop every cache slot from `length` on, in place."""
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, :length]
        layer.values = layer.values[:, :, :length]
