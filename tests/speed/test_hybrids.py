"""Notebook 12's rows and claims (`speed.hybrids`) on hand-made runs: which labels it builds, how a claim reads the
spread over repeats, the best hybrid against HF generate per prompt set, and the lossless grid's verdict."""
import pandas as pd
import pytest

from spectree.analysis.claims import FAILS, HOLDS, INCONCLUSIVE
from spectree.speed.bench import HF, HF_LOOKUP, HF_PACKED, Mismatch, Run
from spectree.speed import hybrids
from spectree.strategies import Hybrid, parse_strategy

TREE = "pct:ratio=0.2"


def runs_at(speeds: dict[str, float], prompts: list[str], category: str = "c", repeats: int = 3,
            jitter: float = 0.02, tokens: list[int] = (1,) * 32) -> list[Run]:
    """Runs whose tokens/s is `speeds[method]` (HF's is 1), each repeat a little slower than the last."""
    out = []
    for p in prompts:
        for r in range(repeats):
            for method, speed in speeds.items():
                out.append(Run(method, p, category, list(tokens), 1 / speed * (1 + jitter * r), 10, 10, 5, 0.1, 0.5,
                               repeat=r))
    return out


def test_the_rows_are_ar_each_mode_each_tree_and_each_tree_with_each_mode():
    rows = hybrids.hybrid_strategies({"PCT": parse_strategy(TREE)}, ["lookup", "suffix:k=3"])
    assert list(rows) == [hybrids.AR, "lookup", "suffix:k=3", "PCT", "PCT+lookup", "PCT+suffix:k=3"]
    assert isinstance(rows["PCT+suffix:k=3"], Hybrid) and rows["PCT+suffix:k=3"].spec == f"{TREE}+suffix:k=3"
    assert rows["lookup"].drafting.d_max == 0  # prompt lookup alone: no draft model
    grid = hybrids.family_grid(["ar", "chain:k=2"], ["lookup"])
    assert list(grid) == ["ar+lookup", "chain:k=2+lookup"]


@pytest.mark.parametrize("speedups, verdict", [([1.2, 1.1, 1.05], HOLDS), ([0.9, 0.8, 0.95], FAILS),
                                                ([1.2, 0.9, 1.1], INCONCLUSIVE), ([1.2, 1.3], INCONCLUSIVE)])
def test_a_speedup_read_from_repeats_holds_only_when_every_repeat_clears_the_bar(speedups, verdict):
    evidence = hybrids.repeat_rule(pd.Series(speedups), 1.0, "x")
    assert evidence.verdict == verdict and evidence.n == len(speedups)
    assert (evidence.low, evidence.high) == (min(speedups), max(speedups))


def test_the_best_hybrid_is_judged_per_prompt_set_with_speculation_alone_beside_it():
    speeds = {HF: 1.0, HF_PACKED: 1.2, HF_LOOKUP: 1.5, hybrids.AR: 1.1, TREE: 1.4, f"{TREE}+lookup": 2.5}
    runs = (runs_at(speeds, [f"copy/{i}" for i in range(8)])
            + runs_at({**speeds, f"{TREE}+lookup": 1.3}, [f"mtbench/{i}" for i in range(8)]))
    copy_claim, = [c for c in hybrids.retrieval_claims(runs, "copy", [f"{TREE}+lookup"], [TREE]) if "copy" in c["name"]]
    assert copy_claim["verdict"] == HOLDS and "same kernels" in copy_claim["ours"] and "HF prompt lookup" in copy_claim["ours"]
    overall = hybrids.retrieval_claims(runs, "copy", [f"{TREE}+lookup"], [TREE], goal_all=2.5)[0]
    assert overall["verdict"] == FAILS  # 2.5× on copy, 1.3× elsewhere: pooled well under 2.5×
    assert overall["paper"] == "—" and overall["goal"] == "≥ 2.5× (issue goal)"  # an issue's bar, not a paper's


def test_length_claims_compare_each_long_length_with_the_short_prompts():
    base = {HF: 1.0, HF_PACKED: 1.2, hybrids.AR: 1.05, TREE: 1.4}
    runs = (runs_at(base, ["s0", "s1"], "short") + runs_at({**base, TREE: 1.35}, ["a0", "a1"], "1k")
            + runs_at({**base, hybrids.AR: 0.9, TREE: 1.1}, ["b0", "b1"], "2k"))
    ar, tree = hybrids.length_claims(runs, [TREE])
    assert ar["verdict"] == FAILS and "2k: 0.9" in ar["ours"]  # AR falls under HF at 2k
    assert tree["verdict"] == FAILS  # 1.1 at 2k < 1.4 − 0.1
    assert hybrids.length_claims([r for r in runs if r.category != "2k"], [TREE])[1]["verdict"] == HOLDS
    assert ar["paper"] == tree["paper"] == "—" and "ours" in ar["goal"] and "short − 0.1" in tree["goal"]


def test_the_lossless_grid_fails_on_any_mismatch_and_needs_enough_prompts():
    speeds = {HF: 1.0, "ar+lookup": 1.1}
    runs = runs_at(speeds, [f"p{i}" for i in range(4)], repeats=1)
    assert hybrids.lossless_claim(runs, min_prompts=4)["verdict"] == HOLDS
    assert "EDD" in hybrids.lossless_claim(runs, min_prompts=4)["paper"]  # the paper's premise; our bar is the goal
    assert hybrids.lossless_claim(runs, min_prompts=4)["goal"] == "0 mismatches, ≥ 4 prompts"
    assert hybrids.lossless_claim(runs, min_prompts=5)["verdict"] == INCONCLUSIVE
    skipped = hybrids.lossless_claim(runs, ["ar+lookup", "cape:d=4+lookup"], min_prompts=4)
    assert skipped["verdict"] == INCONCLUSIVE and "cape:d=4+lookup" in skipped["ours"]  # a skipped setting is named
    runs[-1].tokens = [2] * 32
    assert hybrids.lossless_claim(runs, min_prompts=4)["verdict"] == FAILS
    # a near-tie of float32's logit noise passes, as in the GPU checklist's claim; any other mismatch fails
    label, prompt = runs[-1].strategy, runs[-1].prompt
    tie = Mismatch(prompt, label, 2, 32, 32, 3.8e-6, True, 13.6)  # 4 ulps apart at 13.6: the AVX2 host's case
    held = hybrids.lossless_claim(runs, min_prompts=4, mismatches=[tie])
    assert held["verdict"] == HOLDS and f"near-ties (rounding): {label} on {prompt} at 2 (top-2 gap 3.8e-06)" in held["ours"]
    bug = Mismatch(prompt, label, 2, 32, 32, 2.5, False, 13.6)
    assert hybrids.lossless_claim(runs, min_prompts=4, mismatches=[tie, bug])["verdict"] == FAILS


@pytest.mark.slow
def test_the_grid_over_processes_runs_what_one_process_runs(monkeypatch):
    """`grid_runs` with SPECTREE_WORKERS 2 (prompts split over spawned processes, the pair loaded by name in each)
    gives the runs of one process: same order, tokens, τ and γ; a setting over the node guard is dropped from all."""
    import torch

    from spectree.drafts.pairs import load_pair
    from spectree.prompts import parse_prompt_spec

    pair, prompts = "smollm2-edd", parse_prompt_spec("mtbench:2+humaneval:1")
    grid = hybrids.family_grid(["ar", "chain:k=2", "kary:b=11,d=3"], ["lookup"])  # 1,464 nodes > 1,024: skipped
    models, threads = load_pair(pair), torch.get_num_threads()
    torch.set_num_threads(1)  # as each of the two workers
    try:
        out = {}
        for workers in ("1", "2"):
            monkeypatch.setenv("SPECTREE_WORKERS", workers)
            skipped: dict = {}
            out[workers] = (hybrids.grid_runs(models, pair, prompts, grid, 6, skipped=skipped), skipped)
    finally:
        torch.set_num_threads(threads)
    (one, skip_one), (two, skip_two) = out["1"], out["2"]
    assert [(r.strategy, r.prompt, r.tokens, r.tau_sum, r.gamma_sum) for r in one] == \
           [(r.strategy, r.prompt, r.tokens, r.tau_sum, r.gamma_sum) for r in two]
    assert {r.prompt for r in two} == {p.key for p in prompts} and len({r.strategy for r in two}) == 3  # HF + 2
    assert set(skip_one) == set(skip_two) == {"kary:b=11,d=3+lookup"}
