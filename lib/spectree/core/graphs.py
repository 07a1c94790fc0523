"""The engines' regime: forwards replayed from CUDA graphs captured at padded tree sizes, on a static KV slab
(`torch.cuda.CUDAGraph`: no compile step, nothing to install). SGLang and TensorRT-LLM run their draft and verify
forwards this way; eager PyTorch pays a kernel launch per op instead (launch-bound on an H100: ~0.65 ms per decoder
layer whatever the width), so the two regimes give different forward-time curves t(n) and draft/target ratios.

`GraphCache` is a `DynamicCache` whose layers are views [1, H_kv, L, D] of fixed slabs [1, H_kv, C, D], as the slab
cache's are (so `keep_slots`, `truncate` and `cache_len` work unchanged), but whose `update` writes the new entries
at slots read from a device tensor and returns the whole slab: a forward then has the same shapes at every step, the
condition for replaying it. `treeattn.forward_with_mask` hands such a cache its forwards
(`GraphCache.forward_with_mask`). A forward of m tokens is padded to the next size in `BUCKETS` (the pad rows see
only slot 0 and are never seen: their keys land past the cache's length) and replays that size's graph, captured the
first time it is needed; a prefill (`last_only`), input embeddings or m > the largest bucket run the same static
path eagerly. On the CPU nothing is captured: the same padded static path runs eagerly (the dry run's check).
Sliding-window layers get a full-length slab like the others and their window in their own mask (`core.families`:
one static mask per layer kind, each query's window from its own position).

    with cuda_graphs(target):          # every CachedLM of `target` made inside uses a GraphCache
        speculative_generate(target, draft, ids, policy, 64)
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedModel

from spectree.core.families import attention_layout
from spectree.core.treeattn import SlabLayer, additive_mask, cache_len, causal_allowed, model_feed, record_positions

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)  # padded tree sizes that get a graph each
GRAPHED = "_spectree_cuda_graphs"  # the model attribute `cuda_graphs` sets


@contextmanager
def cuda_graphs(*models: PreTrainedModel):
    """Inside: every `CachedLM` of these models keeps a `GraphCache` (the engines' regime), and the caches (with
    their captured graphs) are reused from one generation to the next, as an engine captures once; dropped after."""
    for m in models:
        m.__dict__[GRAPHED] = []  # the model's graph caches (a plain attribute, not a submodule)
    try:
        yield
    finally:
        for m in models:
            m.__dict__.pop(GRAPHED, None)


def graphed(model: PreTrainedModel) -> bool:
    return GRAPHED in model.__dict__


def graph_cache(model: PreTrainedModel, owner: object) -> "GraphCache":
    """A `GraphCache` of `model` for `owner` (a `CachedLM`), emptied: one no live owner holds (its graphs already
    captured), else a new one. Two live owners never share one (a mix drafter keeps its own view of the target)."""
    caches = model.__dict__[GRAPHED]
    cache = next((c for c in caches if c.owner() is None or c.owner() is owner), None)
    if cache is None:
        cache = GraphCache(model)
        caches.append(cache)
    cache.owner = weakref.ref(owner)
    cache.empty()
    return cache


def bucket(m: int) -> Optional[int]:
    """The padded size a forward of m tokens replays (None: larger than every bucket, run eagerly)."""
    return next((b for b in BUCKETS if b >= m), None)


class GraphLayer(SlabLayer):
    """A cache layer on a fixed slab [1, H_kv, C, D]: `update` writes its m entries at slots write_at + 0..m-1
    (`write_at` a device tensor, so a replay writes where the host last set it) and returns the whole slab;
    `keys`/`values` stay views of the first L slots, set by the cache after each forward."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, write_at: torch.Tensor):
        super().__init__()
        self.slab_keys, self.slab_values, self.write_at = keys, values, write_at
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.keys, self.values = keys[:, :, :0], values[:, :, :0]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        slots = self.write_at + torch.arange(key_states.shape[-2], device=self.device)  # [m]
        self.slab_keys.index_copy_(2, slots, key_states)
        self.slab_values.index_copy_(2, slots, value_states)
        return self.slab_keys, self.slab_values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.slab_keys.shape[-2], 0


@dataclass
class Captured:
    """One padded size's static inputs and outputs, and its graph (None on the CPU: `run` reruns the forward)."""

    ids: torch.Tensor  # [1, n] long
    positions: torch.Tensor  # [1, n] long
    masks: dict  # {layer kind: additive [1, 1, n, C]}
    run: object  # () → model output, on the static inputs
    out: object = None
    graph: Optional[object] = None

    def replay(self):
        if self.graph is None:
            self.out = self.run()
        else:
            self.graph.replay()
        return self.out


class GraphCache(DynamicCache):
    """The static-slab KV cache of one model, and its captured forwards (see the module's docstring)."""

    def __init__(self, model: PreTrainedModel, capacity: int = 512):
        layout = attention_layout(model)  # a layer kind the tree path cannot serve: refused here, in one line
        super().__init__(config=model.config)
        self.model, self.layout = model, layout
        self.slot_positions = np.zeros(0, dtype=np.int64)  # each slot's position (`treeattn.record_positions`)
        self.owner = lambda: None  # the CachedLM using it (`graph_cache`)
        self.capture = model.device.type == "cuda"
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self._allocate(capacity)

    def _allocate(self, capacity: int, keep: int = 0) -> None:
        """Slabs of `capacity` slots (the first `keep` copied over from the old ones); captured graphs dropped."""
        cfg = self.model.config.get_text_config(decoder=True)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        shape = (1, getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads, capacity, head_dim)
        old = list(getattr(self, "layers", []))
        self.write_at = torch.zeros((), dtype=torch.long, device=self.model.device)
        make = lambda: torch.zeros(shape, dtype=self.model.dtype, device=self.model.device)  # noqa: E731
        self.layers = [GraphLayer(make(), make(), self.write_at) for _ in self.layout.kinds]
        for new, was in zip(self.layers, old):
            if keep and isinstance(was, GraphLayer):
                new.slab_keys[:, :, :keep] = was.slab_keys[:, :, :keep]
                new.slab_values[:, :, :keep] = was.slab_values[:, :, :keep]
        self._set_length(keep)
        self.graphs: dict[tuple[int, bool], Captured] = {}

    def empty(self) -> None:
        """No slot in use (the slabs and the captured graphs kept)."""
        self._set_length(0)
        self.slot_positions = np.zeros(0, dtype=np.int64)

    @property
    def capacity(self) -> int:
        return self.layers[0].slab_keys.shape[-2]

    def _set_length(self, length: int) -> None:
        for layer in self.layers:
            layer.keys, layer.values = layer.slab_keys[:, :, :length], layer.slab_values[:, :, :length]

    def _masks(self, allowed: torch.Tensor, positions: torch.Tensor, key_pos: np.ndarray, n: int) -> dict:
        """bool [m, L + m] → {layer kind: additive [1, 1, n, C]}: the real rows (at `positions` [m]) as allowed, each
        kind's window applied from the slots' positions `key_pos` [L + m]; pad rows (position 0) see slot 0 alone."""
        m, width = allowed.shape
        full = torch.zeros(n, self.capacity, dtype=torch.bool)
        full[:m, :width] = allowed
        full[m:, 0] = True
        if not self.layout.windowed:
            return dict.fromkeys(self.layout.windows, additive_mask(full.to(self.model.device), self.model.dtype))
        query = torch.zeros(n, dtype=torch.long)
        query[:m] = positions
        keys = np.zeros(self.capacity, dtype=np.int64)
        keys[:width] = key_pos[:width]
        return {kind: additive_mask(a.to(self.model.device), self.model.dtype)
                for kind, a in self.layout.allowed(full, query, keys).items()}

    def _captured(self, n: int, hidden: bool) -> Captured:
        dev = self.model.device
        ids = torch.zeros(1, n, dtype=torch.long, device=dev)
        positions = torch.zeros(1, n, dtype=torch.long, device=dev)
        masks = {kind: torch.zeros(1, 1, n, self.capacity, dtype=self.model.dtype, device=dev)
                 for kind in self.layout.windows}

        def run():
            return self.model(input_ids=ids, position_ids=positions, attention_mask=self.layout.pack(masks),
                              past_key_values=self, use_cache=True, output_hidden_states=hidden)

        return Captured(ids, positions, masks, run)

    def _graph(self, c: Captured) -> None:
        """Capture `c.run` (after warm-up runs on a side stream, as torch's CUDA-graph recipe asks)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                c.run()
        torch.cuda.current_stream().wait_stream(stream)
        c.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(c.graph, pool=self.pool):
            c.out = c.run()

    @torch.inference_mode()
    def forward_with_mask(self, inputs: torch.Tensor, position_ids: torch.Tensor, allowed: Optional[torch.Tensor],
                          output_hidden_states: bool = False, last_only: bool = False):
        """`treeattn.forward_with_mask`'s contract on the static slab: m new entries (token ids [m] or embeddings
        [m, H]) at positions [m], each seeing the slots `allowed` [m, L + m] gives it (None: causally); returns the
        model output for the m real rows (logits [1, m, V], [1, 1, V] when `last_only`)."""
        start, m = cache_len(self), int(inputs.shape[0])
        allowed = causal_allowed(start, m) if allowed is None else allowed
        n = bucket(m) if not (last_only or inputs.is_floating_point()) else None
        need = start + (n or m)
        if need > self.capacity:
            self._allocate(max(2 * self.capacity, 1 << (need - 1).bit_length()), keep=start)
        self.write_at.fill_(start)
        dev = self.model.device
        key_pos = record_positions(self, position_ids)
        if n is None:  # eagerly, on the same static slab
            masks = self._masks(allowed, position_ids, key_pos, m)
            out = self.model(**model_feed(self.model, inputs), position_ids=position_ids[None].to(dev),
                             attention_mask=self.layout.pack(masks), past_key_values=self, use_cache=True,
                             output_hidden_states=output_hidden_states, logits_to_keep=1 if last_only else 0)
        else:
            key = (n, output_hidden_states)
            c = self.graphs.get(key)
            if c is None:
                c = self.graphs[key] = self._captured(n, output_hidden_states)
            c.ids.zero_()
            c.ids[0, :m] = inputs.to(dev)
            c.positions.zero_()
            c.positions[0, :m] = position_ids.to(dev)
            for kind, mask in self._masks(allowed, position_ids, key_pos, n).items():
                c.masks[kind].copy_(mask)
            if self.capture and c.graph is None:
                self._graph(c)
            full = c.replay()
            out = type(full)(logits=full.logits[:, :m].clone(),
                             hidden_states=None if full.hidden_states is None else
                             tuple(h[:, :m].clone() for h in full.hidden_states))
        self._set_length(start + m)
        return out


__all__ = ["BUCKETS", "GraphCache", "GraphLayer", "bucket", "cuda_graphs", "graph_cache", "graphed"]
