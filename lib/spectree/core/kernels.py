"""Prepacked CPU matrix products: every `nn.Linear` of a model multiplies by a oneDNN copy of its weight
reordered once, instead of letting MKL repack it on every call.

Why (measured on this 2-core AVX2 host, fp32): `F.linear` with a few rows repacks the weight on every
call, so the 49,152 × 576 LM head costs 8.6 ms for 1 row but 19–22 ms for 2–17 rows; oneDNN's
`_linear_pointwise` on a weight reordered in advance costs 4.4 ms for 1 row, 4.7 for 2 and 9.9 for 17.
A whole target forward over 2 tokens falls from 1.8× to 1.2× a 1-token one: the price of verifying a
few candidates. The products are the same up to float rounding (logits within ~1e-4), so greedy output
can differ from the stock kernels' only at near-ties, as between any two kernels.

Attention: under a mask (every forward of our decoder), HF's `sdpa` copies each key/value head once per
query head of its group (`repeat_kv`), or for one query regroups the query heads. `gqa_sdpa_attention` lets
SDPA read the shared heads in place (`enable_gqa`): bit-identical to the copies on this CPU build, and per
layer after 400 tokens 41 instead of 83 µs for one query, 111 instead of 191 for three (measured); a 3-token
target forward after 300 tokens fell from ~52 to ~49 ms. Unmasked calls (HF `generate`'s) go to HF's own
function unchanged.

Which is faster depends on the machine: on an AVX-512 host `F.linear` needs no repacking and beats the packed
product for 1–2 rows of the small layers (~25 µs of oneDNN overhead a call), while the packed one still wins from
~4–17 rows. So a `PackedLinear` takes the packed product only from `min_rows` rows on. `crossovers` times both
kernels for each weight shape of a model on this machine (cached per machine), and the kernels named "auto" use
those crossovers; "packed" packs every product; "stock" is HF's.

The crossover is timed on cold weights, as a forward meets them: each kernel runs over copies of the weight that
together pass the last-level cache (`COLD_BYTES`), since a forward streams every layer's weight from memory once.
One weight timed over and over stays in cache and misleads: on this 2-core host (32 MiB L3), a 576 × 576 product
over 2 rows took 76 µs with `F.linear` and 95 µs packed when hot, but 192 and 99 µs cold. Hot timings put the
layers' crossovers at 48–64 rows, and the target's forward after 256 tokens took 48 ms over 1 token, 70 over 2 and 83
over 8; on cold crossovers (1–4 rows) 43, 46–50 and 59–63 ms, as with every product packed. A single row count can
time wrong by chance, so the threshold is the one that gains most over the whole grid (`best_threshold`).

`pack_linears` switches a model in place (`nn.Linear` → `PackedLinear`, same parameters and state dict,
attention → `gqa_sdpa_attention`); `stock_kernels` runs a block on HF's stock kernels, e.g. the HF `generate`
reference in `bench`. On CUDA, without oneDNN, or while autograd records, `PackedLinear` is a plain `nn.Linear`.
"""
from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from spectree.core.errors import SpectreeError
from spectree.core.machine import machine_id, smoke_timing
from spectree.core.paths import atomic_write_text, cache_dir

COLD_BYTES = 64 << 20  # the weights one crossover timing streams through: past a last-level cache (32 MiB here)
BATCH_HINT = 16  # the row count the weights are laid out for: 8–17 are equally good here, 1 is not (measured)
GQA_SDPA = "spectree_gqa_sdpa"  # the attention implementation name models run under after `pack_linears`
STOCK_SDPA = "sdpa"
KERNELS = ("auto", "packed", "stock")  # the choices of every `kernels` parameter; "auto" is the default
ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # the row counts `crossover` times: tree sizes, a chain's 1
NEVER = sys.maxsize  # `min_rows` of a shape whose packed product never wins


def gqa_sdpa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                       is_causal: Optional[bool] = None, **kwargs) -> tuple[torch.Tensor, None]:
    """HF's `sdpa` attention, except that a masked query reads grouped key/value heads in place.

    query: [B, H, q, D]; key, value: [B, H_kv, S, D]; attention_mask: additive or bool [B, 1, q, S] or None.
    Returns the attention output [B, q, H, D] as HF's attention functions do. A mask whose width is not the key
    length S is refused (HF's own function cuts a wider one to S without a word, which would hide a cache and a
    mask that disagree, e.g. a sliding-window cache shorter than the mask built for it).
    """
    if attention_mask is not None and attention_mask.shape[-1] != key.shape[2]:
        raise SpectreeError(f"an attention mask of width {attention_mask.shape[-1]} for {key.shape[2]} cached keys "
                            f"(layer {getattr(module, 'layer_idx', '?')}): the mask and the KV cache disagree")
    if attention_mask is None or query.shape[1] == key.shape[1]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                         scale=scaling, enable_gqa=True)  # [B, H, q, D]
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(GQA_SDPA, gqa_sdpa_attention)
AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)


def packing_available(model: torch.nn.Module) -> bool:
    """oneDNN is built in and the model's weights live on the CPU in fp32."""
    p = next(model.parameters(), None)
    return (p is not None and p.device.type == "cpu" and p.dtype == torch.float32
            and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class PackedLinear(torch.nn.Linear):
    """An `nn.Linear` that, in inference and from `min_rows` rows of input on, multiplies by a prepacked oneDNN
    copy of its weight (repacked if the weight was changed in place since). Its parameters and state dict are those
    of the `nn.Linear`."""

    packed: Optional[torch.Tensor]
    packed_version: int
    use_packed: bool
    min_rows: int = 1

    def pack(self) -> None:
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), BATCH_HINT)
        self.packed_version = self.weight._version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (not self.use_packed or x.numel() < self.min_rows * x.shape[-1]
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        if self.weight._version != self.packed_version:
            self.pack()
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def pack_linears(*models: torch.nn.Module, min_rows: Optional[dict[tuple[int, int], int]] = None) -> int:
    """Switch every `nn.Linear` of the models to `PackedLinear` and HF models' `sdpa` attention to
    `gqa_sdpa_attention` (idempotent; shared modules once); returns how many linears were switched — 0 where
    packing is not available (then nothing changes). `min_rows`: (out_features, in_features) → the fewest rows
    that take the packed product (`crossovers`); absent shapes (and None): 1, always packed."""
    count = 0
    for model in models:
        if not packing_available(model):
            continue
        _set_attention(model, STOCK_SDPA, GQA_SDPA)
        for module in model.modules():
            if type(module) is torch.nn.Linear:
                module.__class__ = PackedLinear
                module.pack()
            if isinstance(module, PackedLinear):
                module.min_rows = (min_rows or {}).get((module.out_features, module.in_features), 1)
                if not getattr(module, "use_packed", False):
                    module.use_packed = True
                    count += 1
    return count


def is_packed(model: torch.nn.Module) -> bool:
    return any(isinstance(m, PackedLinear) and m.use_packed for m in model.modules())


def kernels_in_use(model: torch.nn.Module) -> str:
    """"stock", "packed" (every product packed) or "auto" (some shapes take F.linear for few rows)."""
    packed = [m for m in model.modules() if isinstance(m, PackedLinear) and m.use_packed]
    return "stock" if not packed else "packed" if all(m.min_rows == 1 for m in packed) else "auto"


def _seconds(stmt: str, **env) -> float:
    """Median seconds of `stmt` (torch's benchmark Timer, on every thread in use, at least 20 ms of runs; 5 ms in
    smoke mode, `machine.smoke_timing`)."""
    timer = Timer(stmt, globals={"F": F, "torch": torch, **env}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=0.005 if smoke_timing() else 0.02).median


def crossover(out_features: int, in_features: int, rows=ROWS) -> int:
    """The row count of `rows` from which the packed product of an [out_features, in_features] weight is taken:
    the threshold that gains most over `F.linear` on this machine, each row count of the grid weighing alike
    (the largest Σ over r ≥ threshold of log(stock / packed seconds), timed now, a few seconds), so that one noisy
    row count does not move it; `NEVER` where no threshold gains. Each kernel is timed per product over
    `COLD_BYTES` of copies of the weight, so that every product reads its weight from memory, as in a forward."""
    gen = torch.Generator().manual_seed(0)
    copies = max(1, math.ceil(COLD_BYTES / (4 * out_features * in_features)))
    weights = [torch.randn(out_features, in_features, generator=gen) for _ in range(copies)]
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, BATCH_HINT) for w in weights]
    gains = []
    for r in rows:
        x = torch.randn(1, r, in_features, generator=gen)
        stock = _seconds("for w in ws: F.linear(x, w)", x=x, ws=weights)
        ours = _seconds("for p in ps: torch.ops.mkldnn._linear_pointwise(x, p, None, 'none', [], '')", x=x, ps=packed)
        gains.append(math.log(stock / ours))
    return best_threshold(list(rows), gains)


def best_threshold(rows: list[int], gains: list[float]) -> int:
    """The row count r of `rows` that maximises the summed `gains` (log speedups of packing) over rows ≥ r;
    `NEVER` when no such sum is positive."""
    tails = np.cumsum(gains[::-1])[::-1]  # tails[i]: Σ gains[i:]
    best = int(np.argmax(tails))
    return rows[best] if tails[best] > 0 else NEVER


def crossovers(*models: torch.nn.Module, rows=ROWS) -> dict[tuple[int, int], int]:
    """`crossover` of every `nn.Linear` shape of the models, from this machine's cache
    (kernels/crossover-<machine>.json, valid for one torch version, row grid and `COLD_BYTES`; "-smoke" in smoke
    mode) where it has them, timed and added to it where not."""
    path = cache_dir() / "kernels" / f"crossover-{machine_id()}{'-smoke' if smoke_timing() else ''}.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    terms = {"torch": torch.__version__, "rows": list(rows), "weights": f"cold ({COLD_BYTES >> 20} MiB)",
             "rule": "best threshold"}
    if any(saved.get(k) != v for k, v in terms.items()):  # timed under other terms (before: hot, every larger row)
        saved = {**terms, "min_rows": {}}
    shapes = sorted({(m.out_features, m.in_features) for model in models for m in model.modules()
                     if isinstance(m, torch.nn.Linear)})
    missing = [s for s in shapes if f"{s[0]}x{s[1]}" not in saved["min_rows"]]
    for out_features, in_features in missing:
        saved["min_rows"][f"{out_features}x{in_features}"] = crossover(out_features, in_features, rows)
    if missing:
        atomic_write_text(path, json.dumps(saved, indent=1))
    return {s: saved["min_rows"][f"{s[0]}x{s[1]}"] for s in shapes}


def use_kernels(kernels: str, *models: torch.nn.Module) -> None:
    """Put the models (None skipped) on `kernels`: "auto" (packed from each shape's measured crossover on),
    "packed" (every product) or "stock" (left as loaded)."""
    models = [m for m in models if m is not None and packing_available(m)]
    if check_kernels(kernels) == "stock" or not models:
        return
    pack_linears(*models, min_rows=crossovers(*models) if kernels == "auto" else None)


def _set_attention(model: torch.nn.Module, current: str, new: str) -> bool:
    """Switch an HF model's attention implementation from `current` to `new`; False if it ran another one."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != current or not hasattr(model, "set_attn_implementation"):
        return False
    model.set_attn_implementation(new)
    return True


@contextmanager
def stock_kernels(*models: torch.nn.Module):
    """Run the block on HF's stock kernels: `F.linear` in every `PackedLinear` of the models and HF's `sdpa`
    attention (None models skipped)."""
    models = [model for model in models if model is not None]
    switched = [m for model in models for m in model.modules() if isinstance(m, PackedLinear) and m.use_packed]
    for m in switched:
        m.use_packed = False
    attention = [model for model in models if _set_attention(model, GQA_SDPA, STOCK_SDPA)]
    try:
        yield
    finally:
        for m in switched:
            m.use_packed = True
        for model in attention:
            _set_attention(model, STOCK_SDPA, GQA_SDPA)


def check_kernels(kernels: str) -> str:
    """The `kernels` parameter of `load_pair`, the speed notebooks and commands: one of `KERNELS`."""
    if kernels not in KERNELS:
        raise SpectreeError(f"unknown kernels '{kernels}': use 'auto' (prepacked oneDNN weights where they are faster "
                            "on this machine), 'packed' (always) or 'stock' (HF's)")
    return kernels
