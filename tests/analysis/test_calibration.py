"""EDD Fig. 3b: reliability table, ECE, its bootstrap interval over prompts and the calibration claims."""
import numpy as np
import pytest
from synthetic_tokens import of_prompts, prompts, share

from spectree.analysis import calibration
from spectree.claims import claims as C
from spectree.claims import text as CT


def test_reliability_table_and_ece_on_a_tiny_example():
    conf, acc = [0.05, 0.15, 0.95, 0.95], [0, 1, 1, 0]
    t = calibration.reliability_table(conf, acc, n_bins=10)
    assert t["count"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert t.accept[9] == pytest.approx(0.5) and t.confidence[9] == pytest.approx(0.95)
    # (1/4)·|0 − 0.05| + (1/4)·|1 − 0.15| + (2/4)·|0.5 − 0.95| = 0.45
    assert calibration.ece(conf, acc) == pytest.approx(0.45)
    assert calibration.reliability_table([1.0], [1]).loc[9, "count"] == 1  # confidence 1.0 is in the last bin


def test_ece_bootstrap_interval_is_seeded_resamples_prompts_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    conf = rng.random(2000)
    acc = (rng.random(2000) < conf).astype(float)
    prompt = np.arange(2000) % 20
    lo, hi, halves = calibration.ece_interval(conf, acc, prompt, n_resamples=300)
    assert (lo, hi, halves) == calibration.ece_interval(conf, acc, prompt, n_resamples=300)
    assert lo <= calibration.ece(conf, acc) <= hi < 0.08
    # the halves: the ECE of the even and of the odd prompts alone
    even, odd = prompt % 2 == 0, prompt % 2 == 1
    assert halves == pytest.approx([calibration.ece(conf[even], acc[even]), calibration.ece(conf[odd], acc[odd])])
    assert calibration.ece_interval([1.0, 1.0], [1, 1], [0, 1], n_resamples=50)[:2] == (0.0, 0.0)
    # one prompt: every resample is the whole sample, so the interval is the ECE itself (and nothing to halve)
    single = calibration.ece_interval(conf, acc, np.zeros(2000), n_resamples=50)
    assert single[:2] == pytest.approx((calibration.ece(conf, acc),) * 2) and single[2] == []
    # bins are pooled over the drawn prompts: two prompts miscalibrated in opposite directions cancel
    both = calibration.ece_interval([0.5] * 4, [1, 1, 0, 0], [0, 0, 1, 1], n_resamples=200)  # each prompt: ECE 0.5
    assert both[:2] == pytest.approx((0.0, 0.5)) and calibration.ece([0.5] * 4, [1, 1, 0, 0]) == 0.0
    assert both[2] == pytest.approx([0.5, 0.5])  # each half is one prompt
    st = calibration.calibration_stats(conf, acc, prompt, n_resamples=300)
    c = calibration.calibration_claim("x", "y", st, tolerance=0.1, paper_ece=0.019)
    assert c["verdict"] == "holds" and c["details"]["tokens"] == 2000 and c["details"]["prompts"] == 20
    bad = calibration.calibration_stats(np.full(500, 0.9), np.zeros(500), np.arange(500) % 10, n_resamples=100)
    assert calibration.calibration_claim("x", "y", bad)["verdict"] == "does not hold"


def test_calibration_claim_holds_fails_and_needs_eight_prompts():
    rng = np.random.default_rng(1)
    conf, pr = rng.random(2000), prompts(10, 200)
    good = calibration.calibration_stats(conf, (rng.random(2000) < conf).astype(float), pr, n_resamples=500)
    c = calibration.calibration_claim("x", "y", good, tolerance=0.1)
    assert c["verdict"] == "holds" and c["n"] == 10 and (good["tokens"], good["prompts"]) == (2000, 10)
    assert c["rule"] == "95% bootstrap interval over prompts of the ECE ≤ 0.1, n ≥ 8 prompts and ≥ 100 tokens"
    bad = calibration.calibration_stats(np.full(500, 0.9), np.zeros(500), prompts(10, 50), n_resamples=200)
    assert calibration.calibration_claim("x", "y", bad)["verdict"] == "does not hold"
    few = calibration.calibration_claim("x", "y", calibration.calibration_stats(conf[:1000], conf[:1000] > 0.5, pr[:1000]))
    assert few["verdict"] == "inconclusive" and few["n"] == 5 and CT.verdict_text(few) == "inconclusive (n = 5)"
    sparse = calibration.calibration_claim("x", "y", calibration.calibration_stats(conf[:50], conf[:50] > 0.5, prompts(10, 5)))
    assert sparse["verdict"] == "inconclusive" and sparse["n"] == 10  # 50 tokens < 100


def test_calibration_claim_clustering_matters():
    """Confidence 0.55 for 300 tokens of each of 10 prompts, accepted at 0.85 or 0.25 by prompt: pooled, the
    bins are calibrated (ECE ≈ 0 ± 0.02 over tokens), but resampled prompts shift the rate by ± 0.15."""
    accept = share([0.85, 0.25] * 5, 300)
    conf = np.full(3000, 0.55)
    by_token = calibration.calibration_stats(conf, accept, np.arange(3000), n_resamples=500)
    assert calibration.calibration_claim("x", "y", by_token)["verdict"] == "holds"
    by_prompt = calibration.calibration_stats(conf, accept, prompts(10, 300), n_resamples=500)
    c = calibration.calibration_claim("x", "y", by_prompt)
    assert c["verdict"] == "inconclusive" and c["n"] == 10 and by_prompt["ci_high"] > 0.1
    diagrams, _ = calibration.calibration_diagrams(of_prompts(prompts(10, 300), confidence=conf, accept=accept), n_resamples=500)
    assert diagrams[0]["stats"] == by_prompt and diagrams[0]["claim"]["verdict"] == "inconclusive"


def chains(c, a, n_prompts=10, steps=300, seed=0):
    """Rank-0 chains of len(c) tokens, `steps` per prompt: token j has confidence c[j] and is accepted with
    probability a[j] when every token before it was (independently); accept is the path's acceptance."""
    rng = np.random.default_rng(seed)
    n, d = n_prompts * steps, len(c)
    conf = np.broadcast_to(np.asarray(c, dtype=float), (n, d))
    ok = rng.random((n, d)) < np.asarray(a, dtype=float)
    path = np.cumprod(ok, axis=1).astype(float)  # d_j accepted with every token before it
    reached = np.c_[np.ones((n, 1)), path[:, :-1]].astype(bool)  # examined: the parent is on the target's path
    return of_prompts(np.repeat(np.arange(n_prompts), steps * d), depth=np.tile(np.arange(1, d + 1), n),
                      p=conf.ravel(), confidence=conf.ravel(), joint=np.cumprod(conf, axis=1).ravel(),
                      accept=path.ravel(), examined=reached.ravel(), chain=True)


def diagram(diagrams, start):
    return next(d for d in diagrams if d["title"].startswith(start))


def test_pct_claim_counts_the_chain_pct_drafts_so_rejected_deep_tokens_do_not_dilute_the_ece():
    """The first token over-confident (0.95 vs 0.7), the rest calibrated at 0.3: tokens 5–10 have P < 0.01 and
    path acceptance ≈ 0. Over every chain token the ECE is ≈ 0.036 (holds at 0.05); PCT at s_d/s_t 0.028 drafts
    depths 1–4 only, where the ECE is ≈ 0.09 (does not hold)."""
    t = chains([0.95] + [0.3] * 9, [0.7] + [0.3] * 9)
    pct = calibration.pct_chain_tokens(t)
    assert sorted(pct.depth.unique()) == [1, 2, 3, 4]
    diagrams, _ = calibration.calibration_diagrams(t, n_resamples=300)
    every = diagram(diagrams, "joint P, every chain token")
    assert "claim" not in every and every["stats"]["ci_high"] < 0.05  # the old population: would hold
    verdict = diagram(diagrams, "joint P, chain tokens PCT drafts")
    assert verdict["stats"]["tokens"] == 4 * 3000 and verdict["stats"]["ci_low"] > 0.05
    assert verdict["claim"]["verdict"] == "does not hold" and verdict["claim"]["goal"] == "ECE ≤ 0.05 (our bar)"


def test_a_perfectly_calibrated_independent_draft_holds_on_pcts_chain_but_not_up_to_the_first_rejection():
    """a_j = c_j exactly: P = ∏ c is the path's acceptance, and the PCT population shows it; counted up to the
    first rejection, a token's path acceptance is its own a_j (its prefix was accepted), far above P."""
    c = [0.9, 0.8, 0.7, 0.8, 0.9, 0.6, 0.7, 0.8, 0.9, 0.7]
    diagrams, _ = calibration.calibration_diagrams(chains(c, c), n_resamples=300)
    assert diagram(diagrams, "joint P, chain tokens PCT drafts")["claim"]["verdict"] == "holds"
    conditional = diagram(diagrams, "joint P, up to the first rejection")
    assert "claim" not in conditional and conditional["stats"]["ece"] > 0.15
    assert diagram(diagrams, "draft confidence")["claim"]["verdict"] == "holds"  # Fig. 3b: c_j vs a_j
