"""Notebook 02's replay-sweep claims: policies replayed on the same prompts compared with a paired bootstrap over
the prompts' per-prompt sums (`sweeps.score`'s `by_prompt`), at the papers' comparison points — each method's knob
swept and its τ(γ) curve read at the other's point where a paper compares at matched γ or τ (`matched_rule`)."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from spectree.analysis import sweeps
from spectree.analysis.claims import (Evidence, all_of, bootstrap_rule, claim, pooled_difference, pooled_quotient,
                                      unscored)
from spectree.analysis.sweeps import scored

# the papers' words, quoted once: notebook 02's and 03's claims read them
C2T_TABLE_2 = '"stably utilizes 75% to 80% of γ while keeping τ unchanged" (C2T Table 2)'
DYSPEC_TABLES_1_2 = ('"DySpec consistently outperforms both Sequoia and Specinfer … leading to a higher number of '
                     'accepted tokens at each decoding step" (DySpec Tables 1–2)')
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
                          bar, what, above=above, strict=strict)


def versus(name: str, paper: str, a: Optional[pd.Series], b: Optional[pd.Series],
           judge: Callable[[pd.Series, pd.Series], Evidence],
           ours: Optional[Callable[[pd.Series, pd.Series], str]] = None, goal: str = "") -> dict[str, Any]:
    """A claim comparing two scored rows (a: the paper's method); inconclusive if either was not scored."""
    if a is None or b is None:
        return claim(name, paper, "not scored on this logbook", unscored("a compared policy was not scored"), goal)
    text = ours(a, b) if ours else f"τ {a.tau:.3f} vs {b.tau:.3f}, γ {a.gamma:.2f} vs {b.gamma:.2f} per forward"
    return claim(name, paper, text, judge(a, b), goal)


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
    return bootstrap_rule(arrays, statistic, bar, what, above=above, strict=strict)


def _reading(ev: Evidence, fmt: str) -> str:
    """'+0.12 (95% CI +0.05–+0.20)': a matched reading's estimate and interval, as the claims print them."""
    if not math.isfinite(ev.estimate):
        return "not reached"
    return f"{ev.estimate:{fmt}}" + (f" (95% CI {ev.low:{fmt}}–{ev.high:{fmt}})" if math.isfinite(ev.low) else "")


def _at(rows: pd.DataFrame) -> str:
    return f"τ {rows.tau.iloc[0]:.3f} at γ {rows.gamma.iloc[0]:.2f}" if len(rows) else "not scored"


def c2t_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """C2T against EAGLE-2 at matched τ, as C2T compares them (§5.2, "a scatter plot of τ versus γ"): the γ C2T's
    β curve needs at each EAGLE-2 size's τ, as a share of its γ. Table 2 (C2T without second pruning): the median
    share over the sizes reached (≥ 2) ≤ 0.80, the paper's upper figure; Fig. 4: each C2T variant's largest < 1."""
    e2, c2 = scored(table, "c2t_fig4", "eagle2"), scored(table, "c2t_fig4", "c2t")
    topks = sorted({p.get("topk", 0) for p in c2.params})
    variant = {t: c2[np.array([p.get("topk", 0) == t for p in c2.params], dtype=bool)] for t in topks}
    label = {t: f"topk {t}" if t else "w/o topk" for t in variant}
    median = matched_rule(variant.get(0, c2.iloc[:0]), e2, sweeps.gamma_share(np.median, 2), 0.80,
                          "C2T's γ share at EAGLE-2's τ (median over the EAGLE-2 sizes reached)", above=False,
                          strict=False)
    worst = {t: matched_rule(rows, e2, sweeps.gamma_share(np.max, 2), 1.0, f"C2T {label[t]}'s γ share at "
                             "EAGLE-2's τ (largest over the EAGLE-2 sizes reached)", above=False)
             for t, rows in variant.items()}
    return [claim("C2T reaches EAGLE-2's τ with 75–80% of its γ (C2T Table 2)",
                  f"{C2T_TABLE_2}: C2T w/o second TopK, LLaMA-2 7B/13B/70B, MT-bench; "
                  "Table 4 (TopK 10, d_max 6): τ 3.66 vs 3.65 at γ 531,947 vs 628,980",
                  f"the share of EAGLE-2's γ C2T w/o topk needs at its τ (β interpolated, median over "
                  f"{len(e2)} sizes): {_reading(median, '.0%')}", median),
            claim("C2T needs fewer candidates than EAGLE-2 at every τ (C2T Fig. 4)",
                  '"C2T consistently achieves lower γ for similar τ compared to EAGLE-2" (Fig. 4); with second TopK '
                  '"it consistently outperforms EAGLE-2" (App. B.6)',
                  "largest share of EAGLE-2's γ at its τ: " + "; ".join(f"{label[t]} {_reading(w, '.0%')}"
                                                                        for t, w in worst.items()),
                  all_of(worst.values()) if worst else unscored("no C2T rows to compare"))]


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
    return [claim("Chain mode: at DyMax's γ, DyJoint reaches a higher τ (C2T Table 3)",
                  "DyJoint (0.08) τ 2.12 at γ 129,876 vs DyMax (0.3) τ 2.06 at γ 127,018 (τ without the bonus "
                  "token)",
                  f"DyMax 0.3 {_at(dymax_ref)}; DyJoint's τ gain at that γ ({len(dyjoint)} thresholds, "
                  f"interpolated): {_reading(one, '+.3f')}", one),
            claim("Chain mode: C2T reaches DyJoint's τ with fewer candidates (C2T Table 3)",
                  "C2T (β 0.85) τ 2.12 at γ 116,694 vs DyJoint (0.08) τ 2.12 at γ 129,876",
                  f"DyJoint 0.08 {_at(dyjoint_ref)}; C2T β 0.85 {_at(beta)}; the share of DyJoint's γ C2T needs "
                  f"at its τ ({len(c2t)} β, interpolated): {_reading(two, '.0%')}", two),
            claim("Chain mode: C2T reaches a higher τ than fixed chains of the same γ (C2T Table 3)",
                  '"C2T retains an advantage in chain mode"; EAGLE-1/2 chains of 5–9: τ 1.98–2.13 at γ 112,231–'
                  "184,140 vs C2T τ 2.12 at γ 116,694",
                  f"C2T's τ gain at the γ of {len(fixed)} fixed lengths ({len(c2t)} β, interpolated; median): "
                  f"{_reading(three, '+.3f')}", three)]


def edd_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """EDD Table 2 and §4.3.1 on EDD's trees: PCT's α against EAGLE-2's at PCT's τ (EAGLE-2's N swept: the table
    shows them at equal τ); PCT's nodes and τ against EAGLE-2 at EDD's 10 / 6 / 50; PCT's τ against the better
    of VCT and CAPE."""
    pct, vct, cape = (_pick(table, "edd_table2", n) for n in ("pct", "vct", "cape"))
    e2, e2_sweep = (_pick(table, "edd_table2", "eagle2", N=sweeps.EDD_EAGLE2[2]),
                    scored(table, "edd_table2", "eagle2"))
    static = None if vct is None or cape is None else max((vct, cape), key=lambda r: r.tau)
    alpha = matched_rule(scored(table, "edd_table2", "pct").iloc[:1], e2_sweep, sweeps.alpha_gain, 0.0,
                         "α(PCT) − α(EAGLE-2 at PCT's τ, N interpolated)")
    return [claim("At equal τ, PCT's acceptance rate α exceeds EAGLE-2's (EDD Table 2)",
                  "α 0.74 vs 0.67 at τ 3.99 for both (LLaMA2-Chat 7B, MT-bench)",
                  f"PCT α {pct.alpha:.3f} at τ {pct.tau:.3f} (mean depth {pct.depth:.2f}), minus EAGLE-2's α at "
                  f"that τ ({len(e2_sweep)} sizes, interpolated): {_reading(alpha, '+.3f')}" if pct is not None
                  else "not scored on this logbook", alpha),
            versus("PCT keeps EAGLE-2's τ with about half its nodes (EDD §4.3.1, Fig. 6)",
                   '"PCT contains only about half the number of nodes while achieving a competitive average '
                   'acceptance length"', pct, e2,
                   lambda a, b: all_of([compare(a, b, "gamma", 0.6, "γ(PCT) / γ(EAGLE-2)", quotient=True,
                                                above=False, strict=False),
                                        compare(a, b, "tau", 0.95, "τ(PCT) / τ(EAGLE-2)", quotient=True,
                                                strict=False)]),
                   goal="γ ≤ 60% and τ ≥ 95% of EAGLE-2's (10 / 6 / 50): our reading of 'about half' and "
                        "'competitive'"),
            versus("PCT's τ beats VCT's and CAPE's (EDD Table 2)",
                   "τ 3.99 vs VCT 3.56 and CAPE 3.35 (LLaMA2-Chat 7B, MT-bench)", pct, static,
                   lambda a, b: compare(a, b, "tau", 0.0, "τ(PCT) − τ(the better of VCT and CAPE)"),
                   lambda a, b: f"τ {a.tau:.3f} vs {b['name']} {b.tau:.3f} (the better)")]


def _nodes(params: dict[str, Any]) -> int:
    """A static tree's draft tokens by its spec (Sequoia n, SpecInfer-style k · d): its γ only where no
    sequence ends inside the tree."""
    return int(params.get("n") or params.get("k", 0) * params.get("d", 0))


def budget_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """DySpec Tables 1–2: at each budget m, DySpec's τ against the best static tree of m draft tokens."""
    rows = scored(table, "budgets")
    pairs = []  # (m, DySpec row, best static row)
    for _, dy in rows[rows.name == "dyspec"].iterrows():
        static = rows[rows.name.isin(["sequences", "sequoia"]) & (rows.params.map(_nodes) == dy.params["m"])]
        if len(static):
            pairs.append((dy.params["m"], dy, static.loc[static.tau.idxmax()]))
    parts = [compare(dy, st, "tau", 0.0, "τ(DySpec) − τ(best static)", strict=False) for _, dy, st in pairs]
    ev = all_of(parts, f"{parts[0].rule}, at every budget") if parts else unscored("no static tree of a DySpec budget")
    return [claim("At the same budget DySpec accepts more than static trees (DySpec Tables 1–2)",
                  f"{DYSPEC_TABLES_1_2}: budget 64; C4, T = 0: 5.25 vs 4.99 and 3.32",
                  "; ".join(f"m={m}: τ {a.tau:.3f} vs best static {b.tau:.3f}" for m, a, b in pairs) or "not scored",
                  ev)]


def collect_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Every claim the standard sweeps check, in paper order."""
    return c2t_claims(table) + chain_claims(table) + edd_claims(table) + budget_claims(table)
