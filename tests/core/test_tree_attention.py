"""Tree attention on transformers' own Llama (tiny random weights): logits and KV bookkeeping."""
import torch
from helpers import PARENTS, make_tree, tiny_llama

from spectree.core.decode import speculative_generate
from spectree.core.drafting import CachedLM
from spectree.core.sampling import Sampling
from spectree.strategies.chain import Chain
from spectree.strategies.static import Kary


def sequential_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0]


def test_tree_forward_matches_sequential_logits_on_every_path(tiny_target):
    prefix = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
    tree = make_tree(PARENTS, prefix_len=len(prefix))
    tree.tokens = torch.tensor([38, 11, 12, 13, 14, 15, 16])
    lm = CachedLM(tiny_target)
    lm.feed_chain(torch.tensor(prefix[:-1]))
    logits = lm.feed_tree(tree, torch.arange(len(tree))).logits[0]  # [n, V]
    for leaf in tree.leaves().tolist():
        path = tree.path_to(leaf)
        ref = sequential_logits(tiny_target, prefix[:-1] + tree.tokens[path].tolist())[-len(path):]
        assert torch.allclose(logits[path], ref, atol=1e-5)


def test_a_chain_feed_takes_hf_own_causal_path_and_refuses_uncommitted_entries(tiny_target):
    import pytest

    from spectree.core.errors import SpectreeError

    prompt = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
    lm = CachedLM(tiny_target)
    with torch.inference_mode():
        assert torch.equal(lm.feed_chain(torch.tensor(prompt)).logits[0], sequential_logits(tiny_target, prompt))
        later = lm.feed_chain(torch.tensor([7, 8])).logits[0]  # after the cached prompt: HF's mask over the cache
    assert torch.allclose(later, sequential_logits(tiny_target, prompt + [7, 8])[-2:], atol=1e-5)
    tree = make_tree([-1, 0], prefix_len=len(prompt) + 2)
    tree.tokens = torch.tensor([8, 11])
    lm.feed_tree(tree, torch.arange(2))
    with pytest.raises(SpectreeError, match="uncommitted"):
        lm.feed_chain(torch.tensor([9]))


def test_keep_path_leaves_the_cache_of_the_sequential_prefix(tiny_target):
    prefix = [5, 6, 7, 8]
    tree = make_tree(PARENTS, prefix_len=len(prefix))
    tree.tokens = torch.tensor([8, 21, 22, 23, 24, 25, 26])
    lm = CachedLM(tiny_target)
    lm.feed_chain(torch.tensor(prefix[:-1]))
    lm.feed_tree(tree, torch.arange(len(tree)))
    lm.keep_path(torch.tensor([0, 1, 3]))
    nxt = lm.feed_chain(torch.tensor([55])).logits[0, -1]
    ref = sequential_logits(tiny_target, prefix + tree.tokens[[1, 3]].tolist() + [55])[-1]
    assert lm.committed == len(prefix) + 3
    assert torch.allclose(nxt, ref, atol=1e-5)


def hf_greedy(model, ids, n):
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, len(ids):].tolist()


def test_greedy_tree_decoding_matches_autoregressive_with_a_perfect_draft(tiny_target):
    """Draft = target: every draft token is accepted, so τ = d + 1 and long acceptances are exercised."""
    ids = [1, 17, 29, 4, 8]
    ref = hf_greedy(tiny_target, ids, 30)
    for policy in (Chain(k=4), Kary(b=2, d=3)):
        gen = speculative_generate(tiny_target, tiny_target, ids, policy, 30)
        assert gen.tokens == ref and len(gen.tokens) == len(ref)
        assert all(s.tau == policy.d_max + 1 for s in gen.steps[:-1])


def test_greedy_tree_decoding_matches_autoregressive_with_a_weak_draft(tiny_target):
    draft = tiny_llama(seed=1, layers=1)
    ids = [2, 40, 41, 42]
    ref = hf_greedy(tiny_target, ids, 25)
    for policy in (Chain(k=3), Kary(b=3, d=2), Kary(b=2, d=4)):
        gen = speculative_generate(tiny_target, draft, ids, policy, 25)
        assert gen.tokens == ref


def test_decoding_stops_after_eos_like_generate(tiny_target):
    ids = [1, 17, 29, 4, 8]
    ref = hf_greedy(tiny_target, ids, 30)
    eos = ref[7]
    gen = speculative_generate(tiny_target, tiny_target, ids, Kary(b=2, d=3), 30, eos_ids=(eos,))
    assert gen.tokens == ref[: ref.index(eos) + 1]


def test_sampling_is_reproducible_with_an_explicit_generator(tiny_target):
    ids = [1, 2, 3]
    runs = [speculative_generate(tiny_target, tiny_target, ids, Kary(b=2, d=2), 20, Sampling(0.8, 0.95),
                                 generator=torch.Generator().manual_seed(7)).tokens for _ in range(2)]
    assert runs[0] == runs[1]


def test_slab_cache_holds_what_a_dynamic_cache_holds_across_growth_truncation_and_kept_paths(monkeypatch):
    from transformers import DynamicCache

    from spectree.core import treeattn

    monkeypatch.setattr(treeattn, "SLAB_MIN", 4)  # grow a few times within a short test
    gen = torch.Generator().manual_seed(0)
    slab, ref = treeattn.slab_cache(), DynamicCache()
    for m, keep in [(3, None), (5, torch.tensor([4, 6])), (1, None), (9, torch.tensor([7, 9, 12])), (2, None)]:
        k, v = torch.randn(1, 2, m, 8, generator=gen), torch.randn(1, 2, m, 8, generator=gen)
        n = treeattn.cache_len(ref)
        for cache in (slab, ref):
            cache.update(k, v, 0)
            if keep is not None:  # a tree step: keep some of the new entries after the first n
                treeattn.keep_slots(cache, n, keep)
        assert torch.equal(slab.layers[0].keys, ref.layers[0].keys)
        assert torch.equal(slab.layers[0].values, ref.layers[0].values)
    assert isinstance(slab.layers[0], treeattn.SlabLayer) and slab.layers[0].slab_keys.shape[-2] >= 12


def test_grouped_attention_without_copies_is_bit_identical_to_copied_heads(tiny_target):
    from transformers.integrations.sdpa_attention import (
        repeat_kv,
        sdpa_attention_forward,
    )

    from spectree.core.kernels import gqa_sdpa_attention

    module = tiny_target.model.layers[0].self_attn  # 4 query heads sharing 2 key/value heads
    gen = torch.Generator().manual_seed(1)
    for q in (1, 3, 9):
        query, key, value = (torch.randn(1, h, s, 8, generator=gen) for h, s in ((4, q), (2, 20), (2, 20)))
        mask = torch.zeros(1, 1, q, 20).masked_fill_(torch.rand(1, 1, q, 20, generator=gen) < 0.3, -3.0e38)
        mask[..., 0] = 0.0  # every row sees something
        ours, _ = gqa_sdpa_attention(module, query, key, value, mask)
        copied = torch.nn.functional.scaled_dot_product_attention(query, repeat_kv(key, 2), repeat_kv(value, 2),
                                                                  attn_mask=mask).transpose(1, 2)
        hf, _ = sdpa_attention_forward(module, query, key, value, mask)  # for q = 1 it regroups the query heads
        assert ours.shape == (1, q, 4, 8) and torch.equal(ours, copied) and torch.allclose(ours, hf, atol=1e-6)
