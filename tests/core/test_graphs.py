"""The engines' regime (`core.graphs`): forwards on a static KV slab, padded to the next bucket (on a CUDA device
replayed from captured graphs; here the same padded static path runs eagerly). Decoding through it gives the tokens,
τ and γ of the slab cache's path for every policy family, including an EAGLE head that reads the target's hidden
states; its logits equal the slab path's; the slab grows when full; the real SmolLM2 target stays lossless."""
import pytest
import torch
from helpers import eagle_config, eagle_weights, tiny_llama, write_head

from spectree.core.decode import speculative_generate
from spectree.core.drafting import CachedLM, draft_model
from spectree.core.graphs import BUCKETS, GraphCache, bucket, cuda_graphs, graphed
from spectree.drafts.eagle import load_eagle_drafter
from spectree.strategies import parse_strategy

SPECS = ["ar", "chain:k=3", "kary:b=2,d=3", "eagle2:K=4,d_max=4,N=8", "dyspec:m=8,K=4,d_max=4",
         "pct:ratio=0.1,k=3,d_max=6", "c2t:beta=0.5,K=4,d_max=4,topk=8,classifier=smollm2-edd",
         "kary:b=2,d=2+lookup+suffix:k=2"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    target = tiny_llama(0, layers=3)
    head = write_head(tmp_path_factory.mktemp("head"), eagle_config(target), eagle_weights(target))
    return target, {"standalone": tiny_llama(1, layers=1), "eagle": load_eagle_drafter(head, target)}


def _steps(gen):
    return [(s.tau, s.gamma) for s in gen.steps]


@pytest.mark.parametrize("kind", ["standalone", "eagle"])
def test_decoding_through_the_graph_path_equals_the_slab_path(models, kind):
    target, drafts = models
    ids = [3, 4, 5, 6, 7, 8, 9, 3, 4, 5]
    draft_model = drafts[kind] if kind == "standalone" else target
    for spec in SPECS:
        policy = parse_strategy(spec)
        slab = speculative_generate(target, drafts[kind], ids, policy, 16, generator=torch.Generator().manual_seed(0))
        with cuda_graphs(target, draft_model):
            graphs = speculative_generate(target, drafts[kind], ids, policy, 16,
                                          generator=torch.Generator().manual_seed(0))
            assert graphed(target)
        assert not graphed(target)
        assert graphs.tokens == slab.tokens and _steps(graphs) == _steps(slab), spec


def test_padded_static_forwards_give_the_slab_paths_logits_and_the_slab_grows_when_full(models):
    target = models[0]
    ids = torch.randint(0, target.config.vocab_size, (40,), generator=torch.Generator().manual_seed(0))
    slab, static = CachedLM(target), CachedLM(target)
    static.cache = GraphCache(target, capacity=16)  # the prompt alone outgrows it
    a = slab.feed_chain(ids[:30], last_only=True).logits
    b = static.feed_chain(ids[:30], last_only=True).logits
    assert static.cache.capacity >= 30 and torch.allclose(a, b, atol=1e-5)
    parents = torch.tensor([-1, 0, 0, 1, 1, 2]).numpy()  # a tree of 6 (padded to 8) after the committed 30
    nodes = torch.arange(6).numpy()
    positions = 30 + torch.tensor([0, 1, 1, 2, 2, 2])
    a = slab.feed_nodes(parents, nodes, ids[30:36], positions).logits
    b = static.feed_nodes(parents, nodes, ids[30:36], positions).logits
    assert b.shape == a.shape == (1, 6, target.config.vocab_size) and torch.allclose(a, b, atol=1e-5)
    for lm in (slab, static):
        lm.keep_path(torch.tensor([0, 2, 5]))
    a, b = (lm.feed_chain(ids[36:40]).logits for lm in (slab, static))
    assert torch.allclose(a, b, atol=1e-5) and static.cache.get_seq_length() == 37


def test_every_size_pads_to_the_next_bucket():
    assert [bucket(m) for m in (1, 2, 3, 5, 9, 100, 128)] == [1, 2, 4, 8, 16, 128, 128]
    assert bucket(BUCKETS[-1] + 1) is None  # a larger forward runs the static path eagerly


@pytest.mark.slow
def test_the_real_target_is_lossless_through_the_graph_path(smollm2_pair):
    from spectree.prompts import parse_prompt_spec
    from spectree.speed.bench import find_mismatches, run_strategies

    target, draft, tok = smollm2_pair
    prompts = parse_prompt_spec("mtbench:1")
    policies = {s: parse_strategy(s) for s in ["ar", "chain:k=3", "eagle2:K=4,d_max=4,N=8"]}
    with cuda_graphs(target, draft_model(draft)):
        runs = run_strategies(smollm2_pair, prompts, policies, 16, warmup=False, hf_packed=False)
    assert not find_mismatches(smollm2_pair, runs, prompts)
    assert {r.strategy for r in runs} >= set(policies)
