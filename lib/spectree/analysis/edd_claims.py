"""EDD + PCT's Table 2 and §4.3.1 on notebook 02's logbook (`edd_claims`): PCT's α against EAGLE-2 at equal τ, its
γ against the γ EAGLE-2's N curve needs at PCT's τ, its τ against the better of VCT and CAPE; PCT at the paper's
s_d/s_t, any other ratio scored a labelled `diagnosis.KNOBS` reading."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional

import pandas as pd

from spectree.analysis import sweeps
from spectree.analysis.matched import compare, estimate_text, knobs_reading, matched_rule, pick, second_reading
from spectree.analysis.sweeps import scored
from spectree.claims.claims import MIN_PROMPTS, Evidence, claim, unscored
from spectree.claims.diagnosis import KNOBS, reading
from spectree.claims.names import paper_kind, sd_st
from spectree.claims.verdicts import INCONCLUSIVE


def _pct_rows(table: pd.DataFrame) -> tuple[Optional[pd.Series], list[pd.Series]]:
    """(PCT at the paper's s_d/s_t, else the first PCT scored; PCT at every other s_d/s_t) of EDD Table 2."""
    rows = [r for _, r in scored(table, "edd_table2", "pct").iterrows()]
    paper = [r for r in rows if math.isclose(r.params.get("ratio") or -1.0, sweeps.PCT_RATIO_PAPER)]
    first = (paper or rows or [None])[0]
    return first, [r for r in rows if first is None or r.spec != first.spec]


EDD_EQUAL_TAU = ("EDD Table 2's rows sit at nearly equal τ (EAGLE-2 α 0.67 at τ 3.99, PCT α 0.74 at τ 3.99, EDD "
                 "l.688–689, LLaMA2-Chat 7B, MT-bench; |Δτ| ≤ 0.18 in its other cells); matched τ is our choice, as "
                 "EDD's own 10/6/50 overshoots PCT's τ on this pair")  # α = accepted length ÷ the tree's depth
# (EDD l.521): at unequal τ a shallower, smaller tree wins α almost by construction, so the α claim is tallied at
# PCT's τ on EAGLE-2's N curve
EDD_UNMATCHED = ("EAGLE-2 at EDD's fixed 10/6/50, its τ not matched to PCT's (the paper compares α at equal τ, "
                 "EDD l.688–689)")  # the label of the unmatched α reading: a second reading, never tallied


def _alpha_at_tau(one: pd.DataFrame, e2_sweep: pd.DataFrame) -> Evidence:
    """α(PCT) − α(EAGLE-2's N curve read at PCT's τ, `sweeps.alpha_gain`), paired over prompts (`matched_rule`): EDD
    Table 2's comparison (`EDD_EQUAL_TAU`). Where EAGLE-2's sizes do not reach PCT's τ the reading is inconclusive
    and its rule says so; EAGLE-2 10/6/50 at its own τ never stands in for it."""
    ev = matched_rule(one, e2_sweep, sweeps.alpha_gain, 0.0, "α(PCT) − α(EAGLE-2 at PCT's τ, N interpolated)")
    if not len(one) or not len(e2_sweep):
        return ev
    tau, low, high = float(one.tau.iloc[0]), float(e2_sweep.tau.min()), float(e2_sweep.tau.max())
    span = f"EAGLE-2's N curve ({len(e2_sweep)} sizes, τ {low:.3f}–{high:.3f})"
    if not math.isfinite(ev.estimate) or not low <= tau <= high:
        return replace(ev, verdict=INCONCLUSIVE, estimate=math.nan, low=math.nan, high=math.nan, halves=(),
                       half_estimates=(), rule=f"{ev.rule}; {span} does not reach PCT's τ {tau:.3f}: inconclusive "
                       "(α is compared at equal τ; EAGLE-2 10/6/50 at its own τ is not read in its place)")
    if ev.n >= MIN_PROMPTS and not math.isfinite(ev.low):
        return replace(ev, rule=f"{ev.rule}; {span} misses PCT's τ in too many resamples for an interval")
    return ev


def _edd_evidence(pct: Optional[pd.Series], table: pd.DataFrame) -> list[Evidence]:
    """EDD Table 2's readings of one PCT row: α against EAGLE-2's N curve read at PCT's τ, as Table 2 compares them
    (at equal τ: `EDD_EQUAL_TAU`, `_alpha_at_tau`); PCT's γ as a share of the γ EAGLE-2's N curve needs at PCT's
    τ; τ against the better of VCT and CAPE; α against EAGLE-2 as EDD ran it (10 / 6 / 50) at its own τ, unmatched
    (a second reading, never the verdict)."""
    if pct is None:
        return [unscored("PCT was not scored")] * 4
    one, e2_sweep = pd.DataFrame([pct]), scored(table, "edd_table2", "eagle2")
    e2 = pick(table, "edd_table2", "eagle2", N=sweeps.EDD_EAGLE2[2])
    vct, cape = pick(table, "edd_table2", "vct"), pick(table, "edd_table2", "cape")
    static = None if vct is None or cape is None else max((vct, cape), key=lambda r: r.tau)
    return [_alpha_at_tau(one, e2_sweep),
            matched_rule(one, e2_sweep, sweeps.gamma_own_share, 0.6,
                         "γ(PCT) / γ(EAGLE-2 at PCT's τ, N interpolated)", above=False, strict=False),
            unscored("VCT or CAPE was not scored") if static is None else
            compare(pct, static, "tau", 0.0, "τ(PCT) − τ(the better of VCT and CAPE)"),
            unscored("EAGLE-2 10/6/50 was not scored") if e2 is None else
            compare(pct, e2, "alpha", 0.0, "α(PCT) − α(EAGLE-2 10/6/50, τ unmatched)")]


def _e2_at_tau(pct: pd.Series, e2_sweep: pd.DataFrame) -> str:
    """'α 0.625 at τ 2.161 (7 sizes, τ 1.752–2.453, N interpolated)': EAGLE-2's N curve read at PCT's τ, in words."""
    if not len(e2_sweep):
        return "not scored"
    span = f"{len(e2_sweep)} sizes, τ {e2_sweep.tau.min():.3f}–{e2_sweep.tau.max():.3f}"
    alpha = float(sweeps.along_tau(e2_sweep.tau, e2_sweep.alpha, pct.tau))
    return (f"α {alpha:.3f} at τ {pct.tau:.3f} ({span}, N interpolated)" if math.isfinite(alpha) else
            f"does not reach τ {pct.tau:.3f} ({span})")


def _ratio(row: Optional[pd.Series], kind: str = "one-token") -> str:
    """PCT's s_d/s_t of a scored row, named (`names.sd_st`): the paper's where it is one, else `kind`'s."""
    if row is None:
        return "s_d/s_t —"
    value = float(row.params.get("ratio"))
    return sd_st(paper_kind(value) or kind, value)


PCT_DEPTH = 10  # PCT's maximum depth in EDD's experiments (EDD l.1386: width 5, depth 10)


def _depth_cap(pct: Optional[pd.Series]) -> str:
    """How PCT's reading differs from the paper's point when the logbook caps its depth below EDD's 10 and a tree
    reached that cap (the cap bound: a deeper tree was cut); "" where the cap is 10, or no tree reached it (a cap
    that never binds grows the paper's trees)."""
    depth = int(pct.params.get("d_max", PCT_DEPTH)) if pct is not None else PCT_DEPTH
    reached = float(pct.get("max_depth", math.nan)) if pct is not None else math.nan
    if depth >= PCT_DEPTH or (math.isfinite(reached) and reached < depth):
        return ""
    return f"PCT cut at depth {depth} (the paper's {PCT_DEPTH}), which its trees reached: the logbook's depth"


def edd_claims(table: pd.DataFrame, machine_kind: str = "one-token") -> list[dict[str, Any]]:
    """EDD Table 2 and §4.3.1 on EDD's trees, PCT at the paper's s_d/s_t (0.037, EDD l.1388: τ and γ do not depend
    on the machine): PCT's α against EAGLE-2's at equal τ, as Table 2 compares them (`EDD_EQUAL_TAU`: both τ 3.99,
    EDD l.688–689), EAGLE-2's N curve read at PCT's τ (inconclusive where its sizes do not reach it); PCT's γ
    against the γ EAGLE-2's N curve needs to reach PCT's τ ("about half the number of nodes while achieving a
    competitive average acceptance length", read at matched τ); PCT's τ against the better of VCT and CAPE. PCT's
    α against EAGLE-2 as EDD ran it (10 per expansion, depth 6, 50 tokens; the depth EAGLE-2 reaches shown) at its
    own, unmatched τ is a second reading: in the α claim's readings and as a reading off the paper's point
    (`EDD_UNMATCHED`, the scorecard's other readings), never tallied. PCT at any other s_d/s_t scored is a
    `diagnosis.KNOBS` reading, named as `machine_kind` says (`names.SD_ST`: notebook 02's is the one-token forward
    ratio t_draft(1) / t_target(1), notebook 11's the ratio measured as PCT does)."""
    pct, others = _pct_rows(table)
    evidence, e2_sweep = _edd_evidence(pct, table), scored(table, "edd_table2", "eagle2")
    again = [(r, _edd_evidence(r, table)) for r in others]
    fmts = ("+.3f", ".0%", "+.3f")
    at_paper = f"read at {_ratio(pct)}"
    readings = [{KNOBS: knobs_reading(at_paper, [(_ratio(r, machine_kind), evs[i], fmts[i])
                                                 for r, evs in again])} if again else {} for i in range(3)]
    readings[0][KNOBS + " (EAGLE-2 as EDD ran it)"] = reading(  # off the paper's point: it never flips the verdict
        second_reading("α(PCT) − α(EAGLE-2 10/6/50) at EAGLE-2's own τ, unmatched", evidence[3], "+.3f"),
        evidence[3].verdict, where="10/6/50, τ unmatched", off_point=True)
    e2 = pick(table, "edd_table2", "eagle2", N=sweeps.EDD_EAGLE2[2])
    off = _depth_cap(pct)
    at = f"PCT at {_ratio(pct)}"
    pct_alpha = (f"{at}, replayed on notebook 02's logbook, α {pct.alpha:.3f} at τ {pct.tau:.3f} (mean depth "
                 f"{pct.depth:.2f})" if pct is not None else "")
    fixed = (f"EAGLE-2 10/6/50 α {e2.alpha:.3f} at τ {e2.tau:.3f} (mean depth reached {e2.depth:.2f} of its 6)"
             if e2 is not None else "EAGLE-2 10/6/50 not scored")
    unmatched = (f"; at EDD's EAGLE-2 10/6/50 (unmatched, not the verdict): τ {pct.tau:.3f} vs {e2.tau:.3f}, γ "
                 f"{pct.gamma:.2f} vs {e2.gamma:.2f}" if pct is not None and e2 is not None else "")
    vct, cape = pick(table, "edd_table2", "vct"), pick(table, "edd_table2", "cape")
    static = None if vct is None or cape is None else max((vct, cape), key=lambda r: r.tau)
    paper_alpha = "α 0.74 vs 0.67 at τ 3.99 for both (LLaMA2-Chat 7B, MT-bench; EAGLE-2 10 / 6 / 50)"
    return [claim("PCT's acceptance rate α exceeds EAGLE-2's (EDD Table 2)", paper_alpha,
                  f"{pct_alpha} vs EAGLE-2 at that τ: {_e2_at_tau(pct, e2_sweep)}: α(PCT) − α(EAGLE-2) "
                  f"{estimate_text(evidence[0], '+.3f')}; {fixed}, τ unmatched: a second reading, not the verdict"
                  if pct is not None else "not scored on this logbook", evidence[0], key="edd-table2-alpha",
                  off_point=off, readings=readings[0]),
            claim("PCT keeps EAGLE-2's τ with about half its nodes (EDD §4.3.1, Fig. 6)",
                  '"PCT contains only about half the number of nodes while achieving a competitive average '
                  'acceptance length"',
                  f"{at} γ {pct.gamma:.2f} at τ {pct.tau:.3f}, as a share of the γ EAGLE-2's N curve needs at that τ "
                  f"({len(e2_sweep)} sizes, interpolated): {estimate_text(evidence[1], '.0%')}{unmatched}"
                  if pct is not None else "not scored on this logbook", evidence[1],
                  goal="γ ≤ 60% of EAGLE-2's at PCT's τ: our reading of 'about half' (τ matched: 'competitive')",
                  key="edd-half-nodes", off_point=off, readings=readings[1]),
            claim("PCT's τ beats VCT's and CAPE's (EDD Table 2)",
                  "τ 3.99 vs VCT 3.56 and CAPE 3.35 (LLaMA2-Chat 7B, MT-bench)",
                  f"{at} τ {pct.tau:.3f} vs {static['name']} {static.tau:.3f} (the better)"
                  if pct is not None and static is not None else "not scored on this logbook", evidence[2],
                  key="edd-table2-tau", off_point=off, readings=readings[2]),
            claim("PCT's α against EAGLE-2 10/6/50 at unmatched τ (EDD Table 2, second reading)", paper_alpha,
                  f"{pct_alpha} vs {fixed}: {estimate_text(evidence[3], '+.3f')}" if pct is not None
                  else "not scored on this logbook", evidence[3], key="edd-table2-alpha",
                  off_point="; ".join(x for x in (EDD_UNMATCHED, off) if x))]
