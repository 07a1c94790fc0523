"""The statistics of the analysis notebooks (04–07) against hand-computed small cases (their claims: test_claims)."""
import json
import math

import numpy as np
import pandas as pd
import pytest

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


def test_ece_bootstrap_interval_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    conf = rng.random(2000)
    acc = (rng.random(2000) < conf).astype(float)
    lo, hi = analysis.ece_interval(conf, acc, n_resamples=300)
    assert (lo, hi) == analysis.ece_interval(conf, acc, n_resamples=300)
    assert lo <= analysis.ece(conf, acc) <= hi < 0.06
    assert analysis.ece_interval([1.0, 1.0], [1, 1], n_resamples=50) == (0.0, 0.0)
    st = analysis.calibration_stats(conf, acc, n_resamples=300)
    c = analysis.calibration_claim("x", "y", st, tolerance=0.1, paper_ece=0.019)
    assert c["verdict"] == "holds" and c["details"]["tokens"] == 2000
    bad = analysis.calibration_stats(np.full(500, 0.9), np.zeros(500), n_resamples=100)
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


def test_dyspec_claims_from_spearman():
    rng = np.random.default_rng(2)
    p = rng.random(500)
    t = tokens(p=p, accept=(rng.random(500) < p).astype(float), target_prob=p + 0.05 * rng.random(500))
    claims, rhos = analysis.acceptance_report({"greedy": t})
    assert [c["verdict"] for c in claims] == ["holds", "holds"]
    assert rhos["greedy"]["target_prob"] > 0.9
    noise = t.assign(target_prob=rng.random(500))
    assert analysis.dyspec_claims(noise, "x")[1]["verdict"] == "does not hold"


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
