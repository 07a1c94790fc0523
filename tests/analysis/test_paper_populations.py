"""The populations, units and cells the papers' analysis figures count (issue 47): DySpec Fig. 2 counts the
predicted (drawn) draft tokens, each in proportion to its draft probability, not every logged top-20 token once;
C2T Fig. 2c's bins are read in nats and in bits (the paper names no unit), and its claims are read cell by cell
off the rank-1 column rather than from one pooled number."""
import math

import numpy as np
import pandas as pd
import pytest
from synthetic_tokens import of_prompts, prompts, tokens, verdicts

from spectree.analysis import stats


# --- C2T Fig. 2: unit and cells ----------------------------------------------------------------------------

def test_the_same_entropy_falls_in_different_rows_in_nats_and_in_bits():
    t = tokens(entropy=[0.8, 1.5, 2.5, 4.5], rank=0)  # nats; in bits 1.15, 2.16, 3.61, 6.49
    nats, bits = (stats.cell_table(t, max_rank=1, min_count=1, unit=u) for u in ("nats", "bits"))
    assert nats[nats["count"] > 0].entropy_bin.tolist() == ["0–1", "1–2", "2–3", "4–5"]
    assert bits[bits["count"] > 0].entropy_bin.tolist() == ["1–2", "2–3", "3–4", "> 6"]
    assert set(bits.unit) == {"bits"} and set(nats.entropy) == {"entropy"}
    np.testing.assert_allclose(stats.entropy_in(t, "bits"), t.entropy / math.log(2))
    topm = stats.cell_table(t.assign(entropy_topm=0.2), max_rank=1, min_count=1, entropy="entropy_topm")
    assert topm[topm["count"] > 0].entropy_bin.tolist() == ["0–1"]  # the top-1000 entropy when asked for
    with pytest.raises(ValueError):
        stats.entropy_in(t, "dits")


def _top1(pr, entropy, p, rate, rng):
    return of_prompts(pr, entropy=entropy, p=p, accept=(rng.random(len(pr)) < rate).astype(float))


def c2t(t, unit="nats", **kw):
    return stats.c2t_claims(t, stats.cell_table(t, unit=unit), n_resamples=500, **kw)


def test_a_red_high_entropy_cell_fails_the_claim_that_a_pooled_reading_passes():
    """Rank-1 tokens of 10 prompts: 3.5 nats, p 0.2, accepted 60% (blue, 120 per prompt); 5.5 nats, p 0.5,
    accepted 30% (red, 40 per prompt). Pooled above 3 nats acceptance − p is +0.25·¾ − 0.2·¼ = +0.14 > 0; the
    paper reads the cells, and the 5–6 cell is red."""
    rng = np.random.default_rng(0)
    t = pd.concat([_top1(prompts(10, 120), 3.5, 0.2, 0.6, rng), _top1(prompts(10, 40), 5.5, 0.5, 0.3, rng)],
                  ignore_index=True)
    high = c2t(t)[0]
    assert high["details"]["accept_minus_p"] > 0.1  # the old pooled reading, which held
    assert high["verdict"] == "does not hold"
    cells = {c["entropy_bin"]: c["verdict"] for c in high["details"]["by_unit"]["nats"]["cells"]}
    assert cells == {"3–4": "holds", "5–6": "does not hold"}


def test_fig2_is_read_at_the_single_forward_with_the_pooled_depths_beside():
    """C2T Fig. 2 is "a single forward" per position (s0 l.71): the verdict reads the first layer. Rank-1 tokens at
    4.5 nats: at depth 1 p 0.2, accepted 60% (blue); at depth 3 p 0.6, accepted 10% (red, three times as many).
    Pooled over the depths the 4–5 cell is red; at depth 1 it is blue."""
    rng = np.random.default_rng(2)
    first = _top1(prompts(10, 60), 4.5, 0.2, 0.6, rng)
    deep = _top1(prompts(10, 180), 4.5, 0.6, 0.1, rng).assign(depth=3)
    high = c2t(pd.concat([first, deep], ignore_index=True))[0]
    assert high["verdict"] == "holds" and high["details"]["depth"] == "depth 1"
    assert high["details"]["count"] == 600  # the verdict's tokens: depth 1 only
    assert high["details"]["all_depths"]["depths"] == "depths 1–3 pooled"
    assert high["details"]["all_depths"]["nats"]["verdict"] == "does not hold"
    assert "Second reading, depths 1–3 pooled: does not hold" in high["ours"]
    pooled = c2t(pd.concat([first, deep], ignore_index=True), depth=None)[0]  # every depth as the verdict
    assert pooled["verdict"] == "does not hold" and pooled["details"]["all_depths"] == {}
    only_first = c2t(first)[0]  # a depth-1 table (T > 0): no second reading
    assert only_first["verdict"] == "holds" and "Second reading" not in only_first["ours"]


def test_the_unit_decides_which_cells_are_high_entropy_and_both_readings_are_reported():
    """Blue rank-1 tokens at 2.5 nats = 3.6 bits: in nats no cell of the rows from 3 up has tokens
    (inconclusive), in bits the 3–4 cell is blue (holds)."""
    rng = np.random.default_rng(1)
    t = _top1(prompts(10, 60), 2.5, 0.2, 0.6, rng)
    in_nats, in_bits = c2t(t, "nats")[0], c2t(t, "bits")[0]
    assert in_nats["verdict"] == "inconclusive" and in_nats["n"] == 0
    assert in_bits["verdict"] == "holds" and in_bits["details"]["unit"] == "bits"
    assert in_nats["details"]["by_unit"]["bits"]["verdict"] == "holds"  # the other unit beside the verdict
    assert "in bits: holds" in in_nats["ours"] and "(nats" in in_nats["goal"]
    assert in_nats["paper"].startswith('"When the entropy is high') and "s0 l.79" in in_nats["paper"]


# --- DySpec Fig. 2: the drawn tokens ----------------------------------------------------------------------

def test_predicted_tokens_count_each_token_in_proportion_to_its_draft_probability():
    t = tokens(depth=[1, 1, 1, 2, 2], prompt=0, position=0, token=[1, 2, 3, 4, 5], p=[0.6, 0.3, 0.05, 0.5, 0.5],
               examined=[True, True, True, True, False])
    drawn = stats.predicted_tokens(t, draws=20_000, seed=0)
    share = drawn.groupby("token").size() / 20_000
    assert share[[1, 2, 3]].to_numpy() == pytest.approx([0.6, 0.3, 0.05], abs=0.01)  # 5% fall outside: dropped
    assert share[4] == pytest.approx(0.5, abs=0.01) and 5 not in share.index  # a distribution per depth; unexamined
    assert stats.unlogged_mass(t) == pytest.approx((0.05 + 0.5) / 2)
    assert drawn.equals(stats.predicted_tokens(t, draws=20_000, seed=0))  # seeded
    assert not drawn.equals(stats.predicted_tokens(t, draws=20_000, seed=1))
    with pytest.raises(ValueError):
        stats.predicted_tokens(t, draws=0)


def _top20_tables(n_prompts=10, positions=20, seed=0):
    """Every distribution: a likely token (p 0.7–0.9) that the target agrees with (accepted with probability p + 0.1),
    and 19 unlikely ones (p ≈ 0.005) whose target probabilities and acceptances are noise. Equal weight, the 19 dominate; drawn, the likely one."""
    rng = np.random.default_rng(seed)
    n = n_prompts * positions
    top = rng.uniform(0.7, 0.9, n)
    p = np.column_stack([top, rng.dirichlet(np.ones(19), n) * (1 - top)[:, None] * 0.5]).ravel()
    is_top = np.tile(np.arange(20) == 0, n)
    target = np.where(is_top, p + rng.uniform(-0.05, 0.05, p.size), rng.uniform(0.0, 0.6, p.size))
    accept = np.where(is_top, rng.random(p.size) < p + 0.1, rng.random(p.size) < 0.3).astype(float)
    return tokens(prompt=np.repeat(np.arange(n_prompts), positions * 20), position=np.repeat(np.arange(n), 20),
                  rank=np.tile(np.arange(20), n), p=p, target_prob=target, accept=accept)


def test_drawing_the_predicted_tokens_changes_spearman_and_the_verdicts():
    t = _top20_tables()
    equal = stats.dyspec_claims(t, "equal weight", n_resamples=500)  # the old population: the top 20, once each
    claims, rhos = stats.acceptance_report({"T = 0.6": t})
    assert equal[1]["details"]["rho"] < 0.5 and equal[1]["verdict"] != "holds"
    assert rhos["T = 0.6"]["target_prob"] > 0.8 and verdicts(claims) == ["holds", "holds"]
    assert claims[1]["details"]["rho_logged_equal_weight"]["target_prob"] == pytest.approx(equal[1]["details"]["rho"])
    assert claims[1]["details"]["draws"] == stats.DRAWS
    assert claims[1]["details"]["unlogged_mass"] == pytest.approx(0.5 * (1 - t[t["rank"] == 0].p.mean()))


def test_dyspec_claims_keep_the_papers_words_and_our_bars_apart():
    claims, _ = stats.acceptance_report({"greedy": _top20_tables()})
    left, right = claims
    assert "s2 l.43" in left["paper"] and "more likely to be accepted" in left["paper"]
    assert "strong correlation" in right["paper"] and "0.5" not in right["paper"]
    assert right["goal"] == "Spearman ρ ≥ 0.5 (our bar for 'strong')" and "rises at every step" in left["goal"]
    assert "ρ > 0" not in left["rule"] and "every step between adjacent bins" in left["rule"]
