"""The architecture matrix: tiny random models of every mainstream Hugging Face decoder family, built from a config
(`tests/families.py`: Llama, Qwen2, Qwen3, Mistral with a sliding window, Gemma-2 with alternating sliding and full
layers and soft-capping, Gemma-3 with `layer_types`, Phi-3, OLMo-2, Mixtral as the MoE), through the cached tree path
(slab cache, kept paths, rollback, the draft's catch-up, grouped attention): each family as target with a one-layer
draft of its family and with itself as draft is greedy-lossless against HF `generate` for chain, EAGLE-2, DySpec and a
retrieval hybrid on a prompt of over four windows; replay of a logbook equals live decoding; the graphs regime's
static slab (its CPU dry run) is lossless; a layer-skip draft of a sliding-window target works; at T > 0 a
sampling-safe and a fixed-proposal policy keep the target's distribution on a sliding-window family (χ²). A layer
kind the path cannot serve is refused in one line when the cache is built, and a mask wider than the keys is an
error."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import transformers
from families import FAMILIES, SLIDING, WINDOW, family_model, prompt_ids
from helpers import PARENTS, make_tree

from spectree.core.decode import Prefill, speculative_generate
from spectree.core.drafting import CachedLM
from spectree.core.errors import SpectreeError
from spectree.core.graphs import GraphCache, cuda_graphs
from spectree.core.sampling import Sampling
from spectree.core.treeattn import slab_cache
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay
from spectree.strategies import parse_strategy

SPECS = ["chain:k=3", "eagle2:K=4,d_max=3,N=12", "dyspec:m=8,K=4,d_max=3", "kary:b=2,d=2+lookup:len=3+suffix:k=2,len=3"]
NEW = 16  # new tokens per generation
PROMPT = prompt_ids(110)  # over four windows of the sliding-window families


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is several times faster than two on a busy machine
    yield
    torch.set_num_threads(threads)


@functools.lru_cache(maxsize=None)
def trio(family: str):
    """(4-layer target, 1-layer draft of its family, HF generate's greedy continuation of PROMPT)."""
    target, draft = family_model(family, 4, seed=0), family_model(family, 1, seed=1)
    with torch.inference_mode():
        ref = target.generate(torch.tensor([PROMPT]), max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(PROMPT):].tolist()
    return target, draft, ref


@functools.lru_cache(maxsize=None)
def live(family: str, drafter: str, spec: str):
    """The generation of PROMPT by `family`'s target with `drafter` ("family": its 1-layer draft, "itself") under
    `spec` (made once: the lossless and the replay tests read the same runs)."""
    target, draft, _ = trio(family)
    return speculative_generate(target, draft if drafter == "family" else target, PROMPT, parse_strategy(spec), NEW)


def test_the_prompt_is_longer_than_four_windows():
    assert len(PROMPT) > 4 * WINDOW


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_lossless_with_a_draft_of_its_family_and_with_itself(family):
    ref = trio(family)[2]
    assert len(set(ref)) >= 3  # the continuation follows the context (not one token repeated)
    for drafter in ("family", "itself"):
        for spec in SPECS:
            assert live(family, drafter, spec).tokens == ref, (spec, drafter)
    assert max(s.tau for s in live(family, "itself", SPECS[1]).steps) > 1  # long acceptances, paths moved in the cache


@pytest.mark.parametrize("family", SLIDING)
def test_every_tree_node_sees_the_window_of_its_own_position(family):
    """A tree over a prompt of four windows: each node's logits are those of HF's own forward over its path, whose
    window ends at the node (committed length − 1 + depth), not at the root."""
    target = trio(family)[0]
    tree = make_tree(PARENTS, prefix_len=len(PROMPT))  # depth 3
    tree.tokens = torch.tensor([PROMPT[-1], 11, 12, 13, 14, 15, 16])
    lm = CachedLM(target)
    lm.feed_chain(torch.tensor(PROMPT[:-1]))
    logits = lm.feed_tree(tree, torch.arange(len(tree))).logits[0]  # [n, V]
    for leaf in tree.leaves().tolist():
        path = tree.path_to(leaf)
        with torch.inference_mode():
            ref = target(torch.tensor([PROMPT[:-1] + tree.tokens[path].tolist()])).logits[0, -len(path):]
        assert torch.allclose(logits[path], ref, atol=1e-4), (family, leaf)


@pytest.mark.parametrize("family", FAMILIES)
def test_replay_equals_live_on_every_family(family):
    target, draft, _ = trio(family)

    class FixedIds:  # stands in for a tokenizer's chat template: the prompt's ids
        def apply_chat_template(self, messages, add_generation_prompt=True):
            return PROMPT

    cfg = LogConfig(max_new_tokens=NEW, K=4, d_max=3, beam=16)  # every node above depth 3 expanded
    logged = log_prompt(target, draft, FixedIds(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    for spec in SPECS:
        steps, ran = replay([logged], parse_strategy(spec)), live(family, "family", spec)
        assert steps.tau.tolist() == [s.tau for s in ran.steps], spec
        assert steps.gamma.tolist() == [s.gamma for s in ran.steps], spec


@pytest.mark.parametrize("family", FAMILIES)
def test_the_graphs_regimes_static_slab_is_lossless_on_every_family(family):
    """The engines' regime on its CPU dry run: padded forwards on a static slab, one mask per layer kind."""
    target, _, ref = trio(family)
    with cuda_graphs(target):
        for spec in SPECS:
            gen = speculative_generate(target, target, PROMPT, parse_strategy(spec), NEW)
            assert gen.tokens == ref, spec
        assert isinstance(CachedLM(target).cache, GraphCache)


@pytest.mark.parametrize("family", SLIDING)
def test_a_layer_skip_draft_of_a_sliding_window_target_is_lossless(family):
    from spectree.models.loading import load_draft

    target, _, ref = trio(family)
    draft = load_draft("layerskip:2", target)
    kinds = getattr(target.config, "layer_types", None)
    assert getattr(draft.config, "layer_types", None) == (kinds[:2] if kinds else None)
    taus = []
    for spec in SPECS[:2]:
        gen = speculative_generate(target, draft, PROMPT, parse_strategy(spec), NEW)
        assert gen.tokens == ref, spec
        taus += [s.tau for s in gen.steps]
    assert max(taus) > 1


# --- T > 0 on a sliding-window family: the χ² harness's test on live decoding ----------------------------------------

V, W = 8, 4  # a vocabulary small enough for a χ² over pairs, a window far shorter than the prompt


def small_mistral(layers: int, seed: int, window):
    cfg = transformers.MistralConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                     num_key_value_heads=2, head_dim=8, num_hidden_layers=layers, sliding_window=window,
                                     max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=0,
                                     eos_token_id=1, pad_token_id=1, initializer_range=0.5)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def exact_joint(model, ids: list[int], sampling: Sampling) -> np.ndarray:
    """[V, V]: P(x1, x2) = T(x1 | ids) T(x2 | ids + x1) from HF's own forwards (its window applied)."""
    with torch.inference_mode():
        first = sampling.probs(model(torch.tensor([ids])).logits[0, -1]).double()
        second = torch.stack([sampling.probs(model(torch.tensor([ids + [x]])).logits[0, -1]).double()
                              for x in range(V)])
    joint = (first[:, None] * second).numpy()
    return joint / joint.sum()


@pytest.mark.parametrize("spec", ["dyspec:m=6,K=3,d_max=3", "eagle2:K=3,d_max=3,N=6"])  # sampling-safe; fixed proposals
def test_sampled_decoding_keeps_the_target_distribution_on_a_sliding_window_family(spec):
    """The first two tokens committed at T = 1 follow the target's joint (χ², p > 0.01), and the same counts reject
    the joint of the target without its window (p < 1e-6): the test sees the window."""
    from test_stochastic_verification import chi2_pvalue

    target, draft, unwindowed = small_mistral(2, 0, W), small_mistral(1, 1, W), small_mistral(2, 0, None)
    ids = torch.randint(0, V, (4 * W,), generator=torch.Generator().manual_seed(3)).tolist()
    sampling, policy = Sampling(1.0), parse_strategy(spec)
    prefill, gen = Prefill.of(target, ids), torch.Generator().manual_seed(0)
    counts = np.zeros((V, V))
    for _ in range(300):
        x1, x2 = speculative_generate(target, draft, ids, policy, 2, sampling, generator=gen, prefill=prefill).tokens[:2]
        counts[x1, x2] += 1
    _, p, _ = chi2_pvalue(counts.ravel(), exact_joint(target, ids, sampling).ravel())
    _, p_without, _ = chi2_pvalue(counts.ravel(), exact_joint(unwindowed, ids, sampling).ravel())
    assert p > 0.01 and p_without < 1e-6, (p, p_without)


# --- what the path cannot serve: refused in one line, when the cache is built -------------------------------------

@pytest.mark.parametrize("config, kind", [("Llama4TextConfig", "chunked attention"),
                                          ("Qwen3NextConfig", "linear attention")])
def test_a_layer_kind_the_tree_path_cannot_serve_is_refused_when_the_cache_is_built(config, kind):
    with pytest.raises(SpectreeError, match=f"layer 0 is {kind}.*cannot serve") as err:
        slab_cache(getattr(transformers, config)(num_hidden_layers=4))
    assert "\n" not in str(err.value)


def test_mixed_layers_in_a_model_that_takes_one_mask_are_refused():
    """Mistral's forward takes one mask for every layer: full and sliding layers in it cannot each get theirs."""
    cfg = transformers.MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                     num_key_value_heads=2, head_dim=8, num_hidden_layers=2, sliding_window=4,
                                     layer_types=["sliding_attention", "full_attention"])
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    for build in (CachedLM, GraphCache):
        with pytest.raises(SpectreeError, match="takes one mask for all of them"):
            build(model)


def test_a_mask_whose_width_is_not_the_key_length_is_an_error(tiny_target):
    from spectree.core.kernels import gqa_sdpa_attention

    module = tiny_target.model.layers[0].self_attn
    query, key = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 20, 8)
    for width in (21, 19):
        with pytest.raises(SpectreeError, match=f"mask of width {width} for 20 cached keys"):
            gqa_sdpa_attention(module, query, key, key, torch.zeros(1, 1, 3, width))
    assert gqa_sdpa_attention(module, query, key, key, torch.zeros(1, 1, 3, 20))[0].shape == (1, 3, 4, 8)
