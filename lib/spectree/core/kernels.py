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

`pack_linears` switches a model in place (`nn.Linear` → `PackedLinear`, same parameters and state dict,
attention → `gqa_sdpa_attention`); `stock_kernels` runs a block on HF's stock kernels, e.g. the HF `generate`
reference in `bench`. On CUDA, without oneDNN, or while autograd records, `PackedLinear` is a plain `nn.Linear`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from spectree.core.errors import SpectreeError

BATCH_HINT = 16  # the row count the weights are laid out for: 8–17 are equally good here, 1 is not (measured)
GQA_SDPA = "spectree_gqa_sdpa"  # the attention implementation name models run under after `pack_linears`
STOCK_SDPA = "sdpa"


def gqa_sdpa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                       is_causal: Optional[bool] = None, **kwargs) -> tuple[torch.Tensor, None]:
    """HF's `sdpa` attention, except that a masked query reads grouped key/value heads in place.

    query: [B, H, q, D]; key, value: [B, H_kv, S, D]; attention_mask: additive [B, 1, q, ≥ S] or None.
    Returns the attention output [B, q, H, D] as HF's attention functions do.
    """
    if attention_mask is None or query.shape[1] == key.shape[1]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask[:, :, :, : key.shape[2]],
                                         dropout_p=dropout, scale=scaling, enable_gqa=True)  # [B, H, q, D]
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(GQA_SDPA, gqa_sdpa_attention)
AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)


def packing_available(model: torch.nn.Module) -> bool:
    """oneDNN is built in and the model's weights live on the CPU in fp32."""
    p = next(model.parameters(), None)
    return (p is not None and p.device.type == "cpu" and p.dtype == torch.float32
            and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class PackedLinear(torch.nn.Linear):
    """An `nn.Linear` that, in inference, multiplies by a prepacked oneDNN copy of its weight (repacked if
    the weight was changed in place since). Its parameters and state dict are those of the `nn.Linear`."""

    packed: Optional[torch.Tensor]
    packed_version: int
    use_packed: bool

    def pack(self) -> None:
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), BATCH_HINT)
        self.packed_version = self.weight._version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.use_packed or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            return F.linear(x, self.weight, self.bias)
        if self.weight._version != self.packed_version:
            self.pack()
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def pack_linears(*models: torch.nn.Module) -> int:
    """Switch every `nn.Linear` of the models to `PackedLinear` and HF models' `sdpa` attention to
    `gqa_sdpa_attention` (idempotent; shared modules once); returns how many linears were switched — 0 where
    packing is not available (then nothing changes)."""
    count = 0
    for model in models:
        if not packing_available(model):
            continue
        _set_attention(model, STOCK_SDPA, GQA_SDPA)
        for module in model.modules():
            if type(module) is torch.nn.Linear:
                module.__class__ = PackedLinear
                module.pack()
            if isinstance(module, PackedLinear) and not getattr(module, "use_packed", False):
                module.use_packed = True
                count += 1
    return count


def is_packed(model: torch.nn.Module) -> bool:
    return any(isinstance(m, PackedLinear) and m.use_packed for m in model.modules())


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


def wants_packed(kernels: str) -> bool:
    """The `kernels` parameter of the speed notebook and commands: "packed" or "stock"."""
    if kernels not in ("packed", "stock"):
        raise SpectreeError(f"unknown kernels '{kernels}': use 'packed' (oneDNN prepacked weights) or 'stock'")
    return kernels == "packed"
