"""Statistics behind the papers' analysis figures, on a table of draft tokens (numpy / scipy / pandas only).

- C2T Fig. 2: entropy bins × rank — mean draft probability, acceptance rate and their difference.
- EDD Fig. 3b: reliability diagram of draft confidence against acceptance, ECE with a bootstrap interval.
- DySpec Fig. 2: acceptance and target probability against draft probability (column-normalised histograms).
- Gunjur et al. Fig. 1: entropy of matched vs mismatched draft tokens and the crossover entropy.

The token table (`token_tables.logbook_tokens`; `token_tables.temperature_tokens` at T > 0) has one row
per draft token: prompt, dataset, position, depth, rank (0 = most likely), token, p (draft probability), joint,
entropy (nats, full vocabulary, of the distribution the token was drawn from), entropy_topm, confidence
(max probability of that distribution), accept (greedy: 1 if the token is on the target's greedy path, else
0; stochastic: min(1, T(x)/D(x))), target_prob, examined (its parent is on the greedy path, so a verifier
would examine it) and chain (it lies on the draft's rank-0 chain from the root).
Every claim is built by `spectree.analysis.claims.claim` from one of its rules (verdict, rule, n, details). Tokens
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

from spectree.analysis.claims import MIN_PROMPTS, Evidence, all_of, claim, cluster_rule, prompt_interval_rule
from spectree.analysis.claims import jsonable  # noqa: F401  (re-exported: the notebooks' summaries use it)
from spectree.analysis.rules import (cluster_interval, prompt_codes, prompt_sums, ratio_statistic,
                                     spearman_statistic)

ENTROPY_EDGES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, math.inf)  # C2T Fig. 2: 0–1, …, 5–6, > 6 (nats)
MATCH_EDGES = tuple(np.round(np.arange(0.0, 11.0 + 1e-9, 0.25), 2))  # Gunjur Fig. 1 histogram bins (nats)


# --- token tables -----------------------------------------------------------------------------------------

def calibration_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """EDD Fig. 3b's tokens: the rank-0 chain counted up to and including its first rejection."""
    return tokens[tokens.examined & tokens.chain]


def top1_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """Gunjur Fig. 1's tokens: the draft's top-1 token of every examined distribution."""
    return tokens[tokens.examined & (tokens["rank"] == 0)]


# --- binning ---------------------------------------------------------------------------------------------

def entropy_bin(entropy: Any, edges: Sequence[float] = ENTROPY_EDGES) -> np.ndarray:
    """Bin index per value; bins are right-closed, [e0, e1], (e1, e2], …, (e_{n-1}, e_n], so with C2T's edges
    an entropy of exactly 1.0 is in "0–1" and the last bin holds entropies strictly above 6."""
    inner = np.asarray(edges[1:-1], dtype=float)
    return np.digitize(np.asarray(entropy, dtype=float), inner, right=True)


def bin_labels(edges: Sequence[float] = ENTROPY_EDGES) -> list[str]:
    """'0–1', '1–2', …, and '> 6' for a last bin without an upper edge."""
    return [f"> {lo:g}" if math.isinf(hi) else f"{lo:g}–{hi:g}" for lo, hi in zip(edges[:-1], edges[1:])]


def _uniform_bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin index per value for finite edges, left-closed, the last bin closed; values outside clipped."""
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)


# --- C2T Fig. 2 ------------------------------------------------------------------------------------------

def cell_table(tokens: pd.DataFrame, edges: Sequence[float] = ENTROPY_EDGES, max_rank: int = 20,
               min_count: int = 30) -> pd.DataFrame:
    """One row per (entropy bin, rank 1..max_rank) over the examined tokens: count, mean draft probability,
    acceptance rate, diff = mean_p − accept, and `masked` where the count is below min_count."""
    t = tokens[tokens.examined & (tokens["rank"] < max_rank)]
    grid = pd.MultiIndex.from_product([range(len(edges) - 1), range(1, max_rank + 1)], names=["bin", "rank"])
    g = (pd.DataFrame({"bin": entropy_bin(t.entropy, edges), "rank": t["rank"].to_numpy() + 1,
                       "p": t.p.to_numpy(), "accept": t.accept.to_numpy()})
         .groupby(["bin", "rank"]).agg(count=("p", "size"), mean_p=("p", "mean"), accept=("accept", "mean"))
         .reindex(grid).reset_index())
    g["count"] = g["count"].fillna(0).astype(int)
    g["diff"] = g.mean_p - g.accept
    g["masked"] = g["count"] < min_count
    g.insert(1, "entropy_bin", [bin_labels(edges)[b] for b in g["bin"]])
    return g


def cell_matrix(cells: pd.DataFrame, value: str, masked: bool = True) -> pd.DataFrame:
    """cell_table as an entropy-bin × rank matrix of one column (masked cells NaN)."""
    data = cells.assign(**{value: cells[value].where(~cells.masked)}) if masked else cells
    order = list(dict.fromkeys(cells.entropy_bin))
    return data.pivot(index="entropy_bin", columns="rank", values=value).loc[order]


def _top1_in(tokens: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    return tokens[tokens.examined & (tokens["rank"] == 0) & (tokens.entropy > lo) & (tokens.entropy <= hi)]


def top1_bias(tokens: pd.DataFrame, lo: float, hi: float) -> dict[str, float]:
    """Top-1 examined tokens with lo < entropy ≤ hi: count, mean p, acceptance, and the mean of accept − p
    with its standard error (scipy sem)."""
    t = _top1_in(tokens, lo, hi)
    d = (t.accept - t.p).to_numpy()
    return {"count": len(d), "mean_p": float(t.p.mean()) if len(d) else math.nan,
            "accept": float(t.accept.mean()) if len(d) else math.nan,
            "accept_minus_p": float(d.mean()) if len(d) else math.nan,
            "se": float(stats.sem(d)) if len(d) > 1 else math.nan}


def c2t_claims(tokens: pd.DataFrame, cells: pd.DataFrame, high_above: float = 3.0, low_upto: float = 1.0,
               min_count: int = 30, n_resamples: int = 2000) -> list[dict[str, Any]]:
    """C2T §3: top-1 under-estimated at high entropy (acceptance > p), over-estimated at low entropy (p >
    acceptance); each judged by the 95% bootstrap interval over prompts of the mean of accept − p over the
    drawn prompts' tokens (Σ (accept − p) / Σ tokens), at least MIN_PROMPTS prompts and min_count tokens."""
    top1 = cells[cells["rank"] == 1].set_index("entropy_bin")[["count", "mean_p", "accept", "diff"]]
    by_bin = {k: {c: None if pd.isna(v) else int(v) if c == "count" else round(float(v), 4) for c, v in row.items()}
              for k, row in top1.iterrows()}
    out = []
    for name, lo, hi, positive, text in (
            ("C2T Fig. 2c: high entropy, top-1 under-estimated", high_above, math.inf, True,
             f"entropy > {high_above:g}: top-1 acceptance above its probability (blue cells)"),
            ("C2T Fig. 2c: low entropy, top-1 over-estimated", -math.inf, low_upto, False,
             f"entropy ≤ {low_upto:g}: top-1 probability above its acceptance (red cells)")):
        b, t = top1_bias(tokens, lo, hi), _top1_in(tokens, lo, hi)
        codes, g = prompt_codes(t.prompt)
        mean = ratio_statistic(prompt_sums(codes, g, t.accept - t.p), prompt_sums(codes, g))
        ev = cluster_rule(mean, g, 0.0, "mean(acceptance − p) of the top-1 tokens", above=positive, strict=True,
                          tokens=len(t), min_tokens=min_count, n_resamples=n_resamples)
        ours = (f"acceptance − p = {b['accept_minus_p']:+.3f} (95% CI over prompts {ev.low:+.3f} to {ev.high:+.3f}; "
                f"acceptance {b['accept']:.3f}, p {b['mean_p']:.3f}, {b['count']} top-1 tokens of {g} prompts)")
        out.append(claim(name, text, ours, ev, **b, prompts=g, top1_by_entropy_bin=by_bin))
    return out


# --- EDD Fig. 3b: calibration ------------------------------------------------------------------------------

def reliability_table(confidence: Any, accept: Any, n_bins: int = 10) -> pd.DataFrame:
    """Equal-width confidence bins on [0, 1] (left-closed, 1.0 in the last): count, mean confidence,
    acceptance rate and gap = accept − confidence per bin."""
    conf, acc = np.asarray(confidence, dtype=float), np.asarray(accept, dtype=float)
    b = np.clip((conf * n_bins).astype(int), 0, n_bins - 1)
    count = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(b, conf, n_bins) / count
        rate = np.bincount(b, acc, n_bins) / count
    lo = np.arange(n_bins) / n_bins
    return pd.DataFrame({"bin": range(n_bins), "lo": lo, "hi": lo + 1 / n_bins, "count": count,
                         "confidence": mean_conf, "accept": rate, "gap": rate - mean_conf})


def ece(confidence: Any, accept: Any, n_bins: int = 10) -> float:
    """Expected calibration error Σ_b (n_b / N) |acceptance_b − confidence_b| (Guo et al. 2017)."""
    t = reliability_table(confidence, accept, n_bins)
    n = t["count"].sum()
    return float((t["count"] * t.gap.abs()).fillna(0).sum() / n) if n else math.nan


def ece_interval(confidence: Any, accept: Any, prompt: Any, n_bins: int = 10, n_resamples: int = 1000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the ECE bootstrapped over prompts (seeded; `rules.cluster_interval`): every
    resample pools the drawn prompts' tokens into the bins, ECE = Σ_b |Σ_{i in b} (acc_i − conf_i)| / N."""
    conf, acc = np.asarray(confidence, dtype=float), np.asarray(accept, dtype=float)
    codes, g = prompt_codes(prompt)
    bins = np.clip((conf * n_bins).astype(int), 0, n_bins - 1)
    gap, count = prompt_sums(codes, g, acc - conf, bins, n_bins), prompt_sums(codes, g)
    _, lo, hi = cluster_interval(lambda w: np.abs(w @ gap).sum(-1) / (w @ count), g, level, n_resamples, seed)
    return lo, hi


def calibration_stats(confidence: Any, accept: Any, prompt: Any, n_bins: int = 10, n_resamples: int = 1000
                      ) -> dict[str, Any]:
    """ECE, its 95% bootstrap interval over prompts, and the token and prompt counts."""
    lo, hi = ece_interval(confidence, accept, prompt, n_bins, n_resamples)
    return {"ece": ece(confidence, accept, n_bins), "ci_low": lo, "ci_high": hi,
            "tokens": len(np.asarray(confidence)), "prompts": prompt_codes(prompt)[1]}


def calibration_claim(name: str, paper: str, st: dict[str, Any], tolerance: float = 0.05,
                      paper_ece: Optional[float] = None, min_count: int = 100, min_prompts: int = MIN_PROMPTS
                      ) -> dict[str, Any]:
    """'well calibrated' from calibration_stats: holds if the whole 95% bootstrap interval over prompts of the
    ECE is ≤ tolerance, does not hold if it is all above; inconclusive otherwise, below min_prompts prompts or
    below min_count tokens (the ECE of a few tokens is biased upwards)."""
    lo, hi, n, g = st["ci_low"], st["ci_high"], st["tokens"], st["prompts"]
    ev = prompt_interval_rule(st["ece"], lo, hi, tolerance, g, "the ECE", above=False, min_n=min_prompts,
                              tokens=n, min_tokens=min_count)
    extra = {} if paper_ece is None else {"paper_ece": paper_ece, "paper_ece_in_interval": bool(lo <= paper_ece <= hi)}
    return claim(name, paper, f"ECE {st['ece']:.3f} (95% CI over prompts {lo:.3f}–{hi:.3f}, {n} tokens of {g} "
                 f"prompts)", ev, **st, tolerance=tolerance, **extra)


def calibration_diagrams(tokens: pd.DataFrame, n_bins: int = 10, classifier: Optional[np.ndarray] = None,
                         classifier_name: str = "", n_resamples: int = 1000, tolerance: float = 0.05
                         ) -> tuple[list[dict[str, Any]], list[str]]:
    """EDD Fig. 3b (confidence vs acceptance up to the first rejection), joint probability P vs path
    acceptance on the rank-0 chain (PCT's p_j ≈ ∏ c_i) and, given its output per token row, C2T's
    classifier vs acceptance. Returns (diagrams {title, xlabel, table, stats, claim?}, notes)."""
    cal, chain = calibration_tokens(tokens), tokens[tokens.chain]
    specs = [("draft confidence (max probability)", "draft confidence", cal.confidence, cal.accept, cal.prompt,
              ("EDD Fig. 3b: draft confidence is calibrated with acceptance",
               "ECE 0.019 (EDD + LLaMA2-Chat 13B, MT-bench, chain of 10)", 0.019))]
    notes = []
    if len(chain) and chain.depth.max() > 1:
        specs.append(("joint probability P (rank-0 chain)", "joint probability P = ∏ confidence", chain.joint,
                      chain.accept, chain.prompt, ("PCT: path acceptance ≈ product of confidences",
                                                   "p_j ≈ ∏ c_i (PCT's assumption; no ECE reported)", None)))
    else:
        notes.append("joint P vs path acceptance needs the greedy logbook's chains (temperature 0): skipped")
    if classifier is not None:
        specs.append((f"C2T classifier {classifier_name}", "classifier output F(P, H, d)", classifier,
                      tokens.accept, tokens.prompt, None))
    diagrams = []
    for title, xlabel, conf, acc, prompt, claim_spec in specs:
        d = {"title": title, "xlabel": xlabel, "table": reliability_table(conf, acc, n_bins),
             "stats": calibration_stats(conf, acc, prompt, n_bins, n_resamples)}
        if claim_spec:
            d["claim"] = calibration_claim(*claim_spec[:2], d["stats"], tolerance, claim_spec[2])
        diagrams.append(d)
    return diagrams, notes


# --- DySpec Fig. 2: column-normalised histograms -----------------------------------------------------------

def column_normalised_histogram(x: Any, y: Any, x_edges: Sequence[float], y_edges: Sequence[float]
                                ) -> tuple[np.ndarray, np.ndarray]:
    """([n_y, n_x] shares, [n_x] counts): each column (an x bin) sums to 1 over y, NaN where it is empty.
    Bins are left-closed, the last one closed, values outside the edges clipped into the end bins."""
    xe, ye = np.asarray(x_edges, dtype=float), np.asarray(y_edges, dtype=float)
    xb = _uniform_bin(np.asarray(x, dtype=float), xe)
    yb = _uniform_bin(np.asarray(y, dtype=float), ye)
    h = np.zeros((len(ye) - 1, len(xe) - 1))
    np.add.at(h, (yb, xb), 1.0)
    counts = h.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, h / counts, np.nan), counts.astype(int)


def binned_mean(x: Any, y: Any, edges: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(mean of y, count) per x bin (same binning as column_normalised_histogram)."""
    e = np.asarray(edges, dtype=float)
    b = _uniform_bin(np.asarray(x, dtype=float), e)
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


def dyspec_claims(tokens: pd.DataFrame, label: str, strong: float = 0.5, alpha: float = 0.01,
                  min_count: int = 30, n_resamples: int = 2000) -> list[dict[str, Any]]:
    """DySpec §3 on the examined tokens: acceptance rises with draft probability (the (1 − alpha) interval of
    Spearman ρ above 0) and draft and target probabilities are strongly correlated (the 95% interval of ρ ≥
    strong); bootstrap intervals over prompts (`spearman_rule`), at least MIN_PROMPTS prompts and min_count
    tokens."""
    t = tokens[tokens.examined]
    rho_a, p_a = spearman(t.p, t.accept)
    rho_t, p_t = spearman(t.p, t.target_prob)
    rises = spearman_rule(t.p, t.accept, t.prompt, 0.0, "Spearman ρ(p, acceptance)", strict=True,
                          min_count=min_count, level=1 - alpha, n_resamples=n_resamples)
    corr = spearman_rule(t.p, t.target_prob, t.prompt, strong, "Spearman ρ(p, target p)", min_count=min_count,
                         n_resamples=n_resamples)
    n, g = len(t), t.prompt.nunique()
    return [claim(f"DySpec Fig. 2 left ({label}): acceptance rises with draft probability",
                  "Hypothesis 1: tokens of higher draft probability have a higher acceptance rate",
                  f"Spearman ρ(p, acceptance) = {rho_a:.3f} ({1 - alpha:.0%} CI over prompts {rises.low:.3f}–"
                  f"{rises.high:.3f}; {n} tokens of {g} prompts)", rises, rho=rho_a, p_value=p_a, tokens=n, prompts=g),
            claim(f"DySpec Fig. 2 right ({label}): draft and target probabilities strongly correlated",
                  "draft distribution strongly correlated with the target distribution",
                  f"Spearman ρ(p, target p) = {rho_t:.3f} (95% CI over prompts {corr.low:.3f}–{corr.high:.3f}; "
                  f"{n} tokens of {g} prompts)", corr, rho=rho_t, p_value=p_t, tokens=n, prompts=g)]


# --- Gunjur et al. Fig. 1: matched vs mismatched entropy ----------------------------------------------------

def match_rate_by_entropy(entropy: Any, match: Any, edges: Sequence[float] = MATCH_EDGES) -> pd.DataFrame:
    """Per entropy bin (finite edges, left-closed, outside values clipped): count, matched and mismatched
    (sums of the match weights in [0, 1] and their complements) and match_rate."""
    e = np.asarray(edges, dtype=float)
    b = _uniform_bin(np.asarray(entropy, dtype=float), e)
    m = np.asarray(match, dtype=float)
    nb = len(e) - 1
    count = np.bincount(b, minlength=nb)
    matched = np.bincount(b, m, nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = matched / count
    return pd.DataFrame({"lo": e[:-1], "hi": e[1:], "count": count, "matched": matched,
                         "mismatched": count - matched, "match_rate": rate})


def crossovers(lo: np.ndarray, hi: np.ndarray, count: np.ndarray, rate: np.ndarray, min_count: int = 20,
               never: float = math.nan) -> np.ndarray:
    """`crossover_entropy` of every row of per-bin counts and match rates (rows: resamples; bins in order):
    `never` where no populated bin falls below 0.5, NaN where no bin is populated."""
    count, rate = np.atleast_2d(count), np.atleast_2d(rate)
    populated = count >= min_count
    below = populated & (rate < 0.5)
    j = below.argmax(1)  # the first populated bin below one half
    last = np.maximum.accumulate(np.where(populated, np.arange(count.shape[1]), -1), axis=1)
    prev = np.where(j > 0, last[np.arange(len(j)), np.maximum(j - 1, 0)], -1)  # the populated bin before it
    centre = (np.asarray(lo, dtype=float) + np.asarray(hi, dtype=float)) / 2
    c0, c1 = centre[np.maximum(prev, 0)], centre[j]
    rows = np.arange(len(j))
    r0, r1 = rate[rows, np.maximum(prev, 0)], rate[rows, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = np.where(prev < 0, np.asarray(lo, dtype=float)[j], c0 + (r0 - 0.5) / (r0 - r1) * (c1 - c0))
    return np.where(below.any(1), cross, np.where(populated.any(1), never, np.nan))


def crossover_entropy(rates: pd.DataFrame, min_count: int = 20) -> Optional[float]:
    """The entropy where mismatch becomes likelier than match: over bins with ≥ min_count tokens, in order,
    the first whose match rate is below 0.5 — interpolated linearly between its centre and the previous
    bin's; that bin's lower edge when it is the first populated bin; None when no bin falls below 0.5."""
    cross = crossovers(rates.lo.to_numpy(), rates.hi.to_numpy(), rates["count"].to_numpy(),
                       rates.match_rate.to_numpy(), min_count)[0] if len(rates) else math.nan
    return None if math.isnan(cross) else float(cross)


def gunjur_claims(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float], paper_cutoff: float = 1.0,
                  tolerance: float = 0.5, min_count: int = 20, alpha: float = 0.01, n_resamples: int = 2000
                  ) -> list[dict[str, Any]]:
    """Gunjur et al. §3: mismatch becomes likelier than match above entropy ≈ 1 (the 95% bootstrap interval
    over prompts of the crossover, recomputed from the drawn prompts' pooled bins, within paper_cutoff ±
    tolerance; "never" counts as the last bin edge), and the mismatch probability grows with entropy (the
    (1 − alpha) bootstrap interval over prompts of Spearman ρ above 0); at least MIN_PROMPTS prompts and
    min_count tokens."""
    n = len(top1)
    populated = int((rates["count"] >= min_count).sum())
    edges = np.r_[rates.lo.to_numpy(), rates.hi.iloc[-1]] if len(rates) else np.asarray(MATCH_EDGES)
    codes, g = prompt_codes(top1.prompt)
    bins, nb = _uniform_bin(top1.entropy.to_numpy(dtype=float), edges), len(edges) - 1
    count, matched = prompt_sums(codes, g, None, bins, nb), prompt_sums(codes, g, top1.accept, bins, nb)

    def crossover_of(w: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            c = w @ count
            return crossovers(edges[:-1], edges[1:], c, (w @ matched) / c, min_count, float(edges[-1]))
    what = "the crossover entropy"
    low = cluster_rule(crossover_of, g, paper_cutoff - tolerance, what, tokens=n, min_tokens=min_count,
                       n_resamples=n_resamples)
    lo, hi = low.low, low.high
    high = prompt_interval_rule(low.estimate, lo, hi, paper_cutoff + tolerance, g, what, above=False, tokens=n,
                                min_tokens=min_count)
    cross = all_of([low, high], f"95% bootstrap interval over prompts of {what} within {paper_cutoff:g} ± "
                                f"{tolerance:g} nats (never crossing counts as {edges[-1]:g}), n ≥ {MIN_PROMPTS} "
                                f"prompts and ≥ {min_count} tokens")
    cross = replace(cross, low=lo, high=hi)  # both parts read the one interval
    grows = spearman_rule(top1.entropy, 1.0 - top1.accept, top1.prompt, 0.0, "Spearman ρ(entropy, mismatch)",
                          strict=True, min_count=min_count, level=1 - alpha, n_resamples=n_resamples)
    rho, pv = spearman(top1.entropy, 1.0 - top1.accept)
    cross_text = (f"none: no entropy bin with ≥ {min_count} tokens" if populated == 0 else
                  "never: match likelier in every bin" if crossover is None else f"{crossover:.2f} nats")
    return [claim("Gunjur Fig. 1: mismatch likelier than match above entropy ≈ 1",
                  f"crossover at entropy {paper_cutoff:g} (the simple cutoff)",
                  f"crossover {cross_text} (95% CI over prompts {lo:.2f}–{hi:.2f}; {n} top-1 tokens of {g} prompts)",
                  cross, crossover=crossover, paper_cutoff=paper_cutoff, tolerance=tolerance,
                  populated_bins=populated, tokens=n, prompts=g,
                  overall_match_rate=float(top1.accept.mean()) if n else math.nan),
            claim("Gunjur Fig. 1: mismatch probability grows with entropy",
                  "mismatch probability of a drafted token increases with its entropy",
                  f"Spearman ρ(entropy, mismatch) = {rho:.3f} ({1 - alpha:.0%} CI over prompts {grows.low:.3f}–"
                  f"{grows.high:.3f}; {n} tokens of {g} prompts)", grows, rho=rho, p_value=pv, tokens=n, prompts=g)]


def acceptance_report(tables: dict[str, pd.DataFrame]) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """DySpec claims for each named token table, and Spearman ρ per table: {name: {accept, target_prob}}."""
    claims, rhos = [], {}
    for name, t in tables.items():
        rises, corr = dyspec_claims(t, name)
        claims += [rises, corr]
        rhos[name] = {"accept": rises["details"]["rho"], "target_prob": corr["details"]["rho"]}
    return claims, rhos

