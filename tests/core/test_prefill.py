"""One prefill per prompt (`core.decode.Prefill`): generations that start from a shared prompt cache — one after
another, every policy, a draft that reads the target's hidden states among them — give exactly the tokens, τ and γ
of generations that run the prompt themselves; `run_strategies(..., share_prefill=True)` (the lossless checks)."""
import pytest
import torch
from helpers import ToyChat, eagle_config, eagle_weights, tiny_llama, write_head

from spectree.core.decode import Prefill, speculative_generate
from spectree.drafts.eagle import load_eagle_drafter
from spectree.strategies import parse_strategy

SPECS = ["ar", "chain:k=3", "eagle2:K=4,d_max=3,N=8", "dyspec:m=8,K=4,d_max=4", "kary:b=2,d=2+lookup+suffix:k=2"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    target = tiny_llama(0, layers=3)
    head = write_head(tmp_path_factory.mktemp("head"), eagle_config(target), eagle_weights(target))
    return target, {"standalone": tiny_llama(1, layers=1), "eagle": load_eagle_drafter(head, target)}


@pytest.mark.parametrize("kind", ["standalone", "eagle"])
def test_generations_from_a_shared_prefill_equal_their_own(models, kind):
    target, drafts = models
    ids = [3, 4, 5, 6, 7, 8, 9, 3, 4, 5]
    shared = Prefill.of(target, ids)
    for spec in SPECS * 2:  # each policy twice, in a row, from the same prefill
        policy = parse_strategy(spec)
        own = speculative_generate(target, drafts[kind], ids, policy, 12, generator=torch.Generator().manual_seed(0))
        reused = speculative_generate(target, drafts[kind], ids, policy, 12, generator=torch.Generator().manual_seed(0),
                                      prefill=shared)
        assert reused.tokens == own.tokens, spec
        assert [(s.tau, s.gamma) for s in reused.steps] == [(s.tau, s.gamma) for s in own.steps], spec
    other = speculative_generate(target, drafts[kind], ids[:-1], parse_strategy("chain:k=2"), 6, prefill=shared)
    assert other.tokens == speculative_generate(target, drafts[kind], ids[:-1], parse_strategy("chain:k=2"), 6).tokens


def test_the_lossless_runs_share_one_prefill_per_prompt(models, monkeypatch):
    from spectree.core import decode
    from spectree.prompts import Prompt
    from spectree.speed.bench import run_strategies

    target, drafts = models
    prompts = [Prompt("toy", "a", "c", "x"), Prompt("toy", "b", "c", "y")]
    policies = {s: parse_strategy(s) for s in SPECS}
    made = []
    original = decode.Prefill.of
    monkeypatch.setattr(decode.Prefill, "of", staticmethod(lambda t, ids: made.append(ids) or original(t, ids)))
    shared = run_strategies((target, drafts["standalone"], ToyChat()), prompts, policies, 8, warmup=False,
                            hf_packed=False, share_prefill=True)
    assert made == [[3, 4, 5], [7, 8]]  # one prefill per prompt for all five policies
    own = run_strategies((target, drafts["standalone"], ToyChat()), prompts, policies, 8, warmup=False, hf_packed=False)
    assert [(r.strategy, r.prompt, r.tokens, r.tau_sum, r.gamma_sum) for r in shared] == \
        [(r.strategy, r.prompt, r.tokens, r.tau_sum, r.gamma_sum) for r in own]
