"""How a model family's attention works, for the tree path: the one place that knows it (a new family is added here).

Every layer of a served model attends either to every earlier position (`full_attention`: Llama, Qwen, Phi, OLMo,
Mixtral without a window) or to a window of the last W positions, itself included (`sliding_attention`: Mistral's
`sliding_window`, Gemma-2's alternate layers, Gemma-3's and Qwen's `layer_types`), as transformers' own
`get_layer_types_and_kwargs` reads a config. What the tree path does with them:

- cache: a full-length slab for every layer, sliding or not (`treeattn.SlabLayer`). HF's `DynamicSlidingWindowLayer`
  keeps only the last W − 1 keys and a `cumulative_length` counter that neither a rollback nor a kept path rewinds,
  so a tree's entries could never be dropped from it; a slab keeps every entry and the window goes into the mask.
- mask: a query at position p sees a cached entry at position k only where its tree mask allows it and, in a
  sliding layer, p − k < W (HF's `sliding_window_overlay`). k is each slot's own position (`treeattn` records it),
  so every tree node's window is measured from its own position (committed length − 1 + depth), not the root's.
- the model takes one 4-D mask for every layer when its layers are all of one kind, else a mapping
  {layer kind: mask} (transformers' hybrid models read `attention_mask` so: Gemma-2/3, Qwen2/3, Qwen2-MoE).
- soft-capping (Gemma-2) lives in the family's own attention function and needs nothing here.

A layer kind the path cannot serve is refused in one line when a cache is built (`layer_kinds`): chunked attention
(Llama-4), linear-attention and state-space layers, layers that share another layer's KV cache (or have none);
never a traceback, never a silent wrong answer.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from spectree.core.errors import SpectreeError

FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' names of the two served kinds
REFUSED = {  # layer kinds of `get_layer_types_and_kwargs` the tree path cannot serve, in words
    "chunked_attention": "chunked attention (each position sees only its own chunk, as in Llama-4)",
    "linear_attention": "linear attention (a recurrent state, no per-token keys to keep or drop)",
    "conv": "a convolutional state layer (no per-token keys to keep or drop)",
    "hybrid": "a linear-attention hybrid layer (a recurrent state beside its keys)",
    "hybrid_sliding": "a linear-attention hybrid layer (a recurrent state beside its keys)",
    "dummy": "a layer that shares another layer's KV cache or has no attention",
}
MAPPING_MARK = "causal_mask_mapping"  # how transformers' hybrid models name the {layer kind: mask} they accept
LAYOUT = "_spectree_attention_layout"  # the model attribute `attention_layout` caches its answer in


def layer_kinds(config) -> tuple[tuple[str, Optional[int]], ...]:
    """(kind, window W or None) of every decoder layer of `config` (its text config for a multimodal one), as
    transformers reads them; a kind the tree path cannot serve refused in one line."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    text = config.get_text_config(decoder=True)
    types, kwargs = get_layer_types_and_kwargs(text)
    out = []
    for i, (kind, extra) in enumerate(zip(types, kwargs)):
        if kind not in (FULL, SLIDING):
            why = REFUSED.get(kind, f"a '{kind}' layer")
            raise SpectreeError(f"{text.model_type} model: layer {i} is {why}, which the tree path's cache cannot "
                                f"serve (it serves full and sliding-window attention: Llama, Qwen, Mistral, Gemma-2/3, "
                                f"Phi-3, OLMo-2, Mixtral and the like)")
        window = extra.get("sliding_window") if kind == SLIDING else None
        if kind == SLIDING and not (isinstance(window, int) and window >= 1):
            raise SpectreeError(f"{text.model_type} model: layer {i} is a sliding-window layer without a window "
                                f"(sliding_window={window!r})")
        out.append((kind, window))
    return tuple(out)


@dataclass(frozen=True)
class AttentionLayout:
    """The attention of one model, as the tree path serves it: each layer's kind, each kind's window (None:
    full) and whether the model takes a mask per kind (`mapping`, where its layers are of several kinds)."""

    kinds: tuple[str, ...]  # [layers]
    windows: dict  # {kind: W or None}
    mapping: bool

    @property
    def windowed(self) -> bool:
        return any(w is not None for w in self.windows.values())

    def allowed(self, allowed: torch.Tensor, query_pos: torch.Tensor, key_pos: np.ndarray) -> dict[str, torch.Tensor]:
        """{kind: bool [m, S]}: `allowed` (which cached slots each of m queries may see, e.g. its tree ancestors)
        and, for a kind with a window W, only slots whose position k is within it, p − k < W (query_pos: [m] the
        queries' positions p; key_pos: [≥ S] every slot's position)."""
        out = {}
        for kind, window in self.windows.items():
            if window is None:
                out[kind] = allowed
                continue
            p = query_pos.detach().cpu().long()[:, None]  # [m, 1]
            k = torch.from_numpy(np.ascontiguousarray(key_pos[:allowed.shape[1]], dtype=np.int64))[None]  # [1, S]
            out[kind] = allowed & (p - k < window).to(allowed.device)
        return out

    def pack(self, masks: dict):
        """What the model's `attention_mask` takes: the one mask of a model of one layer kind, else the mapping."""
        return masks if self.mapping else masks[self.kinds[0]]


def attention_layout(model) -> AttentionLayout:
    """The layout of `model` (worked out once and kept on it); refused in one line where a layer kind cannot be
    served, or where layers of several kinds meet a model whose forward takes one mask for all of them."""
    cached = model.__dict__.get(LAYOUT)
    if cached is not None:
        return cached
    kinds = layer_kinds(model.config)
    windows = dict(kinds)
    if len(windows) != len(set(kinds)):  # one mask per kind: one window per kind
        raise SpectreeError(f"{type(model).__name__} has sliding-window layers of several windows "
                            f"{sorted({w for _, w in kinds if w})}: the tree path serves one window per layer kind")
    mapping = len(windows) > 1
    if mapping and not _takes_mapping(model):
        raise SpectreeError(f"{type(model).__name__} mixes full and sliding-window layers but its forward takes one "
                            f"mask for all of them: the tree path cannot give each layer kind its own window")
    layout = AttentionLayout(tuple(kind for kind, _ in kinds), windows, mapping)
    model.__dict__[LAYOUT] = layout
    return layout


def _takes_mapping(model) -> bool:
    """Whether the model's decoder reads a {layer kind: mask} mapping as `attention_mask` (transformers' hybrid
    models: `causal_mask_mapping`)."""
    base = getattr(model, "base_model", model)
    try:
        return MAPPING_MARK in inspect.getsource(type(base).forward)
    except (OSError, TypeError):
        return False


__all__ = ["FULL", "SLIDING", "AttentionLayout", "attention_layout", "layer_kinds"]
