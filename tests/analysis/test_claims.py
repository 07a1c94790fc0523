"""One claim vocabulary and its rules: the rule helpers on inputs whose interval is known, and for notebooks
01–03 and 08–09 a claim function on fixed inputs that hold, do not hold, and are too small to tell (notebooks
04–07, whose token claims resample prompts: test_analysis)."""
import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sstats

from spectree.claims import claims as C
from spectree.claims import text as CT
from spectree.claims.verdicts import VERDICTS
from spectree.analysis import edd_claims as E
from spectree.analysis import sweep_claims as S
from spectree.claims import rules as R
from spectree.analysis import sparsity_claims, surfaces
from spectree.analysis.acceptance import draft_claims, pooled_report
from spectree.speed.bench import Run
from spectree.speed.references import HF
from spectree.claims.names import AR_LABEL
from spectree.speed.speed_claims import speed_claims
from spectree.speed.tables import budget_labels

LIB = Path(__file__).resolve().parents[2] / "lib" / "spectree"


def verdicts(claims):
    return [c["verdict"] for c in claims]


# --- the vocabulary and the rules ---------------------------------------------------------------------------

def test_only_verdicts_defines_the_vocabulary():
    owners = [p.relative_to(LIB).as_posix() for p in LIB.rglob("*.py")
              if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "VERDICTS" for t in n.targets)
                     for n in ast.walk(ast.parse(p.read_text())))]
    assert owners == ["claims/verdicts.py"]
    assert VERDICTS == ("holds", "does not hold", "inconclusive", "not testable")


def test_interval_rule_reads_the_whole_interval_against_the_bar():
    rule = C.interval_rule
    assert rule(0.6, 0.55, 0.65, 0.5, 100, "x").verdict == "holds"
    assert rule(0.4, 0.35, 0.45, 0.5, 100, "x").verdict == "does not hold"
    assert rule(0.52, 0.45, 0.6, 0.5, 100, "x").verdict == "inconclusive"  # the interval covers the bar
    assert rule(0.4, 0.35, 0.45, 0.5, 100, "x", above=False).verdict == "holds"
    assert rule(0.6, 0.55, 0.65, 0.5, 100, "x", above=False).verdict == "does not hold"
    assert rule(0.5, 0.5, 0.6, 0.5, 100, "x").verdict == "holds"  # ≥ includes the bar ...
    assert rule(0.5, 0.5, 0.6, 0.5, 100, "x", strict=True).verdict == "inconclusive"  # ... > does not
    assert rule(0.5, 0.4, 0.5, 0.5, 100, "x", strict=True).verdict == "does not hold"
    assert rule(0.6, 0.55, 0.65, 0.5, 7, "x", min_n=8, unit="prompts").verdict == "inconclusive"
    assert rule(0.6, float("nan"), float("nan"), 0.5, 100, "x").verdict == "inconclusive"
    ev = rule(0.6, 0.55, 0.65, 0.5, 7, "the rate", min_n=8, unit="prompts")
    assert ev.rule == "95% interval of the rate ≥ 0.5, n ≥ 8 prompts" and ev.n == 7


def test_proportion_rule_uses_the_wilson_interval():
    ev = C.proportion_rule(700, 1000, 0.5, "agreement")
    assert ev.verdict == "holds" and ev.low == pytest.approx(0.6709, abs=1e-4) and ev.n == 1000
    assert C.proportion_rule(300, 1000, 0.5, "agreement").verdict == "does not hold"
    small = C.proportion_rule(12, 22, 0.5, "agreement")  # 0.55, but its interval 0.35–0.73 covers the bar
    assert small.verdict == "inconclusive" and small.low < 0.5 < small.high and small.n == 22
    assert C.proportion_rule(0, 0, 0.5, "agreement").verdict == "inconclusive"


def test_mean_correlation_and_tolerance_rules():
    rng = np.random.default_rng(0)
    assert C.mean_rule(rng.normal(0.3, 1, 400), 0.0, "d").verdict == "holds"
    assert C.mean_rule(rng.normal(-0.3, 1, 400), 0.0, "d").verdict == "does not hold"
    assert C.mean_rule(rng.normal(0.3, 1, 20), 0.0, "d", min_n=30).verdict == "inconclusive"
    x = rng.random(300)
    assert C.correlation_rule(x, x + 0.05 * rng.random(300), 0.5, "ρ").verdict == "holds"
    assert C.correlation_rule(x, rng.random(300), 0.5, "ρ").verdict == "does not hold"
    assert C.correlation_rule(x[:8], x[:8], 0.5, "ρ", min_n=10).verdict == "inconclusive"
    assert C.tolerance_rule(0.05, 0.01, 900, "gap", "points").verdict == "holds"
    assert C.tolerance_rule(-0.05, 0.01, 900, "gap", "points").verdict == "does not hold"
    assert C.tolerance_rule(0.005, 0.01, 900, "gap", "points").verdict == "inconclusive"


def test_bootstrap_rule_is_paired_seeded_and_needs_enough_prompts():
    rng = np.random.default_rng(1)
    a = rng.normal(3.0, 0.5, 12)  # prompts differ a lot, the paired difference little
    b, ones = a - 0.2 + rng.normal(0, 0.02, 12), np.ones(12)
    ev = C.bootstrap_rule([a, ones, b, ones], C.pooled_difference, 0.0, "τ(a) − τ(b)", strict=True)
    assert ev.verdict == "holds" and 0 < ev.low < 0.2 < ev.high < 0.25 and ev.n == 12
    assert ev == C.bootstrap_rule([a, ones, b, ones], C.pooled_difference, 0.0, "τ(a) − τ(b)", strict=True)
    assert C.bootstrap_rule([b, ones, a, ones], C.pooled_difference, 0.0, "d", strict=True).verdict == "does not hold"
    few = C.bootstrap_rule([a[:5], ones[:5], b[:5], ones[:5]], C.pooled_difference, 0.0, "d", strict=True)
    assert few.verdict == "inconclusive" and few.n == 5 and "n ≥ 8 prompts" in few.rule


def test_resample_weights_draw_prompts_with_replacement_seeded():
    w = R.resample_weights(12, 500, seed=0)
    assert w.shape == (500, 12) and (w.sum(1) == 12).all() and (w == R.resample_weights(12, 500, seed=0)).all()
    assert (w != R.resample_weights(12, 500, seed=1)).any() and 0.3 < (w == 0).mean() < 0.4  # ≈ (11/12)^12
    codes, g = R.prompt_codes(["b", "a", "b", "c"])
    assert codes.tolist() == [1, 0, 1, 2] and g == 3
    assert R.prompt_sums(codes, g, [1.0, 2.0, 3.0, 4.0]).tolist() == [2.0, 4.0, 4.0]
    assert R.prompt_sums(codes, g, None, [0, 1, 1, 1], 2).tolist() == [[0, 1], [1, 1], [0, 1]]


@pytest.mark.parametrize("n_prompts, size", [(6, 40), (30, 400), (300, 10)])  # by prompt tensors / by token
def test_spearman_statistic_is_scipys_on_the_resampled_tokens(n_prompts, size):
    rng = np.random.default_rng(n_prompts)
    codes = np.repeat(np.arange(n_prompts), size)
    x, y = rng.integers(0, 15, len(codes)).astype(float), (rng.random(len(codes)) < 0.4).astype(float)  # ties
    w = R.resample_weights(n_prompts, 5, seed=3)
    ours = R.spearman_statistic(x, y, codes, n_prompts)(w)
    for row, rho in zip(w, ours):
        expanded = np.repeat(np.arange(len(codes)), row[codes])  # every drawn prompt's tokens, drawn twice: twice
        assert rho == pytest.approx(sstats.spearmanr(x[expanded], y[expanded]).statistic, abs=1e-12)
    assert np.isnan(R.spearman_statistic(x, np.ones_like(y), codes, n_prompts)(w)).all()  # constant y


def test_cluster_rule_reads_the_interval_over_prompts():
    values = np.r_[np.full(50, 0.3), np.full(50, 0.1)] + np.tile([0.05, -0.05], 50)  # 10 prompts of 10 tokens
    codes, g = R.prompt_codes(np.repeat(np.arange(10), 10))
    mean = R.ratio_statistic(R.prompt_sums(codes, g, values), R.prompt_sums(codes, g))
    ev = C.cluster_rule(mean, g, 0.0, "mean(d)", strict=True, tokens=100, min_tokens=30)
    assert ev.verdict == "holds" and ev.n == 10 and ev.estimate == pytest.approx(0.2)
    assert 0.1 < ev.low < 0.2 < ev.high < 0.3  # prompt means 0.3 or 0.1; over tokens it would be ± 0.02
    assert ev == C.cluster_rule(mean, g, 0.0, "mean(d)", strict=True, tokens=100, min_tokens=30)  # seeded
    assert ev.rule == "95% bootstrap interval over prompts of mean(d) > 0, n ≥ 8 prompts and ≥ 30 tokens"
    assert C.cluster_rule(mean, g, 0.35, "mean(d)").verdict == "does not hold"
    assert C.cluster_rule(mean, g, 0.15, "mean(d)").verdict == "inconclusive"
    assert C.cluster_rule(mean, g, 0.0, "mean(d)", min_n=12).verdict == "inconclusive"
    assert C.cluster_rule(mean, g, 0.0, "mean(d)", tokens=100, min_tokens=200).verdict == "inconclusive"
    undefined = C.cluster_rule(lambda w: np.where(w[:, 0] > 0, 1.0, np.nan), g, 0.0, "x")  # NaN in ~35%
    assert undefined.verdict == "inconclusive" and np.isnan(undefined.low)
    assert R.cluster_interval(lambda w: np.where(w[:, 0] < 4, 1.0, np.nan), g) == (1.0, 1.0, 1.0)  # NaN in ~1%


def test_all_of_reports_the_estimate_of_the_part_that_decides_it():
    """Tree construction's share ≤ 5% for every policy: the verdict's estimate is the worst policy's, not the first's."""
    def share(est, verdict):
        return C.Evidence(verdict, "share ≤ 0.05", 8, est, est - 0.01, est + 0.01, bar=0.05, above=False)
    worst = C.all_of([share(0.002, "holds"), share(0.07, "does not hold"), share(0.20, "does not hold")])
    assert worst.verdict == "does not hold" and np.allclose((worst.estimate, worst.low, worst.high), (0.20, 0.19, 0.21))
    open_ = C.all_of([share(0.002, "holds"), share(0.045, "inconclusive")])
    assert open_.verdict == "inconclusive" and open_.estimate == 0.045


def test_all_of_claim_summary_and_display():
    yes, no, maybe = (C.Evidence(v, "r", n) for v, n in zip(VERDICTS, (10, 9, 3)))
    untested = C.not_testable("the paper leaves its threshold unsaid")
    assert C.all_of([untested, untested]).verdict == "not testable" and C.all_of([yes, untested]).verdict == "inconclusive"
    assert C.all_of([yes, yes]).verdict == "holds" and C.all_of([yes, no, maybe]).verdict == "does not hold"
    assert C.all_of([yes, maybe]).verdict == "inconclusive" and C.all_of([yes, maybe]).n == 3
    assert C.all_of([]).verdict == "inconclusive" and C.unscored().n == 0
    c = C.claim("x", "p", 1.0, maybe, extra=2)
    assert {"name", "paper", "ours", "verdict", "rule", "n"} <= set(c) and c["details"] == {"extra": 2}
    assert CT.verdict_text(c) == "inconclusive (n = 3)" and CT.verdict_text(C.claim("y", "p", 1, yes)) == "holds"
    assert "x: INCONCLUSIVE (N = 3)" in CT.claims_text([c]) and "rule:  r" in CT.claims_text([c])
    # the estimate the rule read and its interval are printed where both are numbers (a bench reader sees how near
    # the bar an inconclusive reading sits), left out where they are not
    assert "\n  read:" not in CT.claims_text([c])
    near = C.claim("z", "p", 1.22, C.Evidence("inconclusive", "r ≥ 1.2", 16, 1.2234, 1.1811, 1.2702, bar=1.2))
    assert "rule:  r ≥ 1.2\n  read:  1.22 (interval 1.18–1.27)\n" in CT.claims_text([near])
    exact = C.claim("e", "p", 525, C.Evidence("holds", "count > 0", 64, 525.0, 525.0, 525.0, bar=0.0))
    assert "\n  read:  525 (exact)" in CT.claims_text([exact])
    with pytest.raises(ValueError):
        C.claim("x", "p", 1, C.Evidence("maybe", "r", 1))
    summary = CT.claims_summary([c, C.claim("y", "p", 2, yes), C.claim("z", "p", float("nan"), no),
                                C.claim("b", "—", 1, yes, kind="bar"), C.claim("u", "p", "—", untested)])
    assert summary["paper_claims"] == "1 holds, 1 does not hold, 1 inconclusive, 1 not testable"
    assert summary["our_bars"] == "1 holds, 0 does not hold, 0 inconclusive, 0 not testable"
    assert summary["claims_tally"] == f"paper claims: {summary['paper_claims']}; our bars: {summary['our_bars']}"
    with pytest.raises(ValueError):
        C.claim("x", "p", 1, yes, kind="goal")
    assert json.dumps(summary, allow_nan=False) and summary["claims"][2]["ours"] is None


def test_a_decisive_verdict_needs_eight_independent_units():
    """No holds / does not hold on fewer than MIN_UNITS units: the claim says inconclusive and why."""
    few = C.interval_rule(0.6, 0.55, 0.65, 0.5, 5, "x")
    assert few.verdict == "holds" and C.claim("x", "p", 1, few)["verdict"] == "inconclusive"
    assert "5 < 8 independent units" in C.claim("x", "p", 1, few)["rule"]
    assert C.claim("x", "p", 1, C.interval_rule(0.4, 0.35, 0.45, 0.5, 8, "x"))["verdict"] == "does not hold"


def test_a_paper_claim_that_does_not_hold_carries_a_computed_diagnosis():
    """The 'more prompts' factor is read off the evidence: an inconclusive interval that would clear its bar at a
    reachable n on the holding side says "too few prompts"; one whose projection lands on the other side does not;
    a does-not-hold says more prompts would not flip it; a tried reading that holds opens with its factor; with
    nothing flipping it the diagnosis says what was and was not tried; a bar of ours and a holding claim carry
    none."""
    from spectree.claims.diagnosis import reading

    near = C.interval_rule(0.1, -0.05, 0.25, 0.0, 10, "x")  # half-width 0.15, gap 0.1: ≈ 23 prompts
    c = C.claim("x", "p", 1, near)
    assert c["diagnosis"].startswith("too few prompts") and "≈ 23 prompts" in c["diagnosis"]
    assert C.units_needed(near) == pytest.approx(22.5)
    against = C.claim("x", "p", 1, C.interval_rule(-0.1, -0.25, 0.05, 0.0, 10, "x"))  # it would NOT hold from ≈ 23
    assert not against["diagnosis"].startswith("too few") and "would not hold from ≈ 23" in against["diagnosis"]
    assert against["diagnosis"].startswith("no factor tried flips it")
    skewed = C.interval_rule(1.0, 0.97, 1.005, 0.98, 16, "x")  # the side towards the bar (0.03) sets the need
    assert C.units_needed(skewed) == pytest.approx(36.0)
    assert C.units_needed(C.interval_rule(1.0, 0.98, 1.1, 0.98, 16, "x")) == 17  # never "from n" at n
    far = C.interval_rule(-0.2, -0.3, -0.1, 0.0, 16, "x")
    knobs = C.claim("y", "p", 1, far, readings={"knobs": reading("m = 8: holds", "holds", where="m = 8")})
    assert knobs["diagnosis"].startswith("holds with knobs (m = 8)") and "would not flip it" in knobs["diagnosis"]
    untried = C.claim("u", "p", 1, far, readings={"knobs": reading("not re-read here", tried=False)})
    assert untried["diagnosis"].startswith("no factor tried flips it (tried: more prompts); not tried: knobs, "
                                           "draft quality")
    off = C.claim("o", "p", 1, far, off_point="m = 32 (the paper's 64)")
    assert "not tried: the paper's operating point (m = 32 (the paper's 64))" in off["diagnosis"]
    pair = C.claim("z", "p", 1, far, readings={"draft quality": reading("does not hold at agreement 0.8",
                                                                        "does not hold", papers_quality=True)})
    assert pair["diagnosis"].startswith("a property of this pair")
    assert C.claim("b", "—", 1, far, kind="bar")["diagnosis"] == ""
    assert C.claim("h", "p", 1, C.interval_rule(0.2, 0.1, 0.3, 0.0, 16, "x"))["diagnosis"] == ""


def test_a_decisive_paper_verdict_repeats_on_both_halves_of_its_units_or_is_unstable():
    """Each decisive paper verdict is re-read on the even and the odd units: both on its side, "repeats"; one on the
    other side, inconclusive ("unstable"); a rule that cannot split its units says "not split"; bars are not
    re-read."""
    steady = C.bootstrap_rule([np.full(16, 1.0) + np.arange(16) % 3 * 0.1], lambda x, axis=-1: x.mean(axis), 0.5, "x")
    assert steady.halves == ("holds", "holds")
    assert C.claim("s", "p", 1, steady)["repeat"] == "repeats"
    # strong on the even units, below the bar on the odd ones: the whole interval clears the bar, the halves do not
    split = np.where(np.arange(16) % 2 == 0, 3.0, 0.4) + np.arange(16) * 1e-3
    flips = C.mean_rule(split, 0.5, "x")
    assert flips.verdict == "holds" and flips.halves == ("holds", "does not hold")
    unstable = C.claim("f", "p", 1, flips)
    assert unstable["verdict"] == "inconclusive" and unstable["repeat"] == "unstable"
    assert "unstable: holds on all units, the two halves read holds and does not hold" in unstable["rule"]
    assert C.claim("b", "—", 1, flips, kind="bar")["verdict"] == "holds"  # our bars are not re-read
    assert C.claim("t", "p", 1, C.interval_rule(1.0, 0.9, 1.1, 0.5, 16, "x"))["repeat"] == "not split"
    parts = C.all_of([steady, flips])
    assert parts.halves == ("holds", "does not hold")


def test_the_bca_interval_is_offered_beside_the_percentile_one():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.3, 16), rng.normal(0.8, 0.3, 16)
    diff = lambda x, y, axis=-1: x.mean(axis) - y.mean(axis)  # noqa: E731
    bca = C.bootstrap_rule([a, b], diff, 0.0, "Δ", method="BCa")
    pct = C.bootstrap_rule([a, b], diff, 0.0, "Δ")
    assert "BCa" in bca.rule and "BCa" not in pct.rule and (bca.low, bca.high) != (pct.low, pct.high)


# --- notebook 01: draft claims ------------------------------------------------------------------------------

def _draft_report(rates, tau, prompts=10, positions=100, seed=0):
    """A report over two datasets of `prompts` prompts each: per-position agreement `rates`, chain τ `tau`."""
    rng = np.random.default_rng(seed)
    by_set = {}
    for ds in ("mtbench", "humaneval"):
        by_prompt = {f"{ds}/{i}": {"positions": positions, "steps": 40,
                                   "agree": [int(rng.binomial(positions, r)) for r in rates],
                                   "tau_sum": int(round(40 * (tau + rng.normal(0, 0.05))))} for i in range(prompts)}
        by_set[ds] = pooled_report(by_prompt, len(rates), prompts, 64)
    whole = pooled_report({k: v for r in by_set.values() for k, v in r["by_prompt"].items()}, len(rates),
                          2 * prompts, 64)
    return {**whole, "by_dataset": by_set}


def test_draft_claims_judge_table_1_at_equal_budget_and_read_the_shipped_drafts_beside():
    good = {"edd": _draft_report([0.7, 0.5], 2.5), "vdm": _draft_report([0.4, 0.2], 1.6, seed=1)}
    equal = {"edd-eq": _draft_report([0.68, 0.2], 1.8, seed=2), "vdm-eq": _draft_report([0.75, 0.4], 2.0, seed=3)}
    claims = draft_claims({**good, **equal}, "edd", "vdm", ("edd-eq", "vdm-eq"))
    # our bars on the shipped EDD; Table 1 on the drafts trained alike, the shipped drafts as a second reading
    assert verdicts(claims) == ["holds", "holds", "does not hold", "holds", "does not hold", "holds"]
    assert [c["kind"] for c in claims] == ["bar", "bar", "paper", "paper", "paper", "paper"]
    assert [c["key"] for c in claims[2:]] == ["edd-table1-tau"] * 2 + ["edd-agreement"] * 2
    assert [c["n"] for c in claims] == [20, 20, 20, 20, 10, 10]  # prompts (per dataset for the per-position claim)
    assert not claims[0]["readings"] and not claims[0]["diagnosis"]  # a bar of ours is not diagnosed
    tallied, shipped = claims[2], claims[3]
    assert "equal budget (same data, steps, seed)" in tallied["name"] and not tallied["off_point"]
    assert shipped["off_point"].startswith("the shipped drafts, whose training differs in budget, data, stages")
    assert "τ 2.5" in shipped["ours"] and "seed: not recorded (no card)" in shipped["ours"]
    assert "training budget" not in tallied["readings"]  # the shipped pair is no budget reading
    # each reading says which way it points, whatever its verdict (not a verdict itself)
    assert tallied["ours"].endswith("EDD not above VDM (against the paper; direction only, not a verdict)")
    assert "EDD above VDM (the paper's way; direction only" in shipped["ours"]
    assert claims[4]["ours"].endswith("EDD not above VDM (against the paper; direction only, not a verdict)")
    # one standard for every comparison of drafts: an equal-budget EDD below the shipped EDD's agreement − 0.05
    weak = {**good, "edd-eq": _draft_report([0.3, 0.2], 1.8, seed=2), "vdm-eq": equal["vdm-eq"]}
    claims = draft_claims(weak, "edd", "vdm", ("edd-eq", "vdm-eq"))
    assert verdicts(claims)[2::2] == ["not testable"] * 2
    assert "the equal-budget EDD (edd-eq)'s position-1 agreement is 0.29" in claims[2]["rule"]
    assert "the floor: the shipped EDD's less 0.05" in claims[2]["rule"]
    # no equal-budget pair: Table 1 is not judged on the shipped drafts (they stay a second reading)
    assert verdicts(draft_claims(good, "edd", "vdm"))[2::2] == ["inconclusive"] * 2
    tiny = {"edd": _draft_report([0.6, 0.5], 2.5, prompts=1, positions=5),
            "vdm": _draft_report([0.2, 0.1], 1.2, prompts=1, positions=5, seed=1)}
    claims = draft_claims(tiny, "edd", "vdm", ("edd", "absent"))
    assert verdicts(claims) == ["inconclusive"] * 6
    assert [c["n"] for c in claims[:3]] == [2, 2, 0]  # n counts prompts, not tokens
    assert CT.verdict_text(claims[0]) == "inconclusive (n = 2)"
    # the paper column holds only the paper's statements; our bars are goals
    assert claims[0]["paper"] == "—" and "0.50" in claims[0]["goal"]
    assert "2.73" in claims[1]["paper"] and "2.2" in claims[1]["goal"] and "2.2" not in claims[1]["paper"]
    assert "1.96" in claims[2]["paper"] and "Table 1" in claims[2]["name"]
    assert "l.811" in claims[4]["paper"] and "ours" in claims[4]["goal"]


# --- notebook 02: replay-sweep claims -----------------------------------------------------------------------

def _row(group, name, tau, gamma, prompts=10, seed=0, depth=3.0, **params):
    """A scored sweep row with per-prompt sums around τ and γ (20 forwards per prompt)."""
    rng = np.random.default_rng(seed)
    taus = tau + rng.normal(0, 0.3, prompts)  # prompts differ; the policies' gap is paired
    by_prompt = {f"p{i}": {"steps": 20.0, "tau": 20 * t, "gamma": 20.0 * gamma, "tau_drafted": 20 * t,
                           "depth": 20 * depth} for i, t in enumerate(taus)}
    return {"group": group, "name": name, "spec": f"{name}:{params}", "dataset": "all", "replayable": True,
            "tau": float(taus.mean()), "gamma": gamma, "alpha": float(taus.mean()) / depth, "depth": depth,
            "params": params, "by_prompt": by_prompt}


def test_budget_and_edd_claims():
    def budgets(gain, prompts=16):
        return pd.DataFrame([_row("budgets", "dyspec", 2.5 + gain, 63.0, prompts, m=64, K=64),
                             _row("budgets", "sequences", 2.5, 64.0, prompts, k=8, d=8)])
    assert verdicts(S.budget_claims(budgets(0.3)))[0] == "holds"  # against SpecInfer-style trees at m = 64
    assert verdicts(S.budget_claims(budgets(-0.3)))[0] == "does not hold"
    assert S.budget_claims(budgets(0.3, prompts=4))[0]["n"] == 4
    assert S.budget_claims(budgets(0.3))[1]["verdict"] == "inconclusive"  # no Sequoia row
    edd = pd.DataFrame([_row("edd_table2", "pct", 3.0, 20.0, depth=4.0, ratio=0.037),
                        _row("edd_table2", "eagle2", 2.5, 10.0, seed=1, N=10),
                        _row("edd_table2", "eagle2", 3.0, 40.0, N=50),
                        _row("edd_table2", "vct", 2.5, 30.0), _row("edd_table2", "cape", 2.6, 20.0)])
    # α: τ / 4 < τ / 3 at PCT's τ, and at EAGLE-2 10/6/50's own τ (the last, off the paper's point); γ 50% at PCT τ
    assert verdicts(E.edd_claims(edd)) == ["does not hold", "holds", "holds", "does not hold"]
    # chain mode, C2T against EAGLE-2 and α at matched γ or τ: test_matched_claims


# --- notebook 03: speed claims ------------------------------------------------------------------------------

def _runs(seconds: dict, tree_frac=0.01, prompts=10, seed=0):
    """Runs of HF generate and the given methods (label → seconds per prompt) on `prompts` prompts of 64 tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(prompts):
        scale = rng.uniform(0.5, 2.0)  # prompts differ; the methods' ratio is paired
        for label, s in {HF: 4.0, **seconds}.items():
            t = s * scale * rng.uniform(0.97, 1.03)
            plain = label in (HF, AR_LABEL, "ar")  # no draft or retrieval token verified: γ = 0
            out.append(Run(label, f"p{i}", "c", list(range(64)), t, 32, 64, 0 if plain else 128, 0.3 * t, 0.6 * t,
                           0.0 if label == HF else tree_frac * t))
    return out


def test_speed_claims_hold_fail_and_need_eight_prompts():
    best = "best strategy ≥ 1.3× HF generate (issue goal; paper speedups 2–3× on GPUs)"
    tree = "tree construction ≤ 5% of decoding time for every policy"
    fast = {c["name"]: c for c in speed_claims({0.0: _runs({"AR (our loop)": 4.2, "chain-2": 2.5})})}
    assert fast[best]["verdict"] == "holds" and fast[tree]["verdict"] == "holds"
    assert fast[best]["ours"].startswith("chain-2: 1.6")
    slow = {c["name"]: c for c in speed_claims({0.0: _runs({"chain-2": 3.6}),
                                                0.6: _runs({"chain-2": 3.6}, tree_frac=0.1, seed=1)})}
    assert slow[best]["verdict"] == "does not hold" and slow[tree]["verdict"] == "does not hold"
    few = {c["name"]: c for c in speed_claims({0.0: _runs({"chain-2": 2.5}, prompts=2)})}
    assert few[best]["verdict"] == few[tree]["verdict"] == "inconclusive" and few[best]["n"] == 2
    # the paper column holds the papers' figures (EDD's GPU speedups, DySpec's < 2% construction); our bars are goals
    assert "EDD" in fast[best]["paper"] and "1.3" not in fast[best]["paper"] and "1.3" in fast[best]["goal"]
    assert "DySpec §5.2" in fast[tree]["paper"] and "5%" in fast[tree]["goal"]
    assert fast[best]["kind"] == fast[tree]["kind"] == "bar" and not slow[best]["diagnosis"]  # goals of ours
    # EDD's 2.04× is a 7B result (Table 2, l.689, l.697), 3.62× a 13B one (l.693): not "13B targets"
    assert "2.04× on CNN/DM with 7B targets" in fast[best]["paper"] and "13B targets" not in fast[best]["paper"]


def test_a_bar_of_ours_in_the_paper_column_is_an_error():
    evidence = C.Evidence("holds", "rule", 8)
    for bar in ["≥ 1.3×", "≤ 5%", "< 2", "issue 46: within 10%"]:
        with pytest.raises(ValueError, match="goal="):
            C.claim("x", bar, 1.0, evidence)
    kept = C.claim("x", "—", 1.0, evidence, goal="≥ 1.3× (issue goal)")
    assert kept["paper"] == "—" and kept["goal"] == "≥ 1.3× (issue goal)"


def test_speed_claims_leave_the_reference_rows_out():
    """HF's own assisted generation and prompt lookup are reference rows: never "the best strategy" of our decoder,
    and their tree share (none) does not count."""
    from spectree.speed.references import HF_ASSISTED, HF_LOOKUP

    best = "best strategy ≥ 1.3× HF generate (issue goal; paper speedups 2–3× on GPUs)"
    claims = {c["name"]: c for c in speed_claims({0.0: _runs({HF_LOOKUP: 1.0, HF_ASSISTED: 1.5, "chain-2": 2.5})})}
    assert claims[best]["ours"].startswith("chain-2: ") and claims[best]["verdict"] == "holds"


def test_lookup_bar_reads_the_fastest_row_that_speculates_whatever_plain_decoding_is_called():
    """Plain decoding through our loop (γ = 0) is not "ours" against HF prompt lookup, under `bench`'s spec `ar`
    or the notebooks' label; a row that verifies retrieval tokens is, even when slower."""
    from spectree.speed.references import HF_LOOKUP_PACKED
    from spectree.speed.speed_claims import lookup_claim
    from spectree.speed.tables import prompt_rows, speed_table

    runs = _runs({HF_LOOKUP_PACKED: 3.0, "ar": 1.0, AR_LABEL: 1.0, "ar+lookup": 2.0})
    claim = lookup_claim(prompt_rows(runs), speed_table(runs))
    assert claim["ours"].startswith("ar+lookup: 1.5") and claim["verdict"] == "holds"
    slow = _runs({HF_LOOKUP_PACKED: 3.0, "ar": 1.0, "ar+lookup": 2.9})
    assert lookup_claim(prompt_rows(slow), speed_table(slow))["verdict"] == "does not hold"


def test_speed_claims_compare_dyspec_with_specinfer_of_the_same_budget_per_prompt():
    name = "DySpec accepts more per step than SpecInfer-style trees of the same budget (T = 0)"

    def runs(dyspec_tau):
        out = _runs({"DySpec m=8": 3.0, budget_labels(8)["sequences"]: 3.0})  # SpecInfer-style k=2 d=4
        for r in out:
            r.tau_sum = int(r.forwards * (dyspec_tau if r.strategy == "DySpec m=8" else 2.0)) + len(r.prompt) % 3
        return out
    assert {c["name"]: c["verdict"] for c in speed_claims({0.0: runs(2.5)}, budget=8)}[name] == "holds"
    failed = {c["name"]: c for c in speed_claims({0.0: runs(1.5)}, budget=8)}[name]
    assert failed["verdict"] == "does not hold" and failed["kind"] == "paper"
    # the paper column states what DySpec's tables show against Specinfer, and no more
    assert "all 12 cells" in failed["paper"] and failed["key"] == "dyspec-tables12-specinfer"
    assert failed["cell"] == "T = 0" and failed["off_point"].startswith("m = 8 (the paper's 64); slot values of the "
                                                                         "draft read at T = 1")
    assert "not tried: the paper's operating point (m = 8 (the paper's 64)" in failed["diagnosis"]
    # at the paper's budget, Alg. 1 uncapped (K = m), the reading is tallied; a K cap is named
    from spectree.strategies.dyspec import DySpec

    def at64(K, temp=0.6):
        out = _runs({"DySpec m=64": 3.0, budget_labels(64)["sequences"]: 3.0})
        for r in out:
            r.tau_sum = int(r.forwards * (2.5 if r.strategy == "DySpec m=64" else 2.0)) + len(r.prompt) % 3
        return {c["name"]: c for c in speed_claims({temp: out}, budget=64,
                                                   policies={"DySpec m=64": DySpec(m=64, K=K)})}[
            name.replace("(T = 0)", f"(T = {temp:g})")]
    assert at64(64)["off_point"] == "" and at64(64)["verdict"] == "holds"  # the paper's draft temperature, 0.6
    assert at64(8)["off_point"] == "K capped at 8 (Alg. 1 has no cap)"
    assert at64(64, temp=0.0)["off_point"].startswith("slot values of the draft read at T = 1, greedy")


def test_speed_claims_gunjur_dyn_width_only_against_its_baseline_and_every_other_entropy_tree():
    name = "Gunjur: dyn width only saves the most time against chain-4 (7.16% vs static 2.3%) (T = 0.6, depth 4)"
    base = {"chain-4": 4.2, "static b=2 d=4": 3.8, "simple cutoff": 3.6}
    fastest = {c["name"]: c for c in speed_claims({0.6: _runs({**base, "dyn width only": 3.0})})}[name]
    assert fastest["verdict"] == "holds" and "Dyn width only 28." in fastest["ours"]  # 1 − 3.0 / 4.2 ≈ 29% saved
    second = {c["name"]: c for c in speed_claims({0.6: _runs({**base, "dyn width only": 4.0})})}[name]
    assert second["verdict"] == "does not hold" and second["kind"] == "paper"
    assert "(not run: Dyn width+depth)" in second["ours"] and "fixed proposal (Alg. 1)" in second["rule"]


def test_gunjur_is_re_read_on_a_gpu_cost_model_and_at_the_papers_knobs():
    """A Gunjur claim that does not hold on this CPU is re-read with each run's own steps priced on a GPU cost model
    (`Run.priced_s`): a reading that holds there flips it ("holds with GPU cost model"); the paper's depth 4 and
    T = 0.4 are named where the run differs (off the paper's point), and its own run there is tallied; without
    priced runs there is no GPU reading."""
    from spectree.strategies.gunjur import EntropyBranching

    name = "Gunjur: dyn width only saves the most time against chain-4 (7.16% vs static 2.3%) (T = 0.6, depth 3)"
    base = {"chain-4": 4.2, "static b=2 d=4": 3.8, "simple cutoff": 3.6}

    def priced(gpu_seconds: dict, terms: bool = False):
        out = _runs({**base, "dyn width only": 6.0})
        for r in out:
            r.priced_s = gpu_seconds.get(r.strategy, float("nan")) * (1 + 0.01 * (hash(r.prompt) % 3))
            if terms:  # draft 10%, verify 80%, tree 5% of the priced time, keep + rest the 5% left
                r.priced_draft_s, r.priced_verify_s, r.priced_tree_s = 0.1 * r.priced_s, 0.8 * r.priced_s, 0.05 * r.priced_s
        return out
    where = "the H100 eager cost model (smollm2-135m)"
    policies = {"dyn width only": EntropyBranching(d=3)}
    flips = {c["name"]: c for c in speed_claims({0.6: priced({**base, "dyn width only": 2.0})}, policies=policies,
                                                priced_on=where)}[name]
    gpu = flips["readings"]["GPU cost model"]
    assert flips["verdict"] == "does not hold" and gpu["text"].startswith(f"holds on {where}") and gpu["verdict"] == \
        "holds"
    assert flips["diagnosis"].startswith(f"holds with GPU cost model ({where})")
    assert flips["off_point"] == "depth 3, T = 0.6 (the paper's: depth 4, T = 0.4)"
    stays = {c["name"]: c for c in speed_claims({0.6: priced({**base, "dyn width only": 5.0})}, priced_on=where,
                                                policies=policies)}[name]
    assert stays["readings"]["GPU cost model"]["text"].startswith(f"does not hold on {where}")
    assert not stays["diagnosis"].startswith("holds")
    assert "priced per token" not in stays["readings"]["GPU cost model"]["text"]  # runs priced without their terms
    split = {c["name"]: c for c in speed_claims({0.6: priced({**base, "dyn width only": 5.0}, terms=True)},
                                                priced_on=where, policies=policies)}[name]["readings"]["GPU cost model"]
    # where the priced time goes, term by term, with the tree size behind it (≈ 5 s a prompt over 64 tokens)
    m = re.search(r"; priced per token: dyn width only ([\d.]+) ms \(draft ([\d.]+), verify ([\d.]+), tree ([\d.]+), "
                  r"keep \+ rest ([\d.]+)\) at γ 4, τ 2 a step; chain-4 [\d.]+ ms", split["text"])
    total, draft, verify, tree, rest = map(float, m.groups())
    assert 78 <= total <= 80 and draft + verify + tree + rest == pytest.approx(total, abs=0.2)
    assert verify == pytest.approx(8 * draft, rel=0.02) and tree == pytest.approx(rest, abs=0.1)
    unpriced = {c["name"]: c for c in speed_claims({0.6: _runs({**base, "dyn width only": 6.0})},
                                                   priced_on=where, policies=policies)}[name]
    assert "GPU cost model" not in unpriced["readings"]
    # whose entropy B(H) reads is open and not read in Fig. 2: the diagnosis says it was not tried
    assert unpriced["readings"]["knobs"]["tried"] is False and "knobs" in unpriced["diagnosis"].split(". ")[0]
    # Gunjur's own run at depth 4, T = 0.4: at the paper's point, tallied
    own = speed_claims({0.0: _runs(base)}, gunjur=(0.4, 4, _runs({**base, "dyn width only": 3.0})))
    paper = [c for c in own if c.get("key") == "gunjur-fig2" and c["name"].endswith("(T = 0.4, depth 4)")]
    assert len(paper) == 1 and paper[0]["off_point"] == "" and paper[0]["verdict"] == "holds"


def _c2t_runs(shares: dict, e2_tau: float = 2.3, e2_gamma: float = 32.0, prompts: int = 10):
    """Greedy runs of EAGLE-2 N=33 and C2T at β (label → (τ, γ) per forward), 20 forwards a prompt, the per-prompt
    rates jittered a little around them."""
    rng = np.random.default_rng(3)
    out = []
    for i in range(prompts):
        for label, (tau, gamma) in {budget_labels(32)["eagle2"]: (e2_tau, e2_gamma), **shares}.items():
            j = rng.uniform(0.98, 1.02)
            out.append(Run(label, f"p{i}", "c", list(range(64)), 1.0, 20, round(20 * tau * j), round(20 * gamma * j),
                           0.3, 0.6, 0.01))
        out.append(Run(HF, f"p{i}", "c", list(range(64)), 2.0, 64, 64, 0, 0.0, 0.0))
    return out


def test_c2t_is_read_at_eagle2s_tau_on_its_beta_curve():
    """C2T Table 2 picks β so that τ equals EAGLE-2's: the claim reads C2T's β curve at EAGLE-2's τ (linear between
    settings) and compares the γ needed there with EAGLE-2's, not a fixed β with a fixed N."""
    name = "C2T reaches EAGLE-2's τ with 75–80% of its γ (C2T Table 2; live, T = 0)"
    lean = {"C2T β=0.2": (2.5, 26.0), "C2T β=0.5": (2.1, 14.0)}  # at τ 2.3: γ 20, 62.5% of 32
    holds = {c["name"]: c for c in speed_claims({0.0: _c2t_runs(lean)})}[name]
    assert holds["verdict"] == "holds" and holds["estimate"] == pytest.approx(0.625, abs=0.03)
    assert holds["ours"].startswith("6") and "β 0.2: τ 2.4" in holds["ours"] and holds["kind"] == "paper"
    fat = {"C2T β=0.2": (2.5, 40.0), "C2T β=0.5": (2.1, 28.0)}  # γ 34 at τ 2.3: 106%
    assert {c["name"]: c for c in speed_claims({0.0: _c2t_runs(fat)})}[name]["verdict"] == "does not hold"
    short = {"C2T β=0.5": (2.1, 14.0)}  # never reaches EAGLE-2's τ, nor 80% of its γ: no verdict
    unreached = {c["name"]: c for c in speed_claims({0.0: _c2t_runs(short)})}[name]
    assert unreached["verdict"] == "inconclusive" and unreached["ours"].startswith("not reached at any β of")
    flat = {"C2T β=0.1": (2.06, 46.0), "C2T β=0.5": (2.06, 17.0)}  # τ flat below EAGLE-2's up to 144% of its γ
    capped = {c["name"]: c for c in speed_claims({0.0: _c2t_runs(flat)})}[name]
    assert capped["verdict"] == "does not hold" and capped["ours"].startswith("not reached at any β: more than 14")


# --- notebook 08: classifier surfaces -----------------------------------------------------------------------

def _surface_claims(w_p, w_h, w_d, bias=0.0, seeds=8, tolerance=0.01, shipped=None):
    """The claims over `seeds` hand-set classifiers standing in for training seeds: seed s has the linear form's
    weights scaled by 0.9 … 1.1, or the s-th of a list of weights."""
    pts = surfaces.random_points(300)

    def weight(w, s):
        return w[s] if isinstance(w, list) else w * (0.9 + 0.2 * s / max(seeds - 1, 1))
    rows = [{"seed": s, **surfaces.surface_readings(surfaces.hand_set_classifier(
        weight(w_p, s), weight(w_h, s), weight(w_d, s), bias), pts, grid=25)} for s in range(seeds)]
    return surfaces.surface_claims(pd.DataFrame(rows), tolerance, shipped=shipped)


def test_surface_claims_read_training_seeds_hold_flip_and_stay_inconclusive_within_tolerance():
    assert verdicts(_surface_claims(8.0, 0.3, -0.4, bias=-3.0)) == ["holds"] * 4
    flipped = _surface_claims(8.0, -0.3, 0.4, bias=-3.0)
    assert verdicts(flipped)[1:3] == ["does not hold", "does not hold"]
    assert _surface_claims(0.1, 0.0, -1.0)[0]["verdict"] == "does not hold"
    flat = _surface_claims(6.0, 0.0, 0.0)
    assert verdicts(flat)[1:3] == ["inconclusive", "inconclusive"]
    assert [c["n"] for c in flat] == [8] * 4 and "training seeds, widened by ±0.01" in flat[1]["rule"]
    # the seeds disagree on H's sign (weights −0.3 … +0.3): the t interval over them straddles zero
    torn = _surface_claims(8.0, np.linspace(-0.3, 0.3, 8).tolist(), -0.4, bias=-3.0)
    assert torn[1]["verdict"] == "inconclusive" and torn[1]["interval"][0] < 0 < torn[1]["interval"][1]
    # one classifier, however clear its reading, is one unit: inconclusive (n = 1)
    one = _surface_claims(8.0, 0.3, -0.4, bias=-3.0, seeds=1, shipped={"p_dominance": 0.5, "h_gain": 0.1,
                                                                      "d_gap_low": 0.2, "d_flattening": 0.1})
    assert verdicts(one) == ["inconclusive"] * 4 and CT.verdict_text(one[1]) == "inconclusive (n = 1)"
    assert "the shipped classifier +0.100" in one[1]["ours"]


# --- notebook 09: block sparsity ----------------------------------------------------------------------------

def _blocks(ratios, key, values, trees=10):
    columns = {"trees": trees, "nodes": 100.0, "depth": 5.0, "prefix": 0.0, "original": np.asarray(ratios) * 10,
               "dfs": 10.0, "ratio": ratios}
    return pd.DataFrame({**columns, key: values})


def _times(sparse, dense, reps=10):
    """Timing rows at 512 nodes, as `time_orders` gives them: per (kernel, order) the ms of every round, evenly
    spread over (first, last) (or the rounds themselves, a list), with their median, min and max."""
    rows = []
    for order in ("original", "dfs"):
        row = {"nodes": 512, "prefix": 0, "order": order, "blocks": 10, "reps": reps, "device": "cpu"}
        for kernel, spec in (("sparse", sparse[order]), ("dense", dense[order])):
            ms = list(spec) if isinstance(spec, list) else np.linspace(*spec, reps).tolist()
            row.update({f"{kernel}_rounds": ms, f"{kernel}_ms": float(np.median(ms)), f"{kernel}_ms_min": min(ms),
                        f"{kernel}_ms_max": max(ms)})
        rows.append(row)
    return pd.DataFrame(rows)


def test_block_claims_hold_fail_and_read_the_timing_spread():
    random = _blocks([1.6, 2.5, 4.0], "nodes", [256.0, 512.0, 1024.0])
    logged = _blocks([1.5, 1.1], "prefix", [0.0, 1024.0])
    times = _times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)}, {"original": (9.0, 9.2), "dfs": (9.0, 9.2)})
    assert verdicts(sparsity_claims.block_claims(random, logged, times)) == ["holds"] * 3 + ["not testable"] + \
        ["holds"] * 2  # the dilution: arithmetic once DFS needs fewer tiles, not a reading
    # the loop is faster in DFS order than in the original (2×), but slower than dense attention: the speed claim
    # reads the dense baseline, so it does not hold
    worse = sparsity_claims.block_claims(_blocks([0.8, 0.7, 0.6], "nodes", [256.0, 512.0, 1024.0]),
                                  _blocks([0.8, 1.2], "prefix", [0.0, 1024.0]),
                                  _times({"original": (20.0, 21.0), "dfs": (10.0, 10.5)},
                                         {"original": (14.0, 15.0), "dfs": (9.0, 9.5)}))
    assert verdicts(worse) == ["does not hold"] * 3 + ["not testable"] + ["does not hold"] * 2
    assert worse[4]["details"]["order_ratio"][0] == pytest.approx(2.0)
    # deterministic counts: a margin of 1.02× is fewer, read exactly (no tolerance); two trees a size are too few
    noisy = sparsity_claims.block_claims(_blocks([1.02, 1.03, 1.04], "nodes", [256.0, 512.0, 1024.0], trees=2),
                                  _blocks([1.02, 1.01], "prefix", [0.0, 1024.0], trees=2),
                                  _times({"original": (1.3, 2.6), "dfs": (1.0, 1.2)},
                                         {"original": (8.0, 11.0), "dfs": (9.0, 9.5)}, reps=3))
    assert verdicts(noisy) == ["inconclusive"] * 3 + ["not testable"] + ["inconclusive"] * 2
    assert [c["n"] for c in noisy] == [6, 6, 2, 0, 3, 3] and CT.verdict_text(noisy[4]) == "inconclusive (n = 3)"
    assert noisy[0]["rule"].startswith("deterministic count (exact, no interval)") and "tolerance" not in noisy[0]["rule"]
    assert noisy[0]["readings"]["more prompts"]["text"].startswith("too few random trees: n = 6 < 8")
    enough = sparsity_claims.block_claims(_blocks([1.02, 1.03, 1.04], "nodes", [256.0, 512.0, 1024.0], trees=3),
                                   logged, times)
    assert verdicts(enough)[:2] == ["holds", "holds"] and enough[0]["n"] == 9
    # enough rounds, but paired ratios of 0.95 .. 1.25 (dense ÷ sparse, DFS) and 0.77 .. 1.28 (dense original ÷
    # DFS): the median's interval straddles the bar, so neither verdict
    straddle = sparsity_claims.block_claims(random, logged, _times({"original": (1.0, 1.43), "dfs": (9.6, 7.2)},
                                                            {"original": (7.0, 11.5), "dfs": (9.1, 9.0)}, reps=12))
    assert verdicts(straddle)[4:] == ["inconclusive", "inconclusive"] and straddle[4]["n"] == 12


def test_timing_claims_need_eight_paired_rounds_and_shrug_off_one_slow_round():
    random = _blocks([1.6, 2.5, 4.0], "nodes", [256.0, 512.0, 1024.0])
    logged = _blocks([1.5, 1.1], "prefix", [0.0, 1024.0])
    steady = {"original": (9.0, 9.2), "dfs": (9.0, 9.2)}
    seven = sparsity_claims.block_claims(random, logged, _times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)}, steady, 7))
    assert verdicts(seven)[4:] == ["inconclusive"] * 2 and "n = 7 < 8 independent units" in seven[4]["rule"]
    eight = sparsity_claims.block_claims(random, logged, _times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)}, steady, 8))
    assert verdicts(eight)[4:] == ["holds"] * 2 and "sign-test" in eight[4]["rule"]
    # a neighbour stalls one dense DFS round 30×: the fastest-over-slowest range would read it as a 30× loss; the
    # median's interval over 12 paired rounds moves by one order statistic
    dense_dfs = np.linspace(9.0, 9.2, 12).tolist()
    dense_dfs[5] *= 30
    stalled = sparsity_claims.block_claims(random, logged, _times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)},
                                                           {"original": (9.0, 9.2), "dfs": dense_dfs}, 12))
    assert stalled[5]["verdict"] == "holds" and stalled[5]["n"] == 12


def test_the_more_units_factor_is_named_in_its_own_units():
    """A projection over training seeds reads "more training seeds", not "more prompts"."""
    from spectree.claims.diagnosis import PROMPTS, diagnose

    ev = C.Evidence("inconclusive", "r", 8, 0.02, -0.01, 0.05, bar=0.0)
    seeds, prompts = C.prompts_reading(ev, "training seeds"), C.prompts_reading(ev)
    assert "more training seeds: too few training seeds" in diagnose({PROMPTS: seeds})
    assert "more prompts: too few prompts" in diagnose({PROMPTS: prompts})
