"""Random-weight Llama pairs from a config alone (`models.random_pairs`): the shapes are the releases' own, the tracked
tokenizer reads without a download and fits every shape, models are seeded, the sharpened head separates the greedy
choice, and greedy decoding on such a pair is lossless in bf16 on the CPU (the dtype path a GPU run takes)."""
from __future__ import annotations

import pytest
import torch

from spectree.core.errors import SpectreeError
from spectree.models.random_pairs import SHAPES, check_shape, llama_config, random_llama, random_pair, tracked_tokenizer


def parameters(shape: str) -> int:
    """Weights of a shape's model with tied embeddings, from its config alone (no weights built)."""
    c = llama_config(shape)
    head_dim = c.hidden_size // c.num_attention_heads
    attn = c.hidden_size * head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    mlp = 3 * c.hidden_size * c.intermediate_size
    layer = attn + mlp + 2 * c.hidden_size
    return c.num_hidden_layers * layer + c.vocab_size * c.hidden_size + c.hidden_size


@pytest.mark.parametrize("shape, billions", [("smollm2-135m", 0.135), ("llama-3.2-1b", 1.236),
                                             ("llama-3.1-8b", 7.50)])  # 8B: 8.03 with its untied head
def test_shapes_are_the_releases_sizes(shape, billions):
    assert parameters(shape) / 1e9 == pytest.approx(billions, rel=0.01)
    assert not llama_config(shape).tie_word_embeddings and llama_config(shape)._attn_implementation == "sdpa"


def test_the_tracked_tokenizer_needs_no_download_and_fits_every_shape():
    from spectree.prompts import chat_ids

    tok = tracked_tokenizer()
    assert len(tok) == 49152 and tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    ids = chat_ids(tok, "Hello")
    assert tok.decode(ids).endswith("<|im_start|>assistant\n") and "Hello<|im_end|>" in tok.decode(ids)
    assert all(SHAPES[s]["vocab_size"] >= len(tok) for s in SHAPES)
    with pytest.raises(SpectreeError, match="unknown model shape 'llama-70b'"):
        check_shape("llama-70b")


@pytest.mark.slow
def test_the_tracked_tokenizer_is_the_smollm2_targets(smollm2_pair):
    """Its ids are those of the SmolLM2 target's own tokenizer (the shipped pair's, read from the GGUF's cache)."""
    from spectree.prompts import chat_ids

    theirs, ours = smollm2_pair[2], tracked_tokenizer()
    text = "def f(x):\n    return x ** 2  # Ünïcode ✓"
    assert ours(text).input_ids == theirs(text).input_ids
    assert chat_ids(ours, text) == chat_ids(theirs, text)


def test_random_models_are_seeded_and_built_in_the_asked_dtype():
    a, b = random_llama("tiny", seed=3), random_llama("tiny", seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    half = random_llama("tiny", seed=3, dtype=torch.bfloat16, layers=1)
    assert half.dtype == torch.bfloat16 and half.config.num_hidden_layers == 1
    assert torch.get_default_dtype() == torch.float32  # restored


def test_the_sharpened_head_separates_the_greedy_choice():
    """Relative top-2 logit gaps under bf16's tie threshold (2%) are rarer with the sharpened head."""
    def near_ties(model) -> float:
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(len(tracked_tokenizer()), (4, 64), generator=g)
        with torch.no_grad():
            top = model(ids).logits.float().topk(2, dim=-1).values
        return float(((top[..., 0] - top[..., 1]) / top[..., 0].abs() < 0.02).float().mean())

    sharp, flat = random_llama("tiny", seed=0), random_llama("tiny", seed=0, spread=0.0)
    assert near_ties(sharp) < 0.5 * near_ties(flat)


def test_greedy_decoding_on_a_random_pair_is_lossless_in_bf16():
    from spectree.core.decode import as_drafter, speculative_generate
    from spectree.drafts.mix import MixDrafter
    from spectree.speed.bench import tie_gap, top2
    from spectree.speed.references import hf_generate
    from spectree.core.sampling import Sampling
    from spectree.prompts import chat_ids
    from spectree.strategies import parse_strategy

    target, draft, tok = random_pair("tiny", dtype=torch.bfloat16)
    drafter = MixDrafter(as_drafter(draft), target, 0.7)
    ids = chat_ids(tok, "Name three rivers.")
    ref = hf_generate(target, ids, 16, Sampling(), tok.eos_token_id)
    for spec in ("chain:k=3", "eagle2:K=4,d_max=4,N=8", "dyspec:m=8,K=4,d_max=4"):
        out = speculative_generate(target, drafter, ids, parse_strategy(spec), 16, eos_ids=(tok.eos_token_id,)).tokens
        if out != ref:  # only a near-tie of bf16 may explain a difference
            pos = next(i for i, (x, y) in enumerate(zip(ref, out)) if x != y)
            top1, gap = top2(target, ids, ref, pos)
            assert gap < tie_gap(torch.bfloat16, top1), (spec, pos, gap)
