"""Draft checkpoints stored as int8 rows (`drafts.storage`): the rounding bound, the loader reading either precision,
the in-place re-store keeping metadata and card, and export in either precision."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from spectree.core.errors import SpectreeError
from spectree.drafts.edd import one_layer_draft
from spectree.models.loading import load_trained_draft
from spectree.drafts.storage import pack, quantize_rows, restore, unpack


def test_int8_rows_round_every_entry_to_within_half_its_rows_scale():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 96, generator=g) * torch.logspace(-3, 1, 64)[:, None]  # rows of very different scales
    w[5] = 0.0  # an all-zero row stays zero
    codes, scale = quantize_rows(w)
    assert codes.dtype == torch.int8 and scale.shape == (64,) and int(codes.abs().max()) == 127
    err = (codes.float() * scale[:, None] - w).abs()
    assert bool((err <= scale[:, None] / 2 + 1e-12).all()) and float(err[5].max()) == 0.0
    assert float((err / w.abs().amax(1, keepdim=True).clamp(min=1e-30)).max()) <= 1 / 254 + 1e-7


def test_pack_stores_matrices_as_codes_and_scales_and_vectors_in_fp16(tmp_path):
    tensors = {"m": torch.randn(8, 4), "v": torch.randn(4)}
    packed, meta = pack(tensors, "int8")
    assert meta == {"precision": "int8"} and set(packed) == {"m", "m.scale", "v"}
    assert packed["m"].dtype == torch.int8 and packed["v"].dtype == torch.float16
    save_file(packed, str(tmp_path / "x.safetensors"))
    with safe_open(str(tmp_path / "x.safetensors"), framework="pt") as f:
        back = unpack(f)
    assert set(back) == {"m", "v"} and torch.allclose(back["m"], tensors["m"], atol=float(tensors["m"].abs().max()) / 254)
    with pytest.raises(SpectreeError, match="unknown draft precision 'int4'"):
        pack(tensors, "int4")


def test_an_int8_checkpoint_loads_as_its_dequantised_weights_and_keeps_its_metadata_and_card(tiny_target, tmp_path):
    layer = one_layer_draft(tiny_target).model.layers[0]
    fp16 = {f"layer.{k}": v.half().contiguous() for k, v in layer.state_dict().items()}
    path = tmp_path / "d.safetensors"
    save_file(fp16, str(path), metadata={"kind": "edd", "hidden_layer": "2"})
    path.with_suffix(".json").write_text(json.dumps({"name": "d", "metrics": {"top1": [0.5]}}))
    before = load_trained_draft(path, tiny_target).lm.model.model.layers[0].state_dict()
    size = path.stat().st_size
    restore(path, "int8")
    assert path.stat().st_size < size
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"kind": "edd", "hidden_layer": "2", "precision": "int8"}
        expected = {k.removeprefix("layer."): v for k, v in unpack(f).items()}
    assert json.loads(path.with_suffix(".json").read_text()) == {"name": "d", "metrics": {"top1": [0.5]},
                                                                 "precision": "int8"}
    drafter = load_trained_draft(path, tiny_target)
    after = drafter.lm.model.model.layers[0].state_dict()
    assert drafter.hidden_layer == 2
    for name, w in after.items():
        assert torch.equal(w, expected[name])  # the loader reads exactly the dequantised weights
        assert torch.allclose(w, before[name], atol=float(before[name].abs().max()) / 254 + 1e-6), name
        assert (w.dim() == 1) == torch.equal(w, before[name])  # norms stay fp16, matrices are rounded
