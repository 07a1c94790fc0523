"""EAGLE-1/2 heads (`eagle:FOLDER`): a head written here in EAGLE's checkpoint format (config.json + tensors named
as in EAGLE's `cnets1.Model`) drafts what EAGLE's forward computes (checked against a from-scratch reference), and
decoding with it is lossless."""
import json
import math

import numpy as np
import pytest
import torch
from helpers import eagle_config, eagle_weights, tiny_llama, write_head

from spectree.core.decode import speculative_generate
from spectree.core.errors import SpectreeError
from spectree.core.sampling import Sampling
from spectree.drafts.eagle import load_eagle_drafter
from spectree.strategies import parse_strategy


# --- a from-scratch EAGLE-1 head forward (cnets1.Model.forward + the target's lm_head) ----------------------------

def _rms(x, w, eps=1e-6):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rope(x, pos, theta=10000.0):  # x [T, heads, d]
    d = x.shape[-1]
    ang = pos[:, None].float() * (1.0 / theta ** (torch.arange(0, d, 2).float() / d))[None]  # [T, d/2]
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    rot = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def reference_outputs(W: dict, target, tokens: list[int], feats: torch.Tensor) -> torch.Tensor:
    """EAGLE's head outputs [T, H] for a chain of tokens [T] with features [T, H] at positions 0 … T-1."""
    c = target.config
    nh, nkv, d = c.num_attention_heads, c.num_key_value_heads, c.hidden_size // c.num_attention_heads
    emb = target.get_input_embeddings().weight[torch.tensor(tokens)]
    x = torch.cat([emb, feats], -1) @ W["fc.weight"].T + W["fc.bias"]  # embedding first, then the feature
    T, pos = len(tokens), torch.arange(len(tokens))
    a = x  # layer 0: no input_layernorm
    q = _rope((a @ W["layers.0.self_attn.q_proj.weight"].T).view(T, nh, d), pos)
    k = _rope((a @ W["layers.0.self_attn.k_proj.weight"].T).view(T, nkv, d), pos).repeat_interleave(nh // nkv, 1)
    v = (a @ W["layers.0.self_attn.v_proj.weight"].T).view(T, nkv, d).repeat_interleave(nh // nkv, 1)
    s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    x = x + torch.einsum("hqk,khd->qhd", s, v).reshape(T, -1) @ W["layers.0.self_attn.o_proj.weight"].T
    h = _rms(x, W["layers.0.post_attention_layernorm.weight"])
    up = torch.nn.functional.silu(h @ W["layers.0.mlp.gate_proj.weight"].T) * (h @ W["layers.0.mlp.up_proj.weight"].T)
    return x + up @ W["layers.0.mlp.down_proj.weight"].T  # no final norm


@pytest.fixture
def head_dir(tiny_target, tmp_path):
    return write_head(tmp_path / "eagle", eagle_config(tiny_target), eagle_weights(tiny_target))


def test_head_drafts_what_eagles_forward_computes(tiny_target, head_dir):
    """Root logits, a small tree (siblings read their parent's head output) and an advance by two tokens equal
    the reference: fc(cat(embedding, feature)) → layer → target lm_head, token t_{j+1} paired with the target's
    final-norm state h_j, a draft node with its parent's head output."""
    W = eagle_weights(tiny_target)
    drafter = load_eagle_drafter(head_dir, tiny_target)
    ids = [3, 9, 27, 81, 5, 15, 7]  # prompt = ids[:5] (root 5); then 15, 7 are committed by an advance
    lm_head = tiny_target.lm_head.weight
    with torch.inference_mode():
        out = tiny_target(torch.tensor([ids]), output_hidden_states=True)
        h = tiny_target.model(torch.tensor([ids])).last_hidden_state[0]  # [7, H] after the final norm
        assert torch.allclose(out.hidden_states[drafter.hidden_layer][0], h, atol=1e-6)  # the state decode feeds
        root = drafter.start(ids[:5], h[:4])

        toks, feats = ids[1:5], h[:4]
        ref = reference_outputs(W, tiny_target, toks, feats)
        assert torch.allclose(root, ref[-1] @ lm_head.T, atol=1e-4)

        # tree: root(0) → a(1), b(2); a → c(3); fed a layer at a time, as draft_tree does
        a, b, c, L = 11, 40, 60, 5
        parents = np.array([-1, 0, 0, 1])
        lm = drafter.lm
        first = lm.feed_nodes(parents, np.array([1, 2]), torch.tensor([a, b]), torch.tensor([L, L])).logits[0]
        second = lm.feed_nodes(parents, np.array([3]), torch.tensor([c]), torch.tensor([L + 1])).logits[0]
        o_root = ref[-1]
        ref_a = reference_outputs(W, tiny_target, toks + [a], torch.cat([feats, o_root[None]]))[-1]
        ref_b = reference_outputs(W, tiny_target, toks + [b], torch.cat([feats, o_root[None]]))[-1]
        ref_c = reference_outputs(W, tiny_target, toks + [a, c], torch.cat([feats, o_root[None], ref_a[None]]))[-1]
        assert torch.allclose(first, torch.stack([ref_a, ref_b]) @ lm_head.T, atol=1e-4)
        assert torch.allclose(second[0], ref_c @ lm_head.T, atol=1e-4)
        lm.rollback()

        # accept 15, bonus 7: tokens 15, 7 paired with the target's states of the old root (5) and of 15
        adv = drafter.advance(ids[5:7], h[4:6])
        ref2 = reference_outputs(W, tiny_target, ids[1:7], h[:6])
        assert torch.allclose(adv, ref2[-1] @ lm_head.T, atol=1e-4)


def test_a_wrong_concatenation_order_would_be_caught(tiny_target, head_dir):
    """The reference is sensitive to what it checks: feature-first gives other logits."""
    W = eagle_weights(tiny_target)
    swapped = dict(W, **{"fc.weight": torch.cat([W["fc.weight"][:, 32:], W["fc.weight"][:, :32]], 1)})
    drafter = load_eagle_drafter(head_dir, tiny_target)
    ids = [3, 9, 27, 81, 5]
    with torch.inference_mode():
        h = tiny_target.model(torch.tensor([ids])).last_hidden_state[0]
        root = drafter.start(ids, h[:4])
        wrong = reference_outputs(swapped, tiny_target, ids[1:], h[:4])[-1] @ tiny_target.lm_head.weight.T
    assert not torch.allclose(root, wrong, atol=1e-2)


@pytest.fixture(scope="module")
def small_vocab_target():
    return tiny_llama(seed=3, layers=2, vocab=12)  # a random head guesses right often enough to accept tokens


@pytest.mark.parametrize("fmt,embed", [("safetensors", False), ("bin", True)])
def test_greedy_decoding_with_an_eagle_head_is_lossless(small_vocab_target, tmp_path, fmt, embed):
    target = small_vocab_target
    folder = write_head(tmp_path / "head", eagle_config(target), eagle_weights(target, seed=1, embed=embed), fmt)
    drafter = load_eagle_drafter(folder, target)
    assert drafter.lm.model.model.embed_tokens.embed is target.get_input_embeddings()  # equal → shared
    assert drafter.lm.model.lm_head is target.lm_head
    for ids in ([1, 7, 3, 4, 8], [5]):  # a one-token prompt too (its root gets a zero feature)
        with torch.inference_mode():
            ref = target.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                                  eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
        for spec in ("chain:k=3", "eagle2:K=3,d_max=3,N=6", "dyspec:m=4,K=3,d_max=3"):
            out = speculative_generate(target, drafter, ids, parse_strategy(spec), 24)
            assert out.tokens == ref, spec
            assert sum(s.tau for s in out.steps) > 0, spec  # advances with accepted tokens were exercised


def test_sampled_decoding_runs(small_vocab_target, tmp_path):
    target = small_vocab_target
    drafter = load_eagle_drafter(write_head(tmp_path / "h", eagle_config(target), eagle_weights(target)), target)
    out = speculative_generate(target, drafter, [1, 2, 3], parse_strategy("eagle2:K=3,d_max=3,N=6"), 16,
                               Sampling(temperature=1.0), generator=torch.Generator().manual_seed(0))
    assert len(out.tokens) == 16 and all(0 <= t < 12 for t in out.tokens)


def test_a_head_that_does_not_fit_is_refused_before_decoding(tiny_target, tmp_path):
    cfg = eagle_config(tiny_target, hidden_size=16, num_attention_heads=2, num_key_value_heads=2)
    small = dict(eagle_weights(tiny_target), **{"fc.weight": torch.zeros(16, 32)})  # a head for a 16-wide target
    with pytest.raises(SpectreeError, match="hidden size 16 .* target's 32"):
        load_eagle_drafter(write_head(tmp_path / "narrow", cfg, small), tiny_target)
    with pytest.raises(SpectreeError, match="vocabulary of 50"):
        load_eagle_drafter(write_head(tmp_path / "vocab", eagle_config(tiny_target, vocab_size=50),
                                      eagle_weights(tiny_target)), tiny_target)
    eagle3 = dict(eagle_weights(tiny_target), **{"fc.weight": torch.zeros(32, 96), "d2t": torch.zeros(5).long()})
    with pytest.raises(SpectreeError, match="EAGLE-3"):
        load_eagle_drafter(write_head(tmp_path / "e3", eagle_config(tiny_target), eagle3), tiny_target)
    missing = eagle_weights(tiny_target)
    missing.pop("layers.0.mlp.up_proj.weight")
    with pytest.raises(SpectreeError, match="up_proj"):
        load_eagle_drafter(write_head(tmp_path / "missing", eagle_config(tiny_target), missing), tiny_target)
    with pytest.raises(SpectreeError, match="no config.json"):
        load_eagle_drafter(tmp_path / "nowhere", tiny_target)
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text(json.dumps(eagle_config(tiny_target)))
    with pytest.raises(SpectreeError, match="no model.safetensors"):
        load_eagle_drafter(tmp_path / "noweights", tiny_target)


def test_forced_agreement_and_timing_read_the_head_like_live_decoding(small_vocab_target, tmp_path):
    """Logging's teacher-forced walk (`walk_continuation`) feeds the head as live decoding does, and the cost
    model's bare timing forward (no features set) runs on it."""
    from spectree.analysis.acceptance import chain_taus, forced_chain_agreement
    from spectree.speed.costmodel import time_forward

    target = small_vocab_target
    drafter = load_eagle_drafter(write_head(tmp_path / "h", eagle_config(target), eagle_weights(target, seed=2)),
                                 target)
    ids = [2, 4, 6, 1]
    agree = forced_chain_agreement(target, drafter, ids, 20, depth=3, eos_ids=())
    live = speculative_generate(target, drafter, ids, parse_strategy("chain:k=3"), 20)
    assert chain_taus(agree, 3) == [s.tau for s in live.steps]
    with torch.inference_mode():
        assert time_forward(drafter.lm.model, 2, 8, 1) > 0


def test_a_head_with_qkv_biases_loads_them_and_no_o_proj_bias(small_vocab_target, tmp_path):
    """EAGLE's Qwen heads set `qkv_bias`: q/k/v carry biases, o_proj none (HF's attention_bias adds one: zero)."""
    target = small_vocab_target
    W = eagle_weights(target, seed=4)
    kv = W["layers.0.self_attn.k_proj.weight"].shape[0]
    W.update({"layers.0.self_attn.q_proj.bias": torch.full((32,), 0.5),
              "layers.0.self_attn.k_proj.bias": torch.ones(kv), "layers.0.self_attn.v_proj.bias": torch.ones(kv)})
    drafter = load_eagle_drafter(write_head(tmp_path / "q", eagle_config(target, qkv_bias=True), W), target)
    attn = drafter.lm.model.model.layers[0].self_attn
    assert bool((attn.q_proj.bias == 0.5).all()) and bool((attn.o_proj.bias == 0).all())
    ids = [1, 7, 3, 4]
    with torch.inference_mode():
        ref = target.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    assert speculative_generate(target, drafter, ids, parse_strategy("chain:k=3"), 12).tokens == ref
