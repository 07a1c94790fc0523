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
from spectree.analysis.edd_claims import edd_claims
from spectree.analysis.matched import INTERVAL, compare, estimate_text, knobs_reading, matched_rule, pick
from spectree.analysis.sweeps import scored
from spectree.claims.claims import MIN_PROMPTS, Evidence, all_of, claim, interval_rule, unscored
from spectree.claims.diagnosis import KNOBS
from spectree.claims.verdicts import side

# the papers' words, quoted once: notebook 02's and 03's claims read them
C2T_TABLE_2 = '"stably utilizes 75% to 80% of γ while keeping τ unchanged" (C2T Table 2)'
DYSPEC_TABLES_1_2 = ('"DySpec consistently outperforms both Sequoia and Specinfer … leading to a higher number of '
                     'accepted tokens at each decoding step" (DySpec Tables 1–2)')
DYSPEC_BUDGET = 64  # DySpec Tables 1–2: "the maximum draft token tree size is set to 64" (DySpec l.212)
GREEDY_DRAFT = ("slot values of the draft read at T = 1, greedy (the paper samples its draft at 0.6 at every target "
                "temperature, s2 l.192)")  # why DySpec's T = 0 readings are off the paper's point
DYSPEC_SEQUOIA_SHARE = 0.98  # the least share of Sequoia's τ DySpec has in Tables 1–2 (Table 1, CNN T = 0: 3.97/4.04)


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
                  f"{estimate_text(median, '.0%')}{unreplayed}")
    return [claim("C2T reaches EAGLE-2's τ with 75–80% of its γ (C2T Table 2)",
                  f"{C2T_TABLE_2}: C2T w/o second TopK, LLaMA-2 7B/13B/70B, MT-bench, TopK 15, d_max 10",
                  f"at {where}: {share_text}", median, key="c2t-table2", off_point=main_off),
            claim("C2T reaches EAGLE-2's τ with 85% of its γ at TopK 10, d_max 6 (C2T Table 4)", C2T_TABLE_4,
                  f"at {where}: {share_text}", table4, key="c2t-table4", off_point=table4_off),
            claim("C2T needs fewer candidates than EAGLE-2 at every τ (C2T Fig. 4)",
                  '"C2T consistently achieves lower γ for similar τ compared to EAGLE-2" (Fig. 4); with second TopK '
                  '"it consistently outperforms EAGLE-2" (App. B.6); TopK 15, d_max 10',
                  f"at {where}: largest share of EAGLE-2's γ at its τ: " + "; ".join(
                      f"{_topk(t)} {estimate_text(w, '.0%')}" for t, w in worst.items()),
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
                  f"interpolated): {estimate_text(one, '+.3f')}", one, key="c2t-table3-dyjoint", off_point=off),
            claim("Chain mode: C2T reaches DyJoint's τ with fewer candidates (C2T Table 3)",
                  "C2T (β 0.85) τ 2.12 at γ 116,694 vs DyJoint (0.08) τ 2.12 at γ 129,876",
                  f"DyJoint 0.08 {_at(dyjoint_ref)}; C2T β 0.85 {_at(beta)}; the share of DyJoint's γ C2T needs "
                  f"at its τ ({len(c2t)} β, interpolated): {estimate_text(two, '.0%')}", two, key="c2t-table3-c2t",
                  off_point=off),
            claim("Chain mode: C2T reaches a higher τ than fixed chains of the same γ (C2T Table 3)",
                  '"C2T retains an advantage in chain mode"; EAGLE-1/2 chains of 5–9: τ 1.98–2.13 at γ 112,231–'
                  "184,140 vs C2T τ 2.12 at γ 116,694",
                  f"C2T's τ gain at the γ of {len(fixed)} fixed lengths ({len(c2t)} β, interpolated; median): "
                  f"{estimate_text(three, '+.3f')}", three, key="c2t-table3-fixed", off_point=off)]


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
