"""Statistics behind the papers' analysis figures, on a table of draft tokens (numpy / scipy / pandas only).

- C2T Fig. 2: entropy bins × rank — mean draft probability, acceptance rate and their difference; bins in nats
  or bits (the paper names no unit), its claims read cell by cell off the rank-1 column, at the draft's first
  layer ("a single forward" per position, s0 l.71: `FIG2_DEPTH`) with every logged depth pooled beside.
- DySpec Fig. 2: acceptance and target probability against draft probability (column-normalised histograms)
  over the drawn (sampled) draft tokens.

EDD Fig. 3b's calibration is in `analysis.calibration`, Gunjur et al.'s Fig. 1 in `analysis.entropy_match`.

The token table (`token_tables.logbook_tokens`; `token_tables.temperature_tokens` at T > 0) has one row
per draft token: prompt, dataset, position, depth, rank (0 = most likely), token, p (draft probability), joint,
entropy (nats, full vocabulary, of the distribution the token was drawn from), entropy_topm, confidence
(max probability of that distribution), accept (greedy: 1 if the token is on the target's greedy path, else
0; stochastic: min(1, T(x)/D(x))), target_prob, examined (its parent is on the greedy path, so a verifier
would examine it) and chain (it lies on the draft's rank-0 chain from the root).
Every claim is built by `spectree.claims.claims.claim` from one of its rules (verdict, rule, n, details). Tokens
of one prompt are correlated, so every interval here resamples PROMPTS with all their tokens (a cluster
bootstrap, `claims.cluster_rule`): its n is the number of prompts, at least `claims.MIN_PROMPTS`.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from spectree.claims.claims import MIN_PROMPTS, Evidence, all_of, claim, cluster_rule
from spectree.claims.verdicts import INCONCLUSIVE
from spectree.claims.rules import prompt_codes, prompt_sums, ratio_statistic, spearman_statistic

ENTROPY_EDGES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, math.inf)  # C2T Fig. 2: 0–1, …, 5–6, > 6 (in the unit read)
ENTROPY_UNITS = {"nats": 1.0, "bits": math.log(2)}  # one unit, in nats (the token table stores nats)
ENTROPY_COLUMNS = {"entropy": "full vocabulary", "entropy_topm": "top-1000, renormalised"}  # of the draft's distribution
DYSPEC_DRAFT_T = 0.6  # DySpec Fig. 2's draft temperature: "set the draft temperature to 0.6" (s2 l.192)
FIG2_DEPTH = 1  # C2T Fig. 2 "performed a single forward" per position (s0 l.71): the draft's first layer


def at_depth(tokens: pd.DataFrame, depth: Optional[int] = FIG2_DEPTH) -> pd.DataFrame:
    """The token table's rows drawn at `depth` (1: the draft's first layer, one forward after the committed
    prefix, C2T Fig. 2's population); None: every depth."""
    return tokens if depth is None else tokens[tokens.depth == depth]


def depth_label(tokens: pd.DataFrame, depth: Optional[int] = FIG2_DEPTH) -> str:
    """'depth 1' or, for every depth, 'depths 1–10' (the table's range)."""
    if depth is not None:
        return f"depth {depth}"
    lo, hi = (int(tokens.depth.min()), int(tokens.depth.max())) if len(tokens) else (1, 1)
    return f"depth {lo}" if lo == hi else f"depths {lo}–{hi} pooled"


# --- binning ---------------------------------------------------------------------------------------------

def entropy_bin(entropy: Any, edges: Sequence[float] = ENTROPY_EDGES) -> np.ndarray:
    """Bin index per value; bins are right-closed, [e0, e1], (e1, e2], …, (e_{n-1}, e_n], so with C2T's edges
    an entropy of exactly 1.0 is in "0–1" and the last bin holds entropies strictly above 6."""
    inner = np.asarray(edges[1:-1], dtype=float)
    return np.digitize(np.asarray(entropy, dtype=float), inner, right=True)


def bin_labels(edges: Sequence[float] = ENTROPY_EDGES) -> list[str]:
    """'0–1', '1–2', …, and '> 6' for a last bin without an upper edge."""
    return [f"> {lo:g}" if math.isinf(hi) else f"{lo:g}–{hi:g}" for lo, hi in zip(edges[:-1], edges[1:])]


def uniform_bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin index per value for finite edges, left-closed, the last bin closed; values outside clipped."""
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)


# --- C2T Fig. 2 ------------------------------------------------------------------------------------------

def entropy_in(tokens: pd.DataFrame, unit: str = "nats", column: str = "entropy") -> np.ndarray:
    """[n] the token table's entropy `column` (stored in nats) in `unit`: bits = nats / ln 2. C2T names no unit
    (s0 l.67, l.71), so its bins 0–1, …, > 6 are read in either."""
    if unit not in ENTROPY_UNITS:
        raise ValueError(f"entropy unit must be one of {list(ENTROPY_UNITS)}, got {unit!r}")
    if column not in ENTROPY_COLUMNS:
        raise ValueError(f"entropy column must be one of {list(ENTROPY_COLUMNS)}, got {column!r}")
    return tokens[column].to_numpy(dtype=float) / ENTROPY_UNITS[unit]


def cell_table(tokens: pd.DataFrame, edges: Sequence[float] = ENTROPY_EDGES, max_rank: int = 20,
               min_count: int = 30, unit: str = "nats", entropy: str = "entropy") -> pd.DataFrame:
    """One row per (entropy bin, rank 1..max_rank) over the examined tokens: count, mean draft probability,
    acceptance rate, diff = mean_p − accept, and `masked` where the count is below min_count. Edges are in
    `unit`; `entropy` names the column binned (ENTROPY_COLUMNS); both are kept as columns of the table."""
    t = tokens[tokens.examined & (tokens["rank"] < max_rank)]
    grid = pd.MultiIndex.from_product([range(len(edges) - 1), range(1, max_rank + 1)], names=["bin", "rank"])
    g = (pd.DataFrame({"bin": entropy_bin(entropy_in(t, unit, entropy), edges), "rank": t["rank"].to_numpy() + 1,
                       "p": t.p.to_numpy(), "accept": t.accept.to_numpy()})
         .groupby(["bin", "rank"]).agg(count=("p", "size"), mean_p=("p", "mean"), accept=("accept", "mean"))
         .reindex(grid).reset_index())
    g["count"] = g["count"].fillna(0).astype(int)
    g["diff"] = g.mean_p - g.accept
    g["masked"] = g["count"] < min_count
    g.insert(1, "entropy_bin", [bin_labels(edges)[b] for b in g["bin"]])
    return g.assign(lo=[edges[b] for b in g["bin"]], hi=[edges[b + 1] for b in g["bin"]], unit=unit, entropy=entropy)


def cell_matrix(cells: pd.DataFrame, value: str, masked: bool = True) -> pd.DataFrame:
    """cell_table as an entropy-bin × rank matrix of one column (masked cells NaN)."""
    data = cells.assign(**{value: cells[value].where(~cells.masked)}) if masked else cells
    order = list(dict.fromkeys(cells.entropy_bin))
    return data.pivot(index="entropy_bin", columns="rank", values=value).loc[order]


def _top1_in(tokens: pd.DataFrame, lo: float, hi: float, unit: str = "nats", entropy: str = "entropy"
             ) -> pd.DataFrame:
    h = entropy_in(tokens, unit, entropy)
    return tokens[tokens.examined & (tokens["rank"] == 0) & (h > lo) & (h <= hi)]


def top1_bias(tokens: pd.DataFrame, lo: float, hi: float, unit: str = "nats", entropy: str = "entropy"
              ) -> dict[str, float]:
    """Top-1 examined tokens with lo < entropy ≤ hi (in `unit`): count, mean p, acceptance, and the mean of
    accept − p with its standard error (scipy sem)."""
    t = _top1_in(tokens, lo, hi, unit, entropy)
    d = (t.accept - t.p).to_numpy()
    return {"count": len(d), "mean_p": float(t.p.mean()) if len(d) else math.nan,
            "accept": float(t.accept.mean()) if len(d) else math.nan,
            "accept_minus_p": float(d.mean()) if len(d) else math.nan,
            "se": float(stats.sem(d)) if len(d) > 1 else math.nan}


def top1_evidence(tokens: pd.DataFrame, lo: float, hi: float, under: bool, unit: str = "nats",
                  entropy: str = "entropy", min_count: int = 30, n_resamples: int = 2000) -> Evidence:
    """Top-1 tokens with lo < entropy ≤ hi: mean(acceptance − p) over the drawn prompts' tokens (Σ (accept −
    p) / Σ tokens) > 0 (under-estimated, blue) or < 0 (over-estimated, red), by the 95% bootstrap interval
    over prompts, at least MIN_PROMPTS prompts and min_count tokens."""
    t = _top1_in(tokens, lo, hi, unit, entropy)
    codes, g = prompt_codes(t.prompt)
    mean = ratio_statistic(prompt_sums(codes, g, t.accept - t.p), prompt_sums(codes, g))
    return cluster_rule(mean, g, 0.0, "mean(acceptance − p) of the top-1 tokens", above=under, strict=True,
                        tokens=len(t), min_tokens=min_count, n_resamples=n_resamples)


def top1_cell_tests(tokens: pd.DataFrame, cells: pd.DataFrame, rows: Sequence[int], under: bool, min_count: int = 30,
                    n_resamples: int = 2000) -> tuple[Evidence, list[dict[str, Any]]]:
    """The rank-1 cells of the given entropy rows of `cells` (cell_table), each judged by `top1_evidence`; cells
    with fewer than min_count tokens (grey in the figure) are skipped. The rows together: every tested cell on
    the claimed side (`claims.all_of`). Returns (evidence, one dict per tested cell)."""
    unit, entropy = cells.unit.iloc[0], cells.entropy.iloc[0]
    top1 = cells[(cells["rank"] == 1) & cells["bin"].isin(rows) & ~cells.masked]
    parts, rows_out = [], []
    for _, c in top1.iterrows():
        ev = top1_evidence(tokens, c.lo if c["bin"] else -math.inf, c.hi, under, unit, entropy, min_count, n_resamples)
        parts.append(ev)
        rows_out.append({"entropy_bin": c.entropy_bin, "count": int(c["count"]), "accept_minus_p": ev.estimate,
                         "low": ev.low, "high": ev.high, "verdict": ev.verdict})
    side, labels = ">" if under else "<", ", ".join(dict.fromkeys(cells[cells["bin"].isin(rows)].entropy_bin))
    rule = (f"every rank-1 cell of entropy rows {labels} ({unit}) with ≥ {min_count} tokens: 95% bootstrap interval "
            f"over prompts of mean(acceptance − p) {side} 0, n ≥ {MIN_PROMPTS} prompts")
    return all_of(parts, rule if parts else f"no rank-1 cell of rows {labels} ({unit}) has ≥ {min_count} tokens"), rows_out


def _cells_text(rows: list[dict[str, Any]]) -> str:
    def interval(r: dict[str, Any]) -> str:
        return "no interval" if math.isnan(r["low"]) else f"{r['low']:+.3f} to {r['high']:+.3f}"
    return "; ".join(f"{r['entropy_bin']}: {r['accept_minus_p']:+.3f} ({interval(r)}, {r['count']} tokens, "
                     f"{r['verdict']})" for r in rows) or "no cell with enough tokens"


def _c2t_reading(tokens: pd.DataFrame, cells: pd.DataFrame, edges: list, rows: list, under: bool, lo: float,
                 hi: float, min_count: int, n_resamples: int) -> tuple[Evidence, dict[str, dict[str, Any]]]:
    """One claim's reading on `tokens` binned like `cells`: the evidence in cells' unit and, per unit, the verdict,
    the tested cells and the pooled top-1 bias (`top1_bias`)."""
    unit, entropy = cells.unit.iloc[0], cells.entropy.iloc[0]
    readings, evidence = {}, {}
    for u in (unit, *(v for v in ENTROPY_UNITS if v != unit)):
        c = cell_table(tokens, edges, int(cells["rank"].max()), min_count, u, entropy)
        evidence[u], tested = top1_cell_tests(tokens, c, rows, under, min_count, n_resamples)
        readings[u] = {"verdict": evidence[u].verdict, "cells": tested, "pooled": top1_bias(tokens, lo, hi, u, entropy)}
    return evidence[unit], readings


def c2t_claims(tokens: pd.DataFrame, cells: pd.DataFrame, high_above: float = 3.0, low_upto: float = 1.0,
               min_count: int = 30, n_resamples: int = 2000, depth: Optional[int] = FIG2_DEPTH
               ) -> list[dict[str, Any]]:
    """C2T §3 (s0 l.77–81), read off Fig. 2c's rank-1 column: at high entropy the top-1 token is under-estimated
    (acceptance > p: every rank-1 cell of the rows from `high_above` up is blue), at low entropy over-estimated
    (every rank-1 cell of the rows up to `low_upto` is red); each cell by `top1_evidence`. The verdict reads the
    tokens at `depth` (Fig. 2's "single forward": the first layer; None: every depth), binned as `cells` is (its
    unit, entropy column, edges and ranks; `cells` may be of any depths), in cells' unit. Beside it, in the
    details: the same reading in the other unit, the pooled top-1 bias (all top-1 tokens above 3 / up to 1), and
    the second reading over every depth of the table (`all_depths`)."""
    unit, entropy = cells.unit.iloc[0], cells.entropy.iloc[0]
    edges = sorted({*cells.lo, cells.hi.max()})
    n_bins = len(edges) - 1
    verdict_tokens = at_depth(tokens, depth)
    where, pooled_where = depth_label(tokens, depth), depth_label(tokens, None)
    second = depth is not None and pooled_where != where
    out = []
    for key, name, paper, under, rows, lo, hi in (
            ("c2t-fig2c-high", "C2T Fig. 2c: high entropy, top-1 under-estimated",
             "\"When the entropy is high, the node with the highest probability in the distribution is underestimated "
             "in terms of probability\" (s0 l.79; blue cells of Fig. 2c; \"a single forward\", l.71)", True,
             [b for b in range(n_bins) if edges[b] >= high_above], high_above, math.inf),
            ("c2t-fig2c-low", "C2T Fig. 2c: low entropy, top-1 over-estimated",
             "\"When the entropy is low, the node with the highest probability in the distribution is overestimated "
             "in terms of probability\" (s0 l.81; red cells of Fig. 2c; \"a single forward\", l.71)", False,
             [b for b in range(n_bins) if edges[b + 1] <= low_upto], -math.inf, low_upto)):
        ev, readings = _c2t_reading(verdict_tokens, cells, edges, rows, under, lo, hi, min_count, n_resamples)
        other = [u for u in readings if u != unit]
        ours = (f"{where} (the verdict), rank-1 cells ({unit}): {_cells_text(readings[unit]['cells'])}; in "
                + "; in ".join(f"{u}: {readings[u]['verdict']} ({_cells_text(readings[u]['cells'])})" for u in other))
        all_depths = {}
        if second:
            pooled_ev, all_depths = _c2t_reading(tokens, cells, edges, rows, under, lo, hi, min_count, n_resamples)
            ours += (f". Second reading, {pooled_where}: {pooled_ev.verdict} "
                     f"({_cells_text(all_depths[unit]['cells'])})")
        rows_text = ", ".join(bin_labels(edges)[b] for b in rows)
        out.append(claim(name, paper, ours, ev, key=key,
                         goal=f"our reading of '{'high' if under else 'low'}': rows {rows_text} ({unit}; the paper "
                              f"gives no unit and no row), every rank-1 cell with ≥ {min_count} tokens, at {where}",
                         **readings[unit]["pooled"], unit=unit, entropy=ENTROPY_COLUMNS[entropy], depth=where,
                         prompts=int(verdict_tokens.prompt.nunique()), by_unit=readings,
                         all_depths={"depths": pooled_where, **all_depths} if second else {}))
    return out


# --- DySpec Fig. 2: column-normalised histograms -----------------------------------------------------------

def column_normalised_histogram(x: Any, y: Any, x_edges: Sequence[float], y_edges: Sequence[float]
                                ) -> tuple[np.ndarray, np.ndarray]:
    """([n_y, n_x] shares, [n_x] counts): each column (an x bin) sums to 1 over y, NaN where it is empty.
    Bins are left-closed, the last one closed, values outside the edges clipped into the end bins."""
    xe, ye = np.asarray(x_edges, dtype=float), np.asarray(y_edges, dtype=float)
    xb = uniform_bin(np.asarray(x, dtype=float), xe)
    yb = uniform_bin(np.asarray(y, dtype=float), ye)
    h = np.zeros((len(ye) - 1, len(xe) - 1))
    np.add.at(h, (yb, xb), 1.0)
    counts = h.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, h / counts, np.nan), counts.astype(int)


def binned_mean(x: Any, y: Any, edges: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(mean of y, count) per x bin (same binning as column_normalised_histogram)."""
    e = np.asarray(edges, dtype=float)
    b = uniform_bin(np.asarray(x, dtype=float), e)
    count = np.bincount(b, minlength=len(e) - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(b, np.asarray(y, dtype=float), len(e) - 1) / count, count


def spearman(x: Any, y: Any) -> tuple[float, float]:
    """Spearman ρ and its p-value (NaN with fewer than 3 points or a constant input)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    res = stats.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)


def spearman_rule(x: Any, y: Any, prompt: Any, bar: float, what: str, *, strict: bool = False, min_count: int = 30,
                  level: float = 0.95, n_resamples: int = 2000) -> Evidence:
    """Spearman ρ(x, y) of draft tokens against a bar (ρ > bar if strict, else ≥) by its bootstrap interval
    over prompts (`rules.spearman_statistic`: ρ of each resample's tokens, re-ranked), at least MIN_PROMPTS
    prompts and min_count tokens; token pairs with a missing value are left out."""
    x, y, prompt = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(prompt)
    ok = np.isfinite(x) & np.isfinite(y)
    codes, g = prompt_codes(prompt[ok])
    return cluster_rule(spearman_statistic(x[ok], y[ok], codes, g), g, bar, what, strict=strict,
                        tokens=int(ok.sum()), min_tokens=min_count, level=level, n_resamples=n_resamples)


def rise_rule(x: Any, y: Any, prompt: Any, edges: Sequence[float], what: str, *, min_count: int = 30,
              level: float = 0.95, n_resamples: int = 2000) -> tuple[Evidence, list[dict[str, Any]]]:
    """Mean y rising at every step across bins of x: over the bins (`uniform_bin` of `edges`) holding ≥ min_count
    tokens, each step from one to the next by the bootstrap interval over prompts of mean(y | upper) − mean(y |
    lower) > 0 (`claims.cluster_rule` on per-prompt bin sums), all steps together (`claims.all_of`): holds when
    every step rises, does not hold when one falls, inconclusive otherwise or with fewer than two such bins. The
    evidence's interval is the weakest step's (lowest low). Returns (evidence, one dict per bin)."""
    x, y, prompt = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(prompt)
    ok, e = np.isfinite(x) & np.isfinite(y), np.asarray(edges, dtype=float)
    codes, g = prompt_codes(prompt[ok])
    b, nb = uniform_bin(x[ok], e), len(e) - 1
    count, total = prompt_sums(codes, g, None, b, nb), prompt_sums(codes, g, y[ok], b, nb)
    kept = [int(i) for i in np.flatnonzero(count.sum(0) >= min_count)]
    bins = [{"lo": float(e[i]), "hi": float(e[i + 1]), "count": int(count[:, i].sum()),
             "mean": float(total[:, i].sum() / count[:, i].sum())} for i in kept]

    def rise(i: int, j: int) -> Any:  # mean y in bin j − mean y in bin i, per resample of prompts
        return lambda w: (w @ total[:, j]) / (w @ count[:, j]) - (w @ total[:, i]) / (w @ count[:, i])
    parts = [cluster_rule(rise(i, j), g, 0.0, f"the rise in mean {what}", strict=True, min_tokens=min_count,
                          tokens=int(count[:, [i, j]].sum()), level=level, n_resamples=n_resamples)
             for i, j in zip(kept, kept[1:])]
    labels = ", ".join(f"{e[i]:.3g}–{e[i + 1]:.3g}" for i in kept)
    rule = (f"every step between adjacent bins with ≥ {min_count} tokens ({labels}): {level:.0%} bootstrap interval "
            f"over prompts of the rise in mean {what} > 0, n ≥ {MIN_PROMPTS} prompts")
    if not parts:
        return Evidence(INCONCLUSIVE, f"fewer than two bins with ≥ {min_count} tokens: no step to read", g), bins
    weakest = min(parts, key=lambda p: -math.inf if math.isnan(p.low) else p.low)
    return replace(all_of(parts, rule), estimate=weakest.estimate, low=weakest.low, high=weakest.high, bar=0.0), bins


def step_text(ev: Evidence, level: float) -> str:
    """'+0.154, 95% CI over prompts +0.103 to +0.208' for `rise_rule`'s weakest step ('no interval' without one)."""
    ci = "no interval" if math.isnan(ev.low) else f"{level:.0%} CI over prompts {ev.low:+.3f} to {ev.high:+.3f}"
    return f"{ev.estimate:+.3f}, {ci}"


DRAWS = 20  # draws per examined distribution for DySpec Fig. 2's population (`predicted_tokens`)


def predicted_tokens(tokens: pd.DataFrame, draws: int = DRAWS, seed: int = 0) -> pd.DataFrame:
    """DySpec Fig. 2's population, the predicted (sampled) draft tokens (s2 l.43, l.76): from every examined
    distribution (prompt, position, depth; one per depth, its parent on the greedy path) `draws` tokens drawn
    i.i.d. from the draft probabilities p it was logged with (numpy default_rng(seed)), one row per draw, so a
    token counts in proportion to p, as a sampled tree would draw it — not each of the logged top 20 once. A
    draw that falls outside the logged tokens (probability 1 − Σ p, `unlogged_mass`) is dropped: its target
    probability is not logged. Rows keep their columns; a token drawn twice is two rows."""
    if draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws}")
    t = tokens[tokens.examined].reset_index(drop=True)
    if t.empty:
        return t
    dist = t.groupby(["prompt", "position", "depth"], sort=False).ngroup().to_numpy()  # [n] distribution index
    slot = t.groupby(dist).cumcount().to_numpy()  # [n] the token's place among its distribution's rows
    probs = np.zeros((dist.max() + 1, slot.max() + 2))  # [distributions, logged tokens + the unlogged rest]
    probs[dist, slot] = t.p.to_numpy(dtype=float)
    probs[:, -1] = np.clip(1.0 - probs[:, :-1].sum(1), 0.0, None)
    counts = np.random.default_rng(seed).multinomial(draws, probs / probs.sum(1, keepdims=True))
    return t.loc[np.repeat(np.arange(len(t)), counts[dist, slot])].reset_index(drop=True)


def unlogged_mass(tokens: pd.DataFrame) -> float:
    """Mean over the examined distributions of 1 − Σ p of their logged tokens: the share of draws that
    `predicted_tokens` drops."""
    t = tokens[tokens.examined]
    if t.empty:
        return math.nan
    return float((1.0 - t.groupby(["prompt", "position", "depth"]).p.sum()).clip(lower=0.0).mean())


def dyspec_claims(tokens: pd.DataFrame, label: str, strong: float = 0.5, alpha: float = 0.05, rise_bins: int = 5,
                  min_count: int = 30, n_resamples: int = 2000, **details: Any) -> list[dict[str, Any]]:
    """DySpec §3 on the examined tokens as given (`acceptance_report` passes `predicted_tokens`). Acceptance rises
    with draft probability: "as draft probability grows larger, predicted tokens are more likely to be accepted"
    (s2 l.76) read as a rise at every step across `rise_bins` equal-width draft-probability bins, the figure's
    columns grouped (`rise_rule`, each step's (1 − alpha) interval; ours: the paper gives no number, and ρ > 0 on
    thousands of tokens could hardly fail). Draft and target probabilities strongly correlated: the 95% interval
    of Spearman ρ ≥ strong (our bar; the paper states no coefficient). Bootstrap intervals over prompts, at least
    MIN_PROMPTS prompts and min_count tokens (per bin for the rise)."""
    t = tokens[tokens.examined]
    rho_a, p_a = spearman(t.p, t.accept)
    rho_t, p_t = spearman(t.p, t.target_prob)
    rises, by_bin = rise_rule(t.p, t.accept, t.prompt, np.linspace(0.0, 1.0, rise_bins + 1), "acceptance",
                              min_count=min_count, level=1 - alpha, n_resamples=n_resamples)
    corr = spearman_rule(t.p, t.target_prob, t.prompt, strong, "Spearman ρ(p, target p)", min_count=min_count,
                         n_resamples=n_resamples)
    n, g = len(t), t.prompt.nunique()
    off = "" if label != "greedy" else f"the draft read at T = 1 (the paper samples it at {DYSPEC_DRAFT_T:g})"
    means = " → ".join(f"{r['mean']:.2f}" for r in by_bin) or "no bin with enough tokens"
    return [claim(f"DySpec Fig. 2 left ({label}): acceptance rises with draft probability",
                  "\"Predicted tokens of higher draft probability statistically have a higher acceptance rate\" "
                  "(Hypothesis 1, s2 l.43); \"As draft probability grows larger, predicted tokens are more likely "
                  "to be accepted\" (Fig. 2 left, l.76)",
                  f"mean acceptance by draft probability {means} (bins of {1 / rise_bins:g}; weakest step "
                  f"{step_text(rises, 1 - alpha)}); Spearman ρ {rho_a:.3f}; {n} tokens of {g} prompts", rises,
                  goal=f"mean acceptance rises at every step across {rise_bins} equal-width draft-probability bins "
                       "(ours: the paper's 'more likely' as draft probability grows, no number given)",
                  key="dyspec-fig2-acceptance", off_point=off, rho=rho_a, p_value=p_a, by_bin=by_bin, tokens=n,
                  prompts=g, **details),
            claim(f"DySpec Fig. 2 right ({label}): draft and target probabilities strongly correlated",
                  "\"the draft distribution shows a strong correlation with the target distribution\" "
                  "(Fig. 2 right, s2 l.76; no coefficient given)",
                  f"Spearman ρ(p, target p) = {rho_t:.3f} (95% CI over prompts {corr.low:.3f}–{corr.high:.3f}; "
                  f"{n} tokens of {g} prompts)", corr,
                  goal=f"Spearman ρ ≥ {strong:g} (our bar for 'strong')",
                  key="dyspec-fig2-correlated", off_point=off, rho=rho_t, p_value=p_t, tokens=n, prompts=g,
                  **details)]


def acceptance_report(tables: dict[str, pd.DataFrame], draws: int = DRAWS, seed: int = 0
                      ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """DySpec claims for each named token table on its drawn tokens (`predicted_tokens(table, draws, seed)`: the
    population the paper plots), and Spearman ρ per table: {name: {accept, target_prob}}. Each claim's details
    keep the draws, the share of draws dropped (unlogged) and ρ over the logged top tokens at equal weight
    (the population counted before issue 47)."""
    claims, rhos = [], {}
    for name, t in tables.items():
        logged = t[t.examined]
        rises, corr = dyspec_claims(predicted_tokens(t, draws, seed), name, draws=draws, seed=seed,
                                    unlogged_mass=unlogged_mass(t),
                                    rho_logged_equal_weight={"accept": spearman(logged.p, logged.accept)[0],
                                                             "target_prob": spearman(logged.p, logged.target_prob)[0]})
        claims += [rises, corr]
        rhos[name] = {"accept": rises["details"]["rho"], "target_prob": corr["details"]["rho"]}
    return claims, rhos
