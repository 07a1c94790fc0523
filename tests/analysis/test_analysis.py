"""The statistics of the analysis notebooks (04–07) against hand-computed small cases, and their claims: each
holds, does not hold, or is inconclusive below eight prompts, and each interval resamples prompts, not tokens
(many tokens of few prompts that disagree leave a claim inconclusive that a token-level interval would decide)."""
import json
import math

import numpy as np
import pandas as pd
import pytest
from synthetic_tokens import each_token_a_prompt, of_prompts, per_prompt, prompts, share, tokens, verdicts

from spectree.analysis import calibration, entropy_match
from spectree.claims import claims as C
from spectree.claims import text as CT
from spectree.analysis import stats as analysis
from spectree.analysis.token_tables import logbook_tokens, prompt_spec
from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.logbook import LoggedPrompt


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


def test_column_normalised_histogram_sums_each_column_to_one():
    hist, counts = analysis.column_normalised_histogram([0.1, 0.1, 0.1, 0.9], [0.1, 0.9, 0.9, 0.5],
                                                        [0, 0.5, 1.0], [0, 0.5, 1.0])
    assert counts.tolist() == [3, 1]
    np.testing.assert_allclose(hist, [[1 / 3, 0.0], [2 / 3, 1.0]])  # rows y, columns x; 0.5 is in the upper bin
    hist, counts = analysis.column_normalised_histogram([0.1, 1.0], [1.0, 0.0], [0, 1 / 3, 2 / 3, 1], [0, 0.5, 1])
    assert counts.tolist() == [1, 0, 1] and np.isnan(hist[:, 1]).all()  # an empty column is NaN, 1.0 in the last
    mean, count = analysis.binned_mean([0.1, 0.2, 0.9], [1.0, 0.0, 1.0], [0, 0.5, 1])
    assert mean.tolist() == [0.5, 1.0] and count.tolist() == [2, 1]


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
    cal = calibration.calibration_tokens(t)
    assert sorted(zip(cal.position, cal.token - 100)) == [(0, 1), (1, 1)]
    assert entropy_match.top1_tokens(t).accept.tolist() == [0.0, 1.0, 1.0]  # nodes 1 and 4 at position 0, 1 at 1


def test_prompt_spec_gives_every_bare_dataset_n_prompts():
    assert prompt_spec("mtbench+humaneval", 3) == "mtbench:3+humaneval:3"
    assert prompt_spec("mtbench:8+sharegpt", 2) == "mtbench:8+sharegpt:2"
    with pytest.raises(SpectreeError):
        prompt_spec("mtbench", 0)


def test_jsonable_makes_strict_json():
    out = CT.jsonable({"a": np.float32(0.5), "b": [np.int64(3), float("nan")], "c": math.inf})
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
    assert claims[0]["rule"] == ("every rank-1 cell of entropy rows 3–4, 4–5, 5–6, > 6 (nats) with ≥ 30 tokens: "
                                 "95% bootstrap interval over prompts of mean(acceptance − p) > 0, n ≥ 8 prompts")
    assert claims[1]["rule"].startswith("every rank-1 cell of entropy rows 0–1 (nats)")
    assert claims[1]["rule"].endswith("< 0, n ≥ 8 prompts")
    assert claims[0]["details"]["count"] == 800 and claims[0]["details"]["prompts"] == 10  # the pooled reading
    assert verdicts(c2t(_c2t_tokens(10, high_p=0.9, low_p=0.3))) == ["does not hold"] * 2
    few = c2t(_c2t_tokens(5))  # 400 tokens per claim, from 5 prompts
    assert verdicts(few) == ["inconclusive"] * 2 and [c["n"] for c in few] == [5, 5]
    assert CT.verdict_text(few[0]) == "inconclusive (n = 5)"
    sparse = c2t(_c2t_tokens(10, size=2))  # 10 prompts, 20 tokens < min_count: every cell masked, none tested
    assert verdicts(sparse) == ["inconclusive"] * 2 and sparse[0]["n"] == 0


def test_c2t_claim_clustering_matters():
    """300 top-1 tokens at entropy 4.5, p 0.2, from each of 10 prompts: five accept 55% of theirs, five none.
    Over the tokens acceptance − p is +0.075 with a narrow interval; the prompts disagree (+0.35 or −0.2)."""
    t = of_prompts(prompts(10, 300), entropy=4.5, p=0.2, accept=share([0.55, 0.0] * 5, 300))
    assert C.mean_rule(t.accept - t.p, 0.0, "d").verdict == "holds"  # the tokens as if independent
    assert c2t(each_token_a_prompt(t))[0]["verdict"] == "holds"
    clustered = c2t(t)[0]
    assert clustered["verdict"] == "inconclusive" and clustered["n"] == 10
    assert clustered["interval"][0] < 0 < clustered["estimate"] == pytest.approx(0.075)


def _dyspec_tokens(n_prompts, size=200, rises=True, seed=2):
    rng = np.random.default_rng(seed)
    p = rng.random(n_prompts * size)
    accept = (rng.random(len(p)) < (p if rises else 1 - p)).astype(float)
    target = p + 0.05 * rng.random(len(p)) if rises else rng.random(len(p))
    return of_prompts(prompts(n_prompts, size), p=p, accept=accept, target_prob=target)


def test_dyspec_claims_hold_fail_and_need_eight_prompts():
    claims = analysis.dyspec_claims(_dyspec_tokens(10), "x", n_resamples=1000)
    assert verdicts(claims) == ["holds", "holds"] and [c["n"] for c in claims] == [10, 10]
    assert claims[0]["rule"] == ("every step between adjacent bins with ≥ 30 tokens (0–0.2, 0.2–0.4, 0.4–0.6, 0.6–0.8, "
                                 "0.8–1): 95% bootstrap interval over prompts of the rise in mean acceptance > 0, "
                                 "n ≥ 8 prompts")
    assert [round(b["mean"], 1) for b in claims[0]["details"]["by_bin"]] == [0.1, 0.3, 0.5, 0.7, 0.9]
    assert claims[1]["estimate"] == pytest.approx(claims[1]["details"]["rho"])  # scipy's spearmanr
    falls = analysis.dyspec_claims(_dyspec_tokens(10, rises=False), "x", n_resamples=1000)
    assert verdicts(falls) == ["does not hold", "does not hold"]
    few = analysis.dyspec_claims(_dyspec_tokens(5), "x")
    assert verdicts(few) == ["inconclusive", "inconclusive"] and [c["n"] for c in few] == [5, 5]
    assert verdicts(analysis.dyspec_claims(_dyspec_tokens(10, size=2), "x")) == ["inconclusive"] * 2  # 20 tokens


def test_dyspec_claims_clustering_matters():
    """10 prompts of 300 tokens: acceptance rises with p in six prompts and falls in four; the target follows
    the draft in six and ignores it in four. Over the tokens the rise from the lower half of p to the upper (+0.1)
    and ρ(p, target p) 0.60 are decisive; over prompts not."""
    rng = np.random.default_rng(0)
    p = rng.random(3000)
    rising, follows = per_prompt([1, 1, 1, 0, 1, 0, 1, 0, 1, 0], 300), per_prompt([1] * 6 + [0] * 4, 300)
    t = of_prompts(prompts(10, 300), p=p, accept=(rng.random(3000) < np.where(rising > 0, p, 1 - p)).astype(float),
                   target_prob=np.where(follows > 0, p + 0.02 * rng.random(3000), rng.random(3000)))
    assert C.correlation_rule(t.p, t.accept, 0.0, "ρ", strict=True, level=0.99).verdict == "holds"
    assert C.correlation_rule(t.p, t.target_prob, 0.5, "ρ").verdict == "holds"
    tokens_as_prompts = analysis.dyspec_claims(each_token_a_prompt(t), "x", rise_bins=2, n_resamples=500)
    assert verdicts(tokens_as_prompts) == ["holds", "holds"]
    clustered = analysis.dyspec_claims(t, "x", rise_bins=2, n_resamples=1000)
    assert verdicts(clustered) == ["inconclusive", "inconclusive"] and [c["n"] for c in clustered] == [10, 10]
