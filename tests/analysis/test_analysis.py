"""The statistics of the analysis notebooks (04–07) against hand-computed small cases, and their claims: each
holds, does not hold, or is inconclusive below eight prompts, and each interval resamples prompts, not tokens
(many tokens of few prompts that disagree leave a claim inconclusive that a token-level interval would decide)."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from spectree.analysis import claims as C
from spectree.analysis import stats as analysis
from spectree.analysis.token_tables import logbook_tokens, prompt_spec
from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.logbook import LoggedPrompt


def tokens(**columns) -> pd.DataFrame:
    """A token table with defaults for the columns a test does not care about."""
    n = len(next(iter(columns.values())))
    base = {"prompt": 0, "dataset": "mtbench", "position": np.arange(n), "depth": 1, "rank": 0, "token": 0,
            "p": 0.5, "joint": 0.5, "entropy": 0.5, "entropy_topm": 0.5, "confidence": 0.5, "accept": 0.0,
            "target_prob": 0.1, "examined": True, "chain": True}
    return pd.DataFrame({**base, **columns})


def test_entropy_bins_are_right_closed_and_the_last_holds_everything_above_6():
    h = [0.0, 0.5, 1.0, 1.0001, 2.0, 5.99, 6.0, 6.0001, 12.0]
    assert analysis.entropy_bin(h).tolist() == [0, 0, 0, 1, 1, 5, 5, 6, 6]
    assert analysis.bin_labels() == ["0–1", "1–2", "2–3", "3–4", "4–5", "5–6", "> 6"]
    assert analysis.entropy_bin([0.3, 0.7], (0.0, 0.5, 1.0)).tolist() == [0, 1]


def test_cell_table_counts_means_acceptance_and_masks_small_cells():
    t = tokens(entropy=[0.2, 0.4, 0.9, 3.5, 7.0], rank=[0, 0, 1, 0, 0], p=[0.8, 0.6, 0.1, 0.3, 0.05],
               accept=[1.0, 0.0, 0.0, 1.0, 1.0], examined=[True, True, True, True, False])
    cells = analysis.cell_table(t, max_rank=2, min_count=2)
    assert len(cells) == 7 * 2
    top = cells[(cells.entropy_bin == "0–1") & (cells["rank"] == 1)].iloc[0]
    assert top["count"] == 2 and top.mean_p == pytest.approx(0.7) and top.accept == pytest.approx(0.5)
    assert top["diff"] == pytest.approx(0.2) and not top.masked
    high = cells[(cells.entropy_bin == "3–4") & (cells["rank"] == 1)].iloc[0]
    assert high["count"] == 1 and high.masked  # below min_count
    above6 = cells[cells.entropy_bin == "> 6"]
    assert (above6["count"] == 0).all()  # the only > 6 token was not examined
    matrix = analysis.cell_matrix(cells, "mean_p")
    assert list(matrix.index) == analysis.bin_labels() and list(matrix.columns) == [1, 2]
    assert math.isnan(matrix.loc["3–4", 1]) and matrix.loc["0–1", 1] == pytest.approx(0.7)


def test_reliability_table_and_ece_on_a_tiny_example():
    conf, acc = [0.05, 0.15, 0.95, 0.95], [0, 1, 1, 0]
    t = analysis.reliability_table(conf, acc, n_bins=10)
    assert t["count"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert t.accept[9] == pytest.approx(0.5) and t.confidence[9] == pytest.approx(0.95)
    # (1/4)·|0 − 0.05| + (1/4)·|1 − 0.15| + (2/4)·|0.5 − 0.95| = 0.45
    assert analysis.ece(conf, acc) == pytest.approx(0.45)
    assert analysis.reliability_table([1.0], [1]).loc[9, "count"] == 1  # confidence 1.0 is in the last bin


def test_ece_bootstrap_interval_is_seeded_resamples_prompts_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    conf = rng.random(2000)
    acc = (rng.random(2000) < conf).astype(float)
    prompt = np.arange(2000) % 20
    lo, hi = analysis.ece_interval(conf, acc, prompt, n_resamples=300)
    assert (lo, hi) == analysis.ece_interval(conf, acc, prompt, n_resamples=300)
    assert lo <= analysis.ece(conf, acc) <= hi < 0.08
    assert analysis.ece_interval([1.0, 1.0], [1, 1], [0, 1], n_resamples=50) == (0.0, 0.0)
    # one prompt: every resample is the whole sample, so the interval is the ECE itself
    single = analysis.ece_interval(conf, acc, np.zeros(2000), n_resamples=50)
    assert single == pytest.approx((analysis.ece(conf, acc),) * 2)
    # bins are pooled over the drawn prompts: two prompts miscalibrated in opposite directions cancel
    both = analysis.ece_interval([0.5] * 4, [1, 1, 0, 0], [0, 0, 1, 1], n_resamples=200)  # each prompt: ECE 0.5
    assert both == pytest.approx((0.0, 0.5)) and analysis.ece([0.5] * 4, [1, 1, 0, 0]) == 0.0
    st = analysis.calibration_stats(conf, acc, prompt, n_resamples=300)
    c = analysis.calibration_claim("x", "y", st, tolerance=0.1, paper_ece=0.019)
    assert c["verdict"] == "holds" and c["details"]["tokens"] == 2000 and c["details"]["prompts"] == 20
    bad = analysis.calibration_stats(np.full(500, 0.9), np.zeros(500), np.arange(500) % 10, n_resamples=100)
    assert analysis.calibration_claim("x", "y", bad)["verdict"] == "does not hold"


def test_column_normalised_histogram_sums_each_column_to_one():
    hist, counts = analysis.column_normalised_histogram([0.1, 0.1, 0.1, 0.9], [0.1, 0.9, 0.9, 0.5],
                                                        [0, 0.5, 1.0], [0, 0.5, 1.0])
    assert counts.tolist() == [3, 1]
    np.testing.assert_allclose(hist, [[1 / 3, 0.0], [2 / 3, 1.0]])  # rows y, columns x; 0.5 is in the upper bin
    hist, counts = analysis.column_normalised_histogram([0.1, 1.0], [1.0, 0.0], [0, 1 / 3, 2 / 3, 1], [0, 0.5, 1])
    assert counts.tolist() == [1, 0, 1] and np.isnan(hist[:, 1]).all()  # an empty column is NaN, 1.0 in the last
    mean, count = analysis.binned_mean([0.1, 0.2, 0.9], [1.0, 0.0, 1.0], [0, 0.5, 1])
    assert mean.tolist() == [0.5, 1.0] and count.tolist() == [2, 1]


def rates(match_rate, count=100, width=0.5):
    lo = np.arange(len(match_rate)) * width
    return pd.DataFrame({"lo": lo, "hi": lo + width, "count": count, "match_rate": match_rate})


def test_crossover_entropy_interpolates_between_bin_centres():
    # centres 0.25, 0.75, 1.25, 1.75; 0.7 → 0.3 crosses 0.5 half-way between 0.75 and 1.25
    assert analysis.crossover_entropy(rates([0.9, 0.7, 0.3, 0.1])) == pytest.approx(1.0)
    assert analysis.crossover_entropy(rates([0.9, 0.8, 0.7])) is None
    assert analysis.crossover_entropy(rates([0.2, 0.1])) == 0.0  # mismatch likelier from the first bin on
    sparse = rates([0.9, 0.1, 0.7, 0.3]).assign(count=[100, 5, 100, 100])  # the 5-token bin is ignored
    assert analysis.crossover_entropy(sparse, min_count=20) == pytest.approx(1.5)


def test_match_rate_by_entropy_and_the_crossover():
    h = np.r_[np.full(100, 0.2), np.full(100, 2.2)]
    match = np.r_[np.ones(90), np.zeros(10), np.ones(10), np.zeros(90)]
    r = analysis.match_rate_by_entropy(h, match, (0.0, 1.0, 2.0, 3.0))
    assert r["count"].tolist() == [100, 0, 100] and r.matched.tolist() == [90, 0, 10]
    assert r.match_rate[0] == pytest.approx(0.9) and r.mismatched[2] == pytest.approx(90)
    cross = analysis.crossover_entropy(r)
    assert cross == pytest.approx(1.5)  # centres 0.5 (0.9) and 2.5 (0.1), the empty bin skipped


def test_crossovers_of_many_rows_agree_with_crossover_entropy():
    cases = [[0.9, 0.7, 0.3, 0.1], [0.9, 0.8, 0.7, 0.6], [0.2, 0.1, 0.9, 0.9], [0.9, 0.1, 0.7, 0.3]]
    counts = [[100] * 4, [100] * 4, [100] * 4, [100, 5, 100, 100]]
    out = analysis.crossovers(np.arange(4) * 0.5, np.arange(1, 5) * 0.5, np.array(counts), np.array(cases),
                              never=2.0)
    expected = [analysis.crossover_entropy(rates(c).assign(count=n)) for c, n in zip(cases, counts)]
    assert expected == pytest.approx([1.0, None, 0.0, 1.5]) and out.tolist() == pytest.approx([1.0, 2.0, 0.0, 1.5])
    assert np.isnan(analysis.crossovers([0.0], [0.5], np.array([[3]]), np.array([[0.1]]), never=2.0)[0])


def test_dyspec_claims_from_spearman():
    rng = np.random.default_rng(2)
    p = rng.random(500)
    t = tokens(p=p, accept=(rng.random(500) < p).astype(float), target_prob=p + 0.05 * rng.random(500),
               prompt=np.arange(500) % 10)
    claims, rhos = analysis.acceptance_report({"greedy": t})
    assert [c["verdict"] for c in claims] == ["holds", "holds"] and [c["n"] for c in claims] == [10, 10]
    assert rhos["greedy"]["target_prob"] > 0.9 and claims[1]["estimate"] == pytest.approx(rhos["greedy"]["target_prob"])
    noise = t.assign(target_prob=rng.random(500))
    assert analysis.dyspec_claims(noise, "x")[1]["verdict"] == "does not hold"
    one_prompt = analysis.dyspec_claims(t.assign(prompt=0), "x")  # 500 tokens of one prompt: no interval
    assert [c["verdict"] for c in one_prompt] == ["inconclusive"] * 2 and one_prompt[0]["n"] == 1


def logged(nodes: list[tuple], position: int = 0) -> pd.DataFrame:
    """Rows (node, parent, depth, rank, on_path) of one position's tree."""
    df = pd.DataFrame(nodes, columns=["node", "parents", "depth", "rank", "on_path"])
    return df.assign(position=position, tokens=df.node + 100, draft_prob=0.5, joint=0.25, entropy=1.5,
                     entropy_topm=1.4, confidence=0.6, target_prob=np.nan)


def test_logbook_tokens_keep_examined_nodes_and_the_rank0_chain():
    first = logged([(0, -1, 0, 0, True), (1, 0, 1, 0, False), (2, 0, 1, 1, True), (3, 1, 2, 0, False),
                    (4, 2, 2, 0, True), (5, 3, 3, 0, False), (6, 1, 2, 1, False)])
    second = logged([(0, -1, 0, 0, True), (1, 0, 1, 0, True)], position=1)
    nodes = pd.concat([second, first], ignore_index=True)  # out of order on purpose
    lp = LoggedPrompt(Prompt("mtbench", "1", "writing", "hi"), 5, [1, 2, 3], 2, nodes, K=2, d_max=3)
    t = logbook_tokens([lp])
    rows = {(r.position, r.token - 100): (r.examined, r.chain) for r in t.itertuples()}
    assert rows == {(0, 1): (True, True), (0, 2): (True, False), (0, 3): (False, True), (0, 4): (True, False),
                    (0, 5): (False, True), (1, 1): (True, True)}  # node 6: neither examined nor on the chain
    cal = analysis.calibration_tokens(t)
    assert sorted(zip(cal.position, cal.token - 100)) == [(0, 1), (1, 1)]
    assert analysis.top1_tokens(t).accept.tolist() == [0.0, 1.0, 1.0]  # nodes 1 and 4 at position 0, 1 at 1


def test_prompt_spec_gives_every_bare_dataset_n_prompts():
    assert prompt_spec("mtbench+humaneval", 3) == "mtbench:3+humaneval:3"
    assert prompt_spec("mtbench:8+sharegpt", 2) == "mtbench:8+sharegpt:2"
    with pytest.raises(SpectreeError):
        prompt_spec("mtbench", 0)


def test_jsonable_makes_strict_json():
    out = analysis.jsonable({"a": np.float32(0.5), "b": [np.int64(3), float("nan")], "c": math.inf})
    assert json.dumps(out, allow_nan=False) == '{"a": 0.5, "b": [3, null], "c": null}'


def test_analysis_prefers_the_shipped_classifier_over_newer_notebook_ones(tmp_path):
    import time

    import pandas as pd
    import torch

    from spectree.analysis.token_tables import c2t_classifier_confidence
    from spectree.strategies.c2t import C2TClassifier, save_classifier

    torch.manual_seed(0)
    rows = pd.DataFrame({"joint": [0.5], "entropy": [1.0], "entropy_topm": [1.0], "depth": [1]})
    save_classifier(C2TClassifier(), tmp_path / "pair-notebook.safetensors")
    assert c2t_classifier_confidence(rows, "pair", tmp_path)[1] == "pair-notebook"
    save_classifier(C2TClassifier(), tmp_path / "pair.safetensors")
    time.sleep(0.01)
    save_classifier(C2TClassifier(), tmp_path / "pair-newer.safetensors")
    conf, name = c2t_classifier_confidence(rows, "pair", tmp_path)
    assert name == "pair" and conf.shape == (1,)


# --- notebooks 04–07: token-table claims, bootstrapped over prompts ------------------------------------------

def verdicts(claims):
    return [c["verdict"] for c in claims]


def of_prompts(prompt, **columns) -> pd.DataFrame:
    """A token table, one row per prompt label in `prompt`."""
    return tokens(prompt=prompt, **columns)


def prompts(n_prompts, size):
    """Labels of n_prompts prompts of `size` tokens each."""
    return np.repeat(np.arange(n_prompts), size)


def per_prompt(values, size):
    return np.repeat(np.asarray(values, dtype=float), size)


def share(rates, size):
    """0/1 per token: the first round(rate · size) tokens of each prompt are 1 (exact per-prompt rates)."""
    return (np.tile(np.arange(size), len(rates)) < per_prompt(rates, size) * size).astype(float)


def each_token_a_prompt(t):
    """The same tokens as if every token were its own prompt: what a token-level bootstrap resampled."""
    return t.assign(prompt=np.arange(len(t)))


def _c2t_tokens(n_prompts, size=80, high_p=0.2, low_p=0.9, seed=0):
    """Top-1 tokens at entropy 4.5 (accepted half the time) and 0.3 (60%) from every prompt."""
    rng = np.random.default_rng(seed)
    pr = prompts(n_prompts, size)
    high = of_prompts(pr, entropy=4.5, p=high_p, accept=(rng.random(len(pr)) < 0.5).astype(float))
    low = of_prompts(pr, entropy=0.3, p=low_p, accept=(rng.random(len(pr)) < 0.6).astype(float))
    return pd.concat([high, low], ignore_index=True)


def c2t(t, **kw):
    return analysis.c2t_claims(t, analysis.cell_table(t), n_resamples=1000, **kw)


def test_c2t_entropy_claims_hold_fail_and_need_eight_prompts():
    claims = c2t(_c2t_tokens(10))
    assert verdicts(claims) == ["holds", "holds"] and [c["n"] for c in claims] == [10, 10]
    assert claims[0]["rule"] == ("95% bootstrap interval over prompts of mean(acceptance − p) of the top-1 tokens "
                                 "> 0, n ≥ 8 prompts and ≥ 30 tokens")
    assert claims[1]["rule"].endswith("< 0, n ≥ 8 prompts and ≥ 30 tokens")
    assert claims[0]["details"]["count"] == 800 and claims[0]["details"]["prompts"] == 10
    assert verdicts(c2t(_c2t_tokens(10, high_p=0.9, low_p=0.3))) == ["does not hold"] * 2
    few = c2t(_c2t_tokens(5))  # 400 tokens per claim, from 5 prompts
    assert verdicts(few) == ["inconclusive"] * 2 and [c["n"] for c in few] == [5, 5]
    assert C.verdict_text(few[0]) == "inconclusive (n = 5)"
    sparse = c2t(_c2t_tokens(10, size=2))  # 10 prompts, 20 tokens < min_count
    assert verdicts(sparse) == ["inconclusive"] * 2 and sparse[0]["n"] == 10


def test_c2t_claim_clustering_matters():
    """300 top-1 tokens at entropy 4.5, p 0.2, from each of 10 prompts: five accept 55% of theirs, five none.
    Over the tokens acceptance − p is +0.075 with a narrow interval; the prompts disagree (+0.35 or −0.2)."""
    t = of_prompts(prompts(10, 300), entropy=4.5, p=0.2, accept=share([0.55, 0.0] * 5, 300))
    assert C.mean_rule(t.accept - t.p, 0.0, "d").verdict == "holds"  # the tokens as if independent
    assert c2t(each_token_a_prompt(t))[0]["verdict"] == "holds"
    clustered = c2t(t)[0]
    assert clustered["verdict"] == "inconclusive" and clustered["n"] == 10
    assert clustered["interval"][0] < 0 < clustered["estimate"] == pytest.approx(0.075)


def test_calibration_claim_holds_fails_and_needs_eight_prompts():
    rng = np.random.default_rng(1)
    conf, pr = rng.random(2000), prompts(10, 200)
    good = analysis.calibration_stats(conf, (rng.random(2000) < conf).astype(float), pr, n_resamples=500)
    c = analysis.calibration_claim("x", "y", good, tolerance=0.1)
    assert c["verdict"] == "holds" and c["n"] == 10 and (good["tokens"], good["prompts"]) == (2000, 10)
    assert c["rule"] == "95% bootstrap interval over prompts of the ECE ≤ 0.1, n ≥ 8 prompts and ≥ 100 tokens"
    bad = analysis.calibration_stats(np.full(500, 0.9), np.zeros(500), prompts(10, 50), n_resamples=200)
    assert analysis.calibration_claim("x", "y", bad)["verdict"] == "does not hold"
    few = analysis.calibration_claim("x", "y", analysis.calibration_stats(conf[:1000], conf[:1000] > 0.5, pr[:1000]))
    assert few["verdict"] == "inconclusive" and few["n"] == 5 and C.verdict_text(few) == "inconclusive (n = 5)"
    sparse = analysis.calibration_claim("x", "y", analysis.calibration_stats(conf[:50], conf[:50] > 0.5, prompts(10, 5)))
    assert sparse["verdict"] == "inconclusive" and sparse["n"] == 10  # 50 tokens < 100


def test_calibration_claim_clustering_matters():
    """Confidence 0.55 for 300 tokens of each of 10 prompts, accepted at 0.85 or 0.25 by prompt: pooled, the
    bins are calibrated (ECE ≈ 0 ± 0.02 over tokens), but resampled prompts shift the rate by ± 0.15."""
    accept = share([0.85, 0.25] * 5, 300)
    conf = np.full(3000, 0.55)
    by_token = analysis.calibration_stats(conf, accept, np.arange(3000), n_resamples=500)
    assert analysis.calibration_claim("x", "y", by_token)["verdict"] == "holds"
    by_prompt = analysis.calibration_stats(conf, accept, prompts(10, 300), n_resamples=500)
    c = analysis.calibration_claim("x", "y", by_prompt)
    assert c["verdict"] == "inconclusive" and c["n"] == 10 and by_prompt["ci_high"] > 0.1
    diagrams, _ = analysis.calibration_diagrams(of_prompts(prompts(10, 300), confidence=conf, accept=accept), n_resamples=500)
    assert diagrams[0]["stats"] == by_prompt and diagrams[0]["claim"]["verdict"] == "inconclusive"


def _dyspec_tokens(n_prompts, size=200, rises=True, seed=2):
    rng = np.random.default_rng(seed)
    p = rng.random(n_prompts * size)
    accept = (rng.random(len(p)) < (p if rises else 1 - p)).astype(float)
    target = p + 0.05 * rng.random(len(p)) if rises else rng.random(len(p))
    return of_prompts(prompts(n_prompts, size), p=p, accept=accept, target_prob=target)


def test_dyspec_claims_hold_fail_and_need_eight_prompts():
    claims = analysis.dyspec_claims(_dyspec_tokens(10), "x", n_resamples=1000)
    assert verdicts(claims) == ["holds", "holds"] and [c["n"] for c in claims] == [10, 10]
    assert claims[0]["rule"] == ("99% bootstrap interval over prompts of Spearman ρ(p, acceptance) > 0, "
                                 "n ≥ 8 prompts and ≥ 30 tokens")
    assert claims[1]["estimate"] == pytest.approx(claims[1]["details"]["rho"])  # scipy's spearmanr
    falls = analysis.dyspec_claims(_dyspec_tokens(10, rises=False), "x", n_resamples=1000)
    assert verdicts(falls) == ["does not hold", "does not hold"]
    few = analysis.dyspec_claims(_dyspec_tokens(5), "x")
    assert verdicts(few) == ["inconclusive", "inconclusive"] and [c["n"] for c in few] == [5, 5]
    assert verdicts(analysis.dyspec_claims(_dyspec_tokens(10, size=2), "x")) == ["inconclusive"] * 2  # 20 tokens


def test_dyspec_claims_clustering_matters():
    """10 prompts of 300 tokens: acceptance rises with p in six prompts and falls in four; the target follows
    the draft in six and ignores it in four. Over the tokens ρ is 0.11 and 0.60, decisively; over prompts not."""
    rng = np.random.default_rng(0)
    p = rng.random(3000)
    rising, follows = per_prompt([1, 1, 1, 0, 1, 0, 1, 0, 1, 0], 300), per_prompt([1] * 6 + [0] * 4, 300)
    t = of_prompts(prompts(10, 300), p=p, accept=(rng.random(3000) < np.where(rising > 0, p, 1 - p)).astype(float),
               target_prob=np.where(follows > 0, p + 0.02 * rng.random(3000), rng.random(3000)))
    assert C.correlation_rule(t.p, t.accept, 0.0, "ρ", strict=True, level=0.99).verdict == "holds"
    assert C.correlation_rule(t.p, t.target_prob, 0.5, "ρ").verdict == "holds"
    assert verdicts(analysis.dyspec_claims(each_token_a_prompt(t), "x", n_resamples=500)) == ["holds", "holds"]
    clustered = analysis.dyspec_claims(t, "x", n_resamples=1000)
    assert verdicts(clustered) == ["inconclusive", "inconclusive"] and [c["n"] for c in clustered] == [10, 10]


EDGES = (0.0, 0.5, 1.0, 1.5, 2.0)


def gunjur_tokens(rates_by_prompt, size=20):
    """Per prompt, `size` top-1 tokens in each entropy bin (centres 0.25 … 1.75), matched at the given rates."""
    return pd.concat([of_prompts(np.full(4 * size, k), entropy=np.repeat([0.25, 0.75, 1.25, 1.75], size),
                             accept=share(rates, size))
                      for k, rates in enumerate(rates_by_prompt)], ignore_index=True)


def gunjur(top1, **kw):
    rates = analysis.match_rate_by_entropy(top1.entropy, top1.accept, EDGES)
    return analysis.gunjur_claims(top1, rates, analysis.crossover_entropy(rates), n_resamples=1000, **kw)


def test_gunjur_claims_hold_fail_and_need_eight_prompts():
    crossing = [(0.9, 0.7, 0.3, 0.1), (0.85, 0.65, 0.35, 0.15)] * 5  # crossover at 1.0 in every prompt
    claims = gunjur(gunjur_tokens(crossing))
    assert verdicts(claims) == ["holds", "holds"] and claims[0]["details"]["crossover"] == pytest.approx(1.0)
    assert claims[0]["n"] == 10 and claims[0]["interval"][0] <= 1.0 <= claims[0]["interval"][1]
    assert claims[0]["rule"] == ("95% bootstrap interval over prompts of the crossover entropy within 1 ± 0.5 nats "
                                 "(never crossing counts as 2), n ≥ 8 prompts and ≥ 20 tokens")
    assert gunjur(gunjur_tokens(crossing), paper_cutoff=3.0)[0]["verdict"] == "does not hold"
    falling = gunjur(gunjur_tokens([tuple(1 - r for r in rates) for rates in crossing]))  # crossover at 0
    assert verdicts(falling) == ["does not hold", "does not hold"]
    few = gunjur(gunjur_tokens(crossing[:5], size=60))
    assert verdicts(few) == ["inconclusive", "inconclusive"] and [c["n"] for c in few] == [5, 5]


def test_gunjur_claims_clustering_matters():
    """Five prompts cross at 0.5, five never: pooled, the crossover is 1.0 within ± 0.12 over tokens, but
    anywhere from 0.6 to never over prompts. And with one entropy per prompt, mismatch rising with it only
    on average, ρ(entropy, mismatch) is decisive over 3,000 tokens but not over 10 prompts."""
    split = gunjur_tokens([(0.6, 0.3, 0.2, 0.1), (0.9, 0.8, 0.7, 0.6)] * 5, size=100)
    assert gunjur(each_token_a_prompt(split))[0]["verdict"] == "holds"
    clustered = gunjur(split)[0]
    assert clustered["verdict"] == "inconclusive" and clustered["n"] == 10 and clustered["interval"][1] > 1.5
    mismatch = [0.3, 0.5, 0.1, 0.6, 0.2, 0.5, 0.3, 0.6, 0.4, 0.5]
    flat = of_prompts(prompts(10, 300), entropy=per_prompt(np.linspace(0.1, 1.0, 10), 300),
                  accept=1 - share(mismatch, 300))
    assert C.correlation_rule(flat.entropy, 1 - flat.accept, 0.0, "ρ", strict=True, level=0.99).verdict == "holds"
    assert gunjur(each_token_a_prompt(flat))[1]["verdict"] == "holds"
    rho = gunjur(flat)[1]
    assert rho["verdict"] == "inconclusive" and rho["n"] == 10 and rho["interval"][0] < 0 < rho["interval"][1]
