"""Tree attention on transformers' own modeling: a 4-D additive mask (one per layer kind where a model mixes full
and sliding-window layers, `core.families`), true position ids and a `DynamicCache` holding the committed prefix
(no forked modeling files).

Cache layout (transformers `DynamicCache`): per layer `keys`/`values` of shape [B=1, H_kv, S, D_head];
slot s of the cache holds the token fed s-th, sliding-window layers included (their window is in the mask).
`slab_cache` makes those views of preallocated slabs; `cache.slot_positions` [S] holds each slot's position
(a committed slot's is its index, a tree node's the position it was fed at), which a window is measured from.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from spectree.core.families import AttentionLayout, attention_layout, layer_kinds

SLAB_MIN = 512  # a slab's first capacity in cache slots; it doubles when full


class SlabLayer(DynamicLayer):
    """A `DynamicLayer` whose `keys`/`values` are views [B, H_kv, S, D] of slabs [B, H_kv, capacity, D]:
    appending m entries writes them in place instead of `torch.cat`-copying the whole cache every forward, and
    `truncate` / `keep_slots` stay views / in-place row moves. A slab doubles when full."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, m = self.get_seq_length(), key_states.shape[-2]
        slab = getattr(self, "slab_keys", None)
        if slab is None or n + m > slab.shape[-2] or self.keys.data_ptr() != slab.data_ptr():
            capacity = max(SLAB_MIN, 2 * (n + m))
            self.slab_keys = self._grow(self.keys, capacity, n, key_states)
            self.slab_values = self._grow(self.values, capacity, n, value_states)
        self.slab_keys[:, :, n:n + m] = key_states
        self.slab_values[:, :, n:n + m] = value_states
        self.keys, self.values = self.slab_keys[:, :, :n + m], self.slab_values[:, :, :n + m]
        return self.keys, self.values

    @staticmethod
    def _grow(old: torch.Tensor, capacity: int, n: int, like: torch.Tensor) -> torch.Tensor:
        """A new slab [B, H_kv, capacity, D] holding the first n slots of `old`."""
        slab = like.new_empty(*like.shape[:2], capacity, like.shape[-1])
        if n:
            slab[:, :, :n] = old[:, :, :n]
        return slab


def slab_cache(config=None) -> DynamicCache:
    """A `DynamicCache` whose every layer is a full-length `SlabLayer`, sliding-window layers included (their window
    goes into the mask: `core.families`): one per layer of `config`, a layer kind the tree path cannot serve refused
    here in one line; without a config, each layer created on its first update."""
    if config is None:
        cache = DynamicCache()
        cache.layer_class_to_replicate = SlabLayer
    else:
        cache = DynamicCache(config=config)
        cache.layers = [SlabLayer() for _ in layer_kinds(config)]
    cache.slot_positions = np.zeros(0, dtype=np.int64)
    return cache


def record_positions(cache: DynamicCache, position_ids: torch.Tensor) -> np.ndarray:
    """Note the positions [m] of m entries about to be appended to `cache`; returns every slot's position [S + m]
    (a cache that never noted any: slot s at position s)."""
    known = slot_positions(cache)
    cache.slot_positions = np.concatenate([known, position_ids.detach().cpu().numpy().astype(np.int64)])
    return cache.slot_positions


def slot_positions(cache: DynamicCache) -> np.ndarray:
    """The position of each of the cache's S slots [S] (slots appended without a note: their index)."""
    n = cache_len(cache)
    known = getattr(cache, "slot_positions", None)
    if known is None or len(known) < n:
        return np.concatenate([np.zeros(0, np.int64) if known is None else known,
                               np.arange(0 if known is None else len(known), n, dtype=np.int64)])
    return known[:n]


def layer_masks(layout: AttentionLayout, allowed: torch.Tensor, position_ids: torch.Tensor, key_pos: np.ndarray,
                dtype: torch.dtype, device) -> "torch.Tensor | dict[str, torch.Tensor]":
    """The `attention_mask` a model of `layout` takes for queries at `position_ids` [m] allowed to see `allowed`
    [m, S] (bool), each layer kind's window applied (`AttentionLayout.allowed`): additive [1, 1, m, S], or
    {kind: mask} where the model mixes kinds."""
    if not layout.windowed:  # every layer attends in full: one mask
        return additive_mask(allowed.to(device), dtype)
    return layout.pack({kind: additive_mask(a.to(device), dtype)
                        for kind, a in layout.allowed(allowed, position_ids, key_pos).items()})


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool [m, S] → additive float mask [1, 1, m, S] (0 where allowed, dtype-min elsewhere)."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def forward_with_mask(model: PreTrainedModel, cache: DynamicCache, inputs: torch.Tensor,
                      position_ids: torch.Tensor, allowed: Optional[torch.Tensor],
                      output_hidden_states: bool = False, last_only: bool = False):
    """Run `model` on m new entries appended to `cache`.

    inputs: token ids [m] (long) or input embeddings [m, H] (float, e.g. EDD's soft prompt);
    position_ids: [m]; allowed: bool [m, cache_len + m] (which slots each new entry sees), or None for a chain
    that sees the whole cache and itself causally: HF's own mask then, as in `generate` (a prefill runs SDPA's
    causal kernel instead of an [m, m] additive mask: a 2,048-token prefill of SmolLM2 took 6.5 s under the mask and
    4.4 s so, HF's 4.0–4.4 s; measured).
    Returns the model output (logits [1, m, V], or [1, 1, V] for the last entry alone when `last_only`: a
    prefill then skips the LM head's m - 1 other rows, as HF `generate` does); the m entries are appended to
    `cache`. A cache with a forward path of its own (the static slab of `core.graphs`) runs it instead.
    """
    own = getattr(cache, "forward_with_mask", None)  # a cache with its own forward path (`core.graphs.GraphCache`)
    if own is not None:
        return own(inputs, position_ids, allowed, output_hidden_states, last_only)
    dev = model.device
    layout = attention_layout(model)
    key_pos = record_positions(cache, position_ids)
    mask = None if allowed is None else layer_masks(layout, allowed, position_ids, key_pos, model.dtype, dev)
    return model(**model_feed(model, inputs), position_ids=position_ids[None].to(dev), attention_mask=mask,
                 past_key_values=cache, use_cache=True, output_hidden_states=output_hidden_states,
                 logits_to_keep=1 if last_only else 0)


def model_feed(model: PreTrainedModel, inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's input: token ids [m] → {"input_ids": [1, m]}; embeddings [m, H] → {"inputs_embeds": [1, m, H]},
    in the model's dtype."""
    if inputs.is_floating_point():
        return {"inputs_embeds": inputs[None].to(model.device, model.dtype)}
    return {"input_ids": inputs[None].to(model.device)}


def synchronize(model: torch.nn.Module) -> None:
    """Wait for the model's device to finish its queued work (CUDA runs kernels asynchronously: a timer read
    without this would charge a forward's GPU time to whatever next waits for it); nothing on the CPU."""
    device = next(model.parameters()).device
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def causal_allowed(cache_len: int, m: int) -> torch.Tensor:
    """bool [m, cache_len + m]: m new tokens in a chain after the cached prefix."""
    return torch.cat([torch.ones(m, cache_len, dtype=torch.bool),
                      torch.ones(m, m, dtype=torch.bool).tril()], dim=1)


def tree_allowed(parents: np.ndarray, nodes: np.ndarray, slots: np.ndarray, prefix_len: int, cache_len: int
                 ) -> torch.Tensor:
    """bool [m, cache_len]: tree nodes [m] see the whole prefix plus the cache slots of themselves and their ancestors.

    parents: [n] parent of every tree node (−1 at the root); nodes: [m] the nodes being fed; slots: [n] cache slot
    of every tree node (−1 if not in the cache); slots >= prefix_len are tree slots. Built in numpy, one step up
    the tree per iteration (depth iterations): a frontier's mask costs microseconds, not a [m, n] ancestor matrix.
    """
    allowed = np.zeros((len(nodes), cache_len), dtype=bool)
    allowed[:, :prefix_len] = True
    rows, cur = np.arange(len(nodes)), np.asarray(nodes)
    while len(cur):
        s = slots[cur]
        fed = s >= prefix_len
        allowed[rows[fed], s[fed]] = True
        up = parents[cur]
        rows, cur = rows[up >= 0], up[up >= 0]
    return torch.from_numpy(allowed)


def cache_len(cache: DynamicCache) -> int:
    return int(cache.get_seq_length())


@torch.inference_mode()
def keep_slots(cache: DynamicCache, prefix_len: int, slots: torch.Tensor) -> None:
    """Keep the first `prefix_len` cache slots and then `slots` (ascending long indices >= prefix_len, e.g. an
    accepted path), in place: only those k rows move (to prefix_len .. prefix_len + k - 1) and the prefix stays
    a view, so no step copies the whole cache (an index_select of it cost ~3 ms a step here, 6% of a token); a
    path already in place (a chain's accepted prefix) moves nothing."""
    k = int(slots.shape[0])
    if not bool((slots == prefix_len + torch.arange(k, device=slots.device)).all()):  # else already in place
        for layer in cache.layers:
            idx = slots.to(layer.keys.device)
            layer.keys[:, :, prefix_len:prefix_len + k] = layer.keys.index_select(2, idx)
            layer.values[:, :, prefix_len:prefix_len + k] = layer.values.index_select(2, idx)
        known = slot_positions(cache).copy()
        known[prefix_len:prefix_len + k] = known[slots.cpu().numpy()]
        cache.slot_positions = known
    truncate(cache, prefix_len + k)


def truncate(cache: DynamicCache, length: int) -> None:
    """Drop every cache slot from `length` on, in place."""
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, :length]
        layer.values = layer.values[:, :, :length]
    known = getattr(cache, "slot_positions", None)
    if known is not None:
        cache.slot_positions = known[:length]
