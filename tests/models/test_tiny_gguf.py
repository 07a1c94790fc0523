"""The tiny GGUF fixture round-trips through transformers' GGUF loader, and bad files fail clearly."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_gguf import BOS_ID, EOS_ID, write_tiny_llama_gguf

from spectree.core.errors import SpectreeError
from spectree.models.gguf import check_gguf, load_gguf


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    return path, write_tiny_llama_gguf(path)


def test_tiny_gguf_roundtrip_matches_logits(tiny_gguf):
    from transformers import AutoModelForCausalLM

    path, ref = tiny_gguf
    check_gguf(path)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    assert model.config.num_key_value_heads == ref.config.num_key_value_heads
    assert not model.config.tie_word_embeddings

    ids = torch.randint(0, ref.config.vocab_size, (2, 19), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = ref.eval()(ids).logits
        got = model.eval()(ids).logits
    assert expected.abs().max() > 0.5  # weights large enough that a wrong q/k layout would show
    assert (expected - got).abs().max().item() < 1e-5


def test_tiny_gguf_loads_through_load_gguf_with_tokenizer(tiny_gguf, monkeypatch):
    """...its header parsed once for the check, the config, the weights and the tokenizer, one tensor-name map
    built (`gguf.one_parse`)."""
    import gguf

    parsed = []

    class Counting(gguf.GGUFReader):
        def __init__(self, *args, **kwargs):
            parsed.append(args[0])
            super().__init__(*args, **kwargs)

    maps = []
    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    monkeypatch.setattr(gguf, "get_tensor_name_map", lambda *a: maps.append(a) or gguf.TensorNameMap(*a))
    counting_maps = gguf.get_tensor_name_map
    path, ref = tiny_gguf
    model, tok = load_gguf(path)
    assert len(parsed) == 1 and gguf.GGUFReader is Counting
    assert len(maps) == 1 and gguf.get_tensor_name_map is counting_maps  # one name map, restored after
    assert (tok.bos_token_id, tok.eos_token_id) == (BOS_ID, EOS_ID)
    ids = tok("the cat sat on a mat").input_ids
    assert ids[0] == BOS_ID and all(0 <= i < ref.config.vocab_size for i in ids)
    assert tok.decode(ids, skip_special_tokens=True) == "the cat sat on a mat"
    x = torch.tensor([ids])
    with torch.no_grad():
        assert (ref.eval()(x).logits - model.eval()(x).logits).abs().max().item() < 1e-5


def test_truncated_gguf_gives_clear_error(tiny_gguf, tmp_path):
    path, _ = tiny_gguf
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(SpectreeError, match="truncated"):
        check_gguf(cut)


def test_wrong_magic_gives_clear_error(tiny_gguf, tmp_path):
    path, _ = tiny_gguf
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + path.read_bytes()[4:])
    with pytest.raises(SpectreeError, match="not a GGUF"):
        check_gguf(bad)
