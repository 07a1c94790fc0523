"""Notebook 02's replay-sweep claims: policies replayed on the same prompts compared with a paired BCa bootstrap over
the prompts' per-prompt sums (`sweeps.score`'s `by_prompt`), at the papers' comparison points — each method's knob
swept and its τ(γ) curve read at the other's point where a paper compares at matched γ or τ (`matched_rule`) — and
at the papers' knobs (PCT at EDD's s_d/s_t 0.037, DySpec at budget 64 uncapped), any other knob value a second,
labelled reading in the claim's `readings` (`diagnosis.KNOBS`), from which its diagnosis is computed. A claim read
away from the paper's operating point (the logbook's K or depth below the paper's) says so in its `off_point`: the
scorecard shows it under the claim, never as its tallied verdict."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional

import numpy as np
import pandas as pd

from spectree.analysis import sweeps
from spectree.claims.claims import (MIN_PROMPTS, Evidence, all_of, bootstrap_rule, claim, interval_rule,
                                      pooled_difference, pooled_quotient, unscored)
from spectree.claims.diagnosis import KNOBS, reading
from spectree.analysis.sweeps import scored
from spectree.claims.verdicts import HOLDS, INCONCLUSIVE, side
from spectree.claims.names import paper_kind, sd_st

# the papers' words, quoted once: notebook 02's and 03's claims read them
C2T_TABLE_2 = '"stably utilizes 75% to 80% of γ while keeping τ unchanged" (C2T Table 2)'
DYSPEC_TABLES_1_2 = ('"DySpec consistently outperforms both Sequoia and Specinfer … leading to a higher number of '
                     'accepted tokens at each decoding step" (DySpec Tables 1–2)')
DYSPEC_BUDGET = 64  # DySpec Tables 1–2: "the maximum draft token tree size is set to 64" (DySpec l.212)
GREEDY_DRAFT = ("slot values of the draft read at T = 1, greedy (the paper samples its draft at 0.6 at every target "
                "temperature, s2 l.192)")  # why DySpec's T = 0 readings are off the paper's point
DYSPEC_SEQUOIA_SHARE = 0.98  # the least share of Sequoia's τ DySpec has in Tables 1–2 (Table 1, CNN T = 0: 3.97/4.04)
INTERVAL = "BCa"  # every claim's bootstrap interval (scipy's bias-corrected and accelerated)
RATES = {"tau": ("tau", "steps"), "gamma": ("gamma", "steps"), "alpha": ("tau_drafted", "depth")}  # per-prompt sums
SUMS = ("steps", "tau", "gamma", "tau_drafted", "depth")  # what a matched reading resamples, per row and prompt


def _pick(table: pd.DataFrame, group: str, name: str, **params: Any) -> Optional[pd.Series]:
    rows = scored(table, group, name, **params)
    return rows.iloc[0] if len(rows) else None


def _sums(*rows: pd.Series) -> list[pd.DataFrame]:
    """Each row's per-prompt sums (`by_prompt`), restricted to the prompts all rows share, in one order."""
    frames = [pd.DataFrame.from_dict(r.by_prompt if isinstance(r.get("by_prompt"), dict) else {}, orient="index")
              for r in rows]
    common = sorted(set.intersection(*(set(f.index) for f in frames)))
    return [f.reindex(common) for f in frames]


def compare(a: pd.Series, b: pd.Series, rate: str, bar: float, what: str, *, quotient: bool = False,
            above: bool = True, strict: bool = True) -> Evidence:
    """A rate (tau, gamma, alpha) of row a against row b, paired over their prompts: the difference a − b
    (or the quotient a / b) against `bar`, by `bootstrap_rule`."""
    fa, fb = _sums(a, b)
    num, den = RATES[rate]
    return bootstrap_rule([fa[num], fa[den], fb[num], fb[den]], pooled_quotient if quotient else pooled_difference,
                          bar, what, above=above, strict=strict, method=INTERVAL)


def matched_rule(method: pd.DataFrame, reference: pd.DataFrame, reading: sweeps.Reading, bar: float, what: str,
                 *, above: bool = True, strict: bool = True) -> Evidence:
    """A statistic of two methods' knob sweeps (each a frame of scored rows, one per setting) read at a matched
    γ or τ (`sweeps.gamma_share`, `sweeps.tau_gain`, `sweeps.alpha_gain`), paired over prompts: every row's
    per-prompt sums (SUMS) are resampled together, and the curves' pooled τ, γ and α are recomputed on each
    resample before `reading`, by `bootstrap_rule`."""
    if not len(method) or not len(reference):
        return unscored("a compared method was not scored")
    rows = [r for frame in (method, reference) for _, r in frame.iterrows()]
    arrays = [f[c] for f in _sums(*rows) for c in SUMS]

    def statistic(*arrays: Any, axis: int = -1) -> Any:
        sums = np.stack([np.sum(x, axis=axis) for x in arrays], axis=-1)  # (..., rows · SUMS)
        out = []
        for s in sums.reshape(-1, len(rows), len(SUMS)):  # one resample: (rows, SUMS)
            rates = np.stack([s[:, 1] / s[:, 0], s[:, 2] / s[:, 0], s[:, 3] / s[:, 4]])  # τ, γ, α per row
            out.append(reading(sweeps.Curve(*rates[:, :len(method)]), sweeps.Curve(*rates[:, len(method):])))
        return np.asarray(out, dtype=float).reshape(sums.shape[:-1])
    return bootstrap_rule(arrays, statistic, bar, what, above=above, strict=strict, method=INTERVAL)


def second_reading(label: str, ev: Evidence, fmt: str) -> str:
    """A claim re-read at another knob value, in words: "m = 8: holds (+0.012 (95% CI …))"."""
    return f"{label}: {ev.verdict}" + (f" ({_reading(ev, fmt)})" if math.isfinite(ev.estimate) else "")


def knobs_reading(at: str, others: list[tuple[str, Evidence, str]]) -> dict:
    """The `diagnosis.KNOBS` reading of a claim read at `at` (the paper's knob values), re-read at each other value
    (label, evidence, number format): it holds where any other value holds, naming those (`where`)."""
    holding = [label for label, ev, _ in others if ev.verdict == HOLDS]
    text = "; ".join([at] + [second_reading(label, ev, fmt) for label, ev, fmt in others])
    return reading(text, HOLDS if holding else (others[0][1].verdict if others else ""), tried=bool(others),
                   where=", ".join(holding), off_point=True)


def _reading(ev: Evidence, fmt: str) -> str:
    """'+0.12 (95% CI +0.05–+0.20)': a matched reading's estimate and interval, as the claims print them."""
    if not math.isfinite(ev.estimate):
        return "not reached"
    return f"{ev.estimate:{fmt}}" + (f" (95% CI {ev.low:{fmt}}–{ev.high:{fmt}})" if math.isfinite(ev.low) else "")


def _at(rows: pd.DataFrame) -> str:
    return f"τ {rows.tau.iloc[0]:.3f} at γ {rows.gamma.iloc[0]:.2f}" if len(rows) else "not scored"


def _c2t_evidence(table: pd.DataFrame, group: str) -> tuple[Evidence, dict[int, Evidence], int]:
    """C2T Table 2's and Fig. 4's evidence in one sweep group: (median share w/o topk, {topk: largest share},
    EAGLE-2 sizes)."""
    e2, c2 = scored(table, group, "eagle2"), scored(table, group, "c2t")
    topks = sorted({p.get("topk", 0) for p in c2.params})
    variant = {t: c2[np.array([p.get("topk", 0) == t for p in c2.params], dtype=bool)] for t in topks}
    median = matched_rule(variant.get(0, c2.iloc[:0]), e2, sweeps.gamma_share(np.median, 2), 0.80,
                          "C2T's γ share at EAGLE-2's τ (median over the EAGLE-2 sizes reached)", above=False,
                          strict=False)
    worst = {t: matched_rule(rows, e2, sweeps.gamma_share(np.max, 2), 1.0, f"C2T {_topk(t)}'s γ share at "
                             "EAGLE-2's τ (largest over the EAGLE-2 sizes reached)", above=False)
             for t, rows in variant.items()}
    return median, worst, len(e2)


def _topk(t: int) -> str:
    return f"topk {t}" if t else "w/o topk"


def _knobs(table: pd.DataFrame, group: str) -> str:
    """'TopK 10, d_max 6': the K and depth of a group's EAGLE-2 rows (C2T's main tables: 15 and 10)."""
    rows = scored(table, group, "eagle2")
    params = rows.params.iloc[0] if len(rows) else {}
    return f"TopK {params.get('K', '—')}, d_max {params.get('d_max', '—')}" if len(rows) else "not scored"


C2T_MAIN_KNOBS = (15, 10)  # TopK and d_max of C2T's main tables and Fig. 4, EAGLE-2's too (C2T l.192)
C2T_TABLE4_KNOBS = (10, 6)  # Table 4's (C2T App. A, l.331): TopK 10, d_max 6
C2T_TABLE4_SHARE = 0.85  # Table 4: C2T β 0.65 reaches EAGLE-2 TopN 60's τ (3.66 vs 3.65) with γ 531,947 / 628,980 = 84.6%
C2T_TABLE_4 = ("C2T β 0.65: τ 3.66 at γ 531,947 vs EAGLE-2 TopN 60: τ 3.65 at γ 628,980 (84.6%); β 0.85: τ 3.06 at "
               "γ 226,569 vs TopN 26: τ 2.95 at γ 317,668 (71%) (Table 4, TopK 10, d_max 6, LLaMA-2 7B, MT-bench)")


def c2t_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """C2T against EAGLE-2 at matched τ, as C2T compares them (§5.2, "a scatter plot of τ versus γ"): the γ C2T's
    β curve needs at each EAGLE-2 size's τ, as a share of its γ. Table 2 (C2T without second pruning): the median
    share over the sizes reached (≥ 2) ≤ 0.80, the paper's upper figure, at the main tables' TopK 15, d_max 10;
    Fig. 4: each C2T variant's largest < 1, at the same knobs; Table 4: the median share ≤ 0.85 (its 84.6%) at its
    TopK 10, d_max 6. Each is read at the sweep's TopK and d_max, off the paper's point where they differ."""
    median, worst, sizes = _c2t_evidence(table, "c2t_fig4")
    rows = scored(table, "c2t_fig4", "eagle2")
    knobs = (rows.params.iloc[0].get("K"), rows.params.iloc[0].get("d_max")) if len(rows) else C2T_MAIN_KNOBS
    where = _knobs(table, "c2t_fig4")
    listed = table[(table.group == "c2t_fig4") & (table.name == "c2t") & (table.dataset == "all")]
    lost = sorted({p["beta"] for p in listed[~listed.replayable.astype(bool)].params})
    unreplayed = (f"; C2T at β {', '.join(f'{b:g}' for b in lost)} not replayed on this logbook (Table 2 runs β "
                  "0.2–0.35)" if lost else "")
    main_off = "" if knobs == C2T_MAIN_KNOBS else f"{where} (the main tables': TopK 15, d_max 10)"
    table4_off = "" if knobs == C2T_TABLE4_KNOBS else f"{where} (Table 4's: TopK 10, d_max 6)"
    table4 = replace(median, **_bar_rule(median, C2T_TABLE4_SHARE))
    share_text = (f"the share of EAGLE-2's γ C2T w/o topk needs at its τ (β interpolated, median over {sizes} sizes): "
                  f"{_reading(median, '.0%')}{unreplayed}")
    return [claim("C2T reaches EAGLE-2's τ with 75–80% of its γ (C2T Table 2)",
                  f"{C2T_TABLE_2}: C2T w/o second TopK, LLaMA-2 7B/13B/70B, MT-bench, TopK 15, d_max 10",
                  f"at {where}: {share_text}", median, key="c2t-table2", off_point=main_off),
            claim("C2T reaches EAGLE-2's τ with 85% of its γ at TopK 10, d_max 6 (C2T Table 4)", C2T_TABLE_4,
                  f"at {where}: {share_text}", table4, key="c2t-table4", off_point=table4_off),
            claim("C2T needs fewer candidates than EAGLE-2 at every τ (C2T Fig. 4)",
                  '"C2T consistently achieves lower γ for similar τ compared to EAGLE-2" (Fig. 4); with second TopK '
                  '"it consistently outperforms EAGLE-2" (App. B.6); TopK 15, d_max 10',
                  f"at {where}: largest share of EAGLE-2's γ at its τ: " + "; ".join(
                      f"{_topk(t)} {_reading(w, '.0%')}" for t, w in worst.items()),
                  all_of(worst.values()) if worst else unscored("no C2T rows to compare"), key="c2t-fig4",
                  off_point=main_off)]


def _bar_rule(ev: Evidence, bar: float) -> dict[str, Any]:
    """The fields of `ev` re-read against another bar (a ≤ claim on the same interval and halves)."""
    again = interval_rule(ev.estimate, ev.low, ev.high, bar, ev.n, "C2T's γ share at EAGLE-2's τ (median over the "
                          "EAGLE-2 sizes reached)", above=False, min_n=MIN_PROMPTS, unit="prompts",
                          method=f"95% paired {INTERVAL} bootstrap")
    halves = tuple(side(h, bar, above=False) for h in ev.half_estimates)
    return {"verdict": again.verdict, "rule": again.rule, "bar": bar, "halves": halves}


def _chain_rows(table: pd.DataFrame, stop: str, threshold: Optional[float] = None) -> pd.DataFrame:
    rows = scored(table, "chain_table3", "chain", stop=stop)
    return rows if threshold is None else rows[np.array([math.isclose(p["threshold"], threshold)
                                                         for p in rows.params], dtype=bool)]


def chain_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """C2T Table 3 (chain mode, at most 10 tokens) at the matched γ or τ its table compares at, each method's knob
    swept (`sweeps.chain_sweep`): DyJoint's threshold curve at the γ of DyMax 0.3; the γ C2T's β curve needs at
    the τ of DyJoint 0.08; C2T's curve at each fixed chain's γ (the median over the lengths it spans)."""
    dyjoint, dymax_ref, dyjoint_ref = (_chain_rows(table, "dyjoint"), _chain_rows(table, "dymax", 0.3),
                                       _chain_rows(table, "dyjoint", 0.08))
    c2t, fixed = scored(table, "chain_table3", "c2t"), _chain_rows(table, "none")
    one = matched_rule(dyjoint, dymax_ref, sweeps.tau_gain(), 0.0, "τ(DyJoint at DyMax 0.3's γ) − τ(DyMax 0.3)")
    two = matched_rule(c2t, dyjoint_ref, sweeps.gamma_share(), 1.0, "γ(C2T at DyJoint 0.08's τ) / γ(DyJoint 0.08)",
                       above=False)
    three = matched_rule(c2t, fixed, sweeps.tau_gain(np.median, 2), 0.0,
                         "τ(C2T at a fixed chain's γ) − τ(fixed chain), median over the lengths")
    beta = c2t[np.array([math.isclose(p["beta"], sweeps.CHAIN_BETA) for p in c2t.params], dtype=bool)]
    longest = max((p.get("k", 0) for p in scored(table, "chain_table3", "chain").params), default=0)
    dynamic = pd.concat([dyjoint, _chain_rows(table, "dymax"), c2t])
    reached = float(dynamic.max_depth.max()) if "max_depth" in dynamic and len(dynamic) else math.nan
    bound = not math.isfinite(reached) or reached >= longest  # a dynamic chain reached the logbook's longest
    off = f"chains cut at {longest} tokens (the paper's 10), which a dynamic chain reached" if 0 < longest < 10 \
        and bound else ""
    return [claim("Chain mode: at DyMax's γ, DyJoint reaches a higher τ (C2T Table 3)",
                  "DyJoint (0.08) τ 2.12 at γ 129,876 vs DyMax (0.3) τ 2.06 at γ 127,018 (τ without the bonus "
                  "token)",
                  f"DyMax 0.3 {_at(dymax_ref)}; DyJoint's τ gain at that γ ({len(dyjoint)} thresholds, "
                  f"interpolated): {_reading(one, '+.3f')}", one, key="c2t-table3-dyjoint", off_point=off),
            claim("Chain mode: C2T reaches DyJoint's τ with fewer candidates (C2T Table 3)",
                  "C2T (β 0.85) τ 2.12 at γ 116,694 vs DyJoint (0.08) τ 2.12 at γ 129,876",
                  f"DyJoint 0.08 {_at(dyjoint_ref)}; C2T β 0.85 {_at(beta)}; the share of DyJoint's γ C2T needs "
                  f"at its τ ({len(c2t)} β, interpolated): {_reading(two, '.0%')}", two, key="c2t-table3-c2t",
                  off_point=off),
            claim("Chain mode: C2T reaches a higher τ than fixed chains of the same γ (C2T Table 3)",
                  '"C2T retains an advantage in chain mode"; EAGLE-1/2 chains of 5–9: τ 1.98–2.13 at γ 112,231–'
                  "184,140 vs C2T τ 2.12 at γ 116,694",
                  f"C2T's τ gain at the γ of {len(fixed)} fixed lengths ({len(c2t)} β, interpolated; median): "
                  f"{_reading(three, '+.3f')}", three, key="c2t-table3-fixed", off_point=off)]


def _pct_rows(table: pd.DataFrame) -> tuple[Optional[pd.Series], list[pd.Series]]:
    """(PCT at the paper's s_d/s_t, else the first PCT scored; PCT at every other s_d/s_t) of EDD Table 2."""
    rows = [r for _, r in scored(table, "edd_table2", "pct").iterrows()]
    paper = [r for r in rows if math.isclose(r.params.get("ratio") or -1.0, sweeps.PCT_RATIO_PAPER)]
    first = (paper or rows or [None])[0]
    return first, [r for r in rows if first is None or r.spec != first.spec]


EDD_EQUAL_TAU = ("EDD Table 2 reads α at equal τ: EAGLE-2 α 0.67 at τ 3.99, PCT α 0.74 at τ 3.99 (EDD l.688–689, "
                 "LLaMA2-Chat 7B, MT-bench)")  # α = accepted length ÷ the tree's depth (EDD l.521): at unequal τ
# a shallower, smaller tree wins α almost by construction, so the α claim is tallied at PCT's τ on EAGLE-2's N curve
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
    e2 = _pick(table, "edd_table2", "eagle2", N=sweeps.EDD_EAGLE2[2])
    vct, cape = _pick(table, "edd_table2", "vct"), _pick(table, "edd_table2", "cape")
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
    e2 = _pick(table, "edd_table2", "eagle2", N=sweeps.EDD_EAGLE2[2])
    off = _depth_cap(pct)
    at = f"PCT at {_ratio(pct)}"
    pct_alpha = f"{at} α {pct.alpha:.3f} at τ {pct.tau:.3f} (mean depth {pct.depth:.2f})" if pct is not None else ""
    fixed = (f"EAGLE-2 10/6/50 α {e2.alpha:.3f} at τ {e2.tau:.3f} (mean depth reached {e2.depth:.2f} of its 6)"
             if e2 is not None else "EAGLE-2 10/6/50 not scored")
    unmatched = (f"; at EDD's EAGLE-2 10/6/50 (unmatched, not the verdict): τ {pct.tau:.3f} vs {e2.tau:.3f}, γ "
                 f"{pct.gamma:.2f} vs {e2.gamma:.2f}" if pct is not None and e2 is not None else "")
    vct, cape = _pick(table, "edd_table2", "vct"), _pick(table, "edd_table2", "cape")
    static = None if vct is None or cape is None else max((vct, cape), key=lambda r: r.tau)
    paper_alpha = "α 0.74 vs 0.67 at τ 3.99 for both (LLaMA2-Chat 7B, MT-bench; EAGLE-2 10 / 6 / 50)"
    return [claim("PCT's acceptance rate α exceeds EAGLE-2's (EDD Table 2)", paper_alpha,
                  f"{pct_alpha} vs EAGLE-2 at that τ: {_e2_at_tau(pct, e2_sweep)}: α(PCT) − α(EAGLE-2) "
                  f"{_reading(evidence[0], '+.3f')}; {fixed}, τ unmatched: a second reading, not the verdict"
                  if pct is not None else "not scored on this logbook", evidence[0], key="edd-table2-alpha",
                  off_point=off, readings=readings[0]),
            claim("PCT keeps EAGLE-2's τ with about half its nodes (EDD §4.3.1, Fig. 6)",
                  '"PCT contains only about half the number of nodes while achieving a competitive average '
                  'acceptance length"',
                  f"{at} γ {pct.gamma:.2f} at τ {pct.tau:.3f}, as a share of the γ EAGLE-2's N curve needs at that τ "
                  f"({len(e2_sweep)} sizes, interpolated): {_reading(evidence[1], '.0%')}{unmatched}"
                  if pct is not None else "not scored on this logbook", evidence[1],
                  goal="γ ≤ 60% of EAGLE-2's at PCT's τ: our reading of 'about half' (τ matched: 'competitive')",
                  key="edd-half-nodes", off_point=off, readings=readings[1]),
            claim("PCT's τ beats VCT's and CAPE's (EDD Table 2)",
                  "τ 3.99 vs VCT 3.56 and CAPE 3.35 (LLaMA2-Chat 7B, MT-bench)",
                  f"{at} τ {pct.tau:.3f} vs {static['name']} {static.tau:.3f} (the better)"
                  if pct is not None and static is not None else "not scored on this logbook", evidence[2],
                  key="edd-table2-tau", off_point=off, readings=readings[2]),
            claim("PCT's α against EAGLE-2 10/6/50 at unmatched τ (EDD Table 2, second reading)", paper_alpha,
                  f"{pct_alpha} vs {fixed}: {_reading(evidence[3], '+.3f')}" if pct is not None
                  else "not scored on this logbook", evidence[3], key="edd-table2-alpha",
                  off_point="; ".join(x for x in (EDD_UNMATCHED, off) if x))]


def _nodes(params: dict[str, Any]) -> int:
    """A static tree's draft tokens by its spec (Sequoia n, SpecInfer-style k · d): its γ only where no
    sequence ends inside the tree."""
    return int(params.get("n") or params.get("k", 0) * params.get("d", 0))


def _budget_rows(table: pd.DataFrame, m: int) -> dict[str, Optional[pd.Series]]:
    """At budget m: DySpec uncapped (K = m) and capped (the smallest K below m), SpecInfer-style and Sequoia."""
    rows = scored(table, "budgets")
    dy = rows[(rows.name == "dyspec") & (rows.params.map(lambda p: p.get("m")) == m)]
    capped = dy[dy.params.map(lambda p: p.get("K", 8)) < m]
    pick = {"dyspec": dy[dy.params.map(lambda p: p.get("K", 8)) >= m],
            "capped": capped.loc[[capped.params.map(lambda p: p.get("K", 8)).idxmin()]] if len(capped) else capped,
            "sequences": rows[(rows.name == "sequences") & (rows.params.map(_nodes) == m)],
            "sequoia": rows[(rows.name == "sequoia") & (rows.params.map(_nodes) == m)]}
    return {k: (v.iloc[0] if len(v) else None) for k, v in pick.items()}


def _budget_evidence(rows: dict[str, Optional[pd.Series]], dyspec: str = "dyspec") -> list[Evidence]:
    """DySpec (`dyspec` or `capped`) against SpecInfer-style trees and against Sequoia at one budget."""
    dy, seq, sequoia = rows[dyspec], rows["sequences"], rows["sequoia"]
    return [unscored("DySpec or the SpecInfer-style tree was not scored") if dy is None or seq is None else
            compare(dy, seq, "tau", 0.0, "τ(DySpec) − τ(SpecInfer-style)"),
            unscored("DySpec or Sequoia was not scored") if dy is None or sequoia is None else
            compare(dy, sequoia, "tau", DYSPEC_SEQUOIA_SHARE, "τ(DySpec) / τ(Sequoia)", quotient=True,
                    strict=False)]


def budget_claims(table: pd.DataFrame, caps: Optional[pd.DataFrame] = None) -> list[dict[str, Any]]:
    """DySpec Tables 1–2 at their budget 64 (`DYSPEC_BUDGET`), Alg. 1 uncapped (K = m), worded to what the tables
    show: more accepted tokens than SpecInfer-style trees (all 12 cells), and at least 98% of Sequoia's (ahead in
    9 of 12 cells, behind in 3: Table 1's OWT T = 0, CNN T = 0 and 0.6). The other budgets and the K-capped DySpec
    are second readings; a budget the sweep lists but could not replay is named. `caps` (`sweeps.dyspec_caps`):
    how often the cap would bind, shown beside."""
    listed = table[(table.group == "budgets") & (table.dataset == "all")]
    budgets = sorted({p["m"] for p in listed[listed.name == "dyspec"].params})
    rows = {m: _budget_rows(table, m) for m in budgets}
    ready = [m for m in budgets if rows[m]["dyspec"] is not None]
    m = DYSPEC_BUDGET if DYSPEC_BUDGET in ready else max(ready, default=DYSPEC_BUDGET)
    at = rows.get(m, _budget_rows(table.iloc[:0], m))
    evidence = _budget_evidence(at)
    fmts = ("+.3f", ".0%")
    seconds: list[list[tuple[str, Evidence, str]]] = [[] for _ in evidence]
    if at["capped"] is not None:
        cap = at["capped"].params.get("K", 8)
        for i, ev in enumerate(_budget_evidence(at, "capped")):
            seconds[i].append((f"DySpec capped at K = {cap}", ev, fmts[i]))
    for other in (b for b in ready if b != m):
        for i, ev in enumerate(_budget_evidence(rows[other])):
            seconds[i].append((f"m = {other}", ev, fmts[i]))
    where = f"read at m = {m}, Alg. 1 uncapped (K = m)"
    off = "; ".join(x for x in ("" if m == DYSPEC_BUDGET else f"m = {m} (the paper's {DYSPEC_BUDGET} not scored on "
                                "this logbook)", GREEDY_DRAFT) if x)
    readings = [{KNOBS: knobs_reading(where, s)} for s in seconds]
    skipped = listed[~listed.replayable.astype(bool)]
    dropped = "; ".join(f"{r.spec} not replayable" for _, r in skipped.iterrows())
    binds = "" if caps is None or not len(caps) else (
        f"; uncapped Alg. 1 puts more than {int(caps.cap.iloc[0])} children under a node in "
        + ", ".join(f"{r.cap_binds:.0%} (m={r.m})" for _, r in caps.iterrows() if r.get("replayable", True))
        + " of its trees")

    def ours(other: str) -> str:
        text = "; ".join(f"m={b}: DySpec τ {_tau(rows[b]['dyspec'])}" + (
            f" (capped {_tau(rows[b]['capped'])})" if rows[b]["capped"] is not None else "")
            + f" vs {other} {_tau(rows[b][other])}" for b in budgets)
        return text + binds + (f"; {dropped}" if dropped else "")
    paper = f"{DYSPEC_TABLES_1_2}: budget 64"
    return [claim("At budget 64 DySpec accepts more per step than SpecInfer-style trees (DySpec Tables 1–2)",
                  f"{paper}; ahead of Specinfer in all 12 cells (C4, T = 0: 5.25 vs 3.32)", ours("sequences"),
                  evidence[0], key="dyspec-tables12-specinfer", off_point=off, cell="T = 0",
                  readings=readings[0], budget=m, knobs=readings[0][KNOBS]["text"]),
            claim("At budget 64 DySpec accepts about as much per step as Sequoia or more (DySpec Tables 1–2)",
                  f"{paper}; against Sequoia ahead in 9 of 12 cells, behind in 3 (Table 1: OWT T = 0 3.79 vs 3.81, "
                  "CNN T = 0 3.97 vs 4.04, CNN T = 0.6 3.18 vs 3.22)", ours("sequoia"), evidence[1],
                  goal=f"τ ≥ {DYSPEC_SEQUOIA_SHARE:.0%} of Sequoia's: the least share in the paper's tables (98.3%)",
                  key="dyspec-tables12-sequoia", off_point=off, cell="T = 0", readings=readings[1],
                  budget=m, knobs=readings[1][KNOBS]["text"])]


def _tau(row: Optional[pd.Series]) -> str:
    return "—" if row is None else f"{row.tau:.3f}"


def collect_claims(table: pd.DataFrame, caps: Optional[pd.DataFrame] = None, machine_kind: str = "one-token"
                   ) -> list[dict[str, Any]]:
    """Every claim the standard sweeps check, in paper order (`caps`: `sweeps.dyspec_caps`, for DySpec's claims;
    `machine_kind`: what PCT's second s_d/s_t is, `edd_claims`)."""
    return c2t_claims(table) + chain_claims(table) + edd_claims(table, machine_kind) + budget_claims(table, caps)
