"""EDD Table 2's α claim is read at equal τ, as the paper compares (EAGLE-2 α 0.67 and PCT α 0.74, both at τ 3.99,
EDD l.688–689): EAGLE-2's N curve read at PCT's τ is the tallied verdict; EAGLE-2 10/6/50 at its own τ is a labelled
second reading, never tallied. Synthetic per-prompt sums shaped like notebook 02's summary (`edd_table2` of
figures/results/summaries/02_tree_strategies.json: PCT α 0.594 at τ 2.161, depth 3.64; EAGLE-2 N 5–50)."""
import re

import numpy as np
import pandas as pd
import pytest

from spectree.analysis import edd_claims as E
from spectree.claims import claims as C
from spectree.claims.diagnosis import KNOBS, PROMPTS, reading
from spectree.claims.scorecard import BY_KEY, score

# EAGLE-2 10/6/N as the summary has it: (N, τ, α); its mean depth is τ / α
SUMMARY_E2 = [(5, 1.752, 0.821), (10, 2.012, 0.682), (15, 2.150, 0.632), (20, 2.230, 0.584), (30, 2.335, 0.532),
              (40, 2.400, 0.510), (50, 2.453, 0.496)]
UNMATCHED = KNOBS + " (EAGLE-2 as EDD ran it)"


def _row(name, tau, gamma, depth, seed=0, prompts=16, **params):
    """A scored edd_table2 row: 20 forwards per prompt, τ around `tau` (a prompt effect every row shares, plus a
    small jitter of its own), γ and the mean depth fixed, so that α = τ / depth."""
    shared = np.random.default_rng(7).normal(0, 0.3, prompts)
    taus = tau + shared - shared.mean() + np.random.default_rng(seed).normal(0, 0.02, prompts)
    by_prompt = {f"p{i}": {"steps": 20.0, "tau": 20 * t, "gamma": 20.0 * gamma, "tau_drafted": 20 * t,
                           "depth": 20 * depth} for i, t in enumerate(taus)}
    return {"group": "edd_table2", "name": name, "spec": f"{name}:{sorted(params.items())}", "dataset": "all",
            "replayable": True, "tau": float(taus.mean()), "gamma": gamma, "alpha": float(taus.mean()) / depth,
            "depth": depth, "params": params, "by_prompt": by_prompt}


def _table(pct_tau=2.161, pct_depth=3.64, e2=SUMMARY_E2, e2_depths=None):
    """PCT at the paper's s_d/s_t, EAGLE-2's N curve (`e2`: N, τ, α; `e2_depths` overrides the depths), VCT, CAPE."""
    rows = [_row("pct", pct_tau, 17.32, pct_depth, ratio=0.037)]
    for i, (n, tau, alpha) in enumerate(e2):
        depth = (e2_depths or {}).get(n, tau / alpha)
        rows.append(_row("eagle2", tau, n - 1.0, depth, seed=i + 1, K=10, d_max=6, N=n))
    rows += [_row("vct", 2.148, 363.0, 5.0, seed=20), _row("cape", 2.008, 26.55, 5.0, seed=21)]
    return pd.DataFrame(rows)


def _alpha(claims):
    """(the tallied α claim, the unmatched second reading): both carry the scorecard key edd-table2-alpha."""
    mine = [c for c in claims if c["key"] == "edd-table2-alpha"]
    assert len(mine) == 2 and not mine[0]["off_point"] and mine[1]["off_point"] == E.EDD_UNMATCHED
    return mine


def _scorecard(claims):
    mine = [{**c, "notebook": "02"} for c in claims if c["key"] == "edd-table2-alpha"]
    return score(BY_KEY["edd-table2-alpha"], mine)


def test_pct_above_eagle2_10_6_50_but_below_eagle2_at_its_tau_does_not_hold():
    # the summary's shape: PCT α 0.594 beats EAGLE-2 10/6/50's 0.496 (τ 2.453, depth 4.95), but EAGLE-2's N curve at
    # PCT's τ 2.161 has α ≈ 0.625 (between N 15 and N 20): at equal τ PCT's α is lower
    claims = E.edd_claims(_table())
    assert claims[0]["verdict"] == "does not hold"  # the α claim's tallied reading
    tallied, unmatched = _alpha(claims)
    assert tallied["estimate"] == pytest.approx(0.594 - 0.625, abs=0.01) and tallied["interval"][1] < 0
    assert "α(EAGLE-2 at PCT's τ, N interpolated)" in tallied["rule"]
    assert re.search(r"vs EAGLE-2 at that τ: α 0\.6[23]\d at τ 2\.1\d\d \(7 sizes", tallied["ours"])
    assert "replayed on notebook 02's logbook" in tallied["ours"]  # notebook 01's PCT rows are live: τ differs
    # EAGLE-2 10/6/50 at its own τ: holds there, a labelled second reading, in the claim's readings and beside it
    assert unmatched["verdict"] == "holds" and unmatched["estimate"] == pytest.approx(0.594 - 0.496, abs=0.01)
    assert "EAGLE-2 10/6/50 α 0.49" in unmatched["ours"] and "(mean depth reached 4.95 of its 6)" in unmatched["ours"]
    second = tallied["readings"][UNMATCHED]
    assert second["verdict"] == "holds" and second["off_point"] and "unmatched" in second["text"]
    # a reading off the paper's point never makes the claim hold: the diagnosis says where it holds instead
    assert tallied["diagnosis"].startswith("holds only off the paper's point: " + UNMATCHED)
    # the scorecard tallies the matched reading alone; the unmatched one is listed under other readings
    row = _scorecard(claims)
    assert row["verdict"] == "does not hold" and row["ours"] == tallied["ours"]
    assert [(r["label"], r["verdict"]) for r in row["readings"]] == [("02, " + E.EDD_UNMATCHED, "holds")]


def test_pct_below_eagle2_10_6_50_but_above_eagle2_at_its_tau_holds():
    # the opposite: EAGLE-2's sizes all reach depth 6 but N 50's (3.0), so at PCT's τ its α is τ / 6 ≈ 0.36 against
    # PCT's 0.594, while EAGLE-2 10/6/50 at its own τ has α 2.453 / 3 ≈ 0.82
    claims = E.edd_claims(_table(e2_depths={n: 6.0 for n, _, _ in SUMMARY_E2} | {50: 3.0}))
    assert claims[0]["verdict"] == "holds"
    tallied, unmatched = _alpha(claims)
    assert tallied["estimate"] == pytest.approx(0.594 - 2.161 / 6, abs=0.01)
    assert unmatched["verdict"] == "does not hold"
    # a claim that holds keeps its second readings, and is not diagnosed
    assert tallied["readings"][UNMATCHED]["verdict"] == "does not hold" and PROMPTS not in tallied["readings"]
    assert tallied["diagnosis"] == ""
    row = _scorecard(claims)
    assert row["verdict"] == "holds" and [r["verdict"] for r in row["readings"]] == ["does not hold"]


@pytest.mark.parametrize("pct_tau", [2.6, 1.6])
def test_eagle2_s_curve_that_does_not_reach_pct_s_tau_leaves_the_claim_inconclusive(pct_tau):
    # PCT's τ above (below) every EAGLE-2 size's: no α at equal τ, and 10/6/50 at its own τ is not read in its place
    claims = E.edd_claims(_table(pct_tau=pct_tau))
    assert claims[0]["verdict"] == "inconclusive"
    tallied, unmatched = _alpha(claims)
    assert "does not reach PCT's τ" in tallied["rule"] and "(7 sizes, τ " in tallied["rule"]
    assert "does not reach τ" in tallied["ours"]
    assert unmatched["verdict"] in ("holds", "does not hold")  # decisive, yet it decides nothing
    assert _scorecard(claims)["verdict"] == "inconclusive"


def test_a_claim_keeps_its_readings_whatever_its_verdict_and_only_a_failing_paper_claim_is_diagnosed():
    holds, fails = C.interval_rule(0.2, 0.1, 0.3, 0.0, 16, "x"), C.interval_rule(-0.2, -0.3, -0.1, 0.0, 16, "x")
    second = {KNOBS: reading("m = 8: does not hold", "does not hold", where="m = 8", off_point=True)}
    held = C.claim("a", "p", 1, holds, readings=second)
    assert held["readings"] == second and held["diagnosis"] == ""
    bar = C.claim("b", "—", 1, fails, goal="≥ 0", kind="bar", readings=second)
    assert bar["readings"] == second and bar["diagnosis"] == ""  # a bar of ours is never diagnosed
    failed = C.claim("c", "p", 1, fails, readings=second)
    assert set(failed["readings"]) == {KNOBS, PROMPTS} and failed["diagnosis"]
