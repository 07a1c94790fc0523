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
Every claim is built by `spectree.analysis.claims.claim` from one of its rules (verdict, rule, n, details).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from spectree.analysis.claims import all_of, bootstrap_rule, claim, correlation_rule, interval_rule, mean_rule
from spectree.analysis.claims import jsonable  # noqa: F401  (re-exported: the notebooks' summaries use it)

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
               min_count: int = 30) -> list[dict[str, Any]]:
    """C2T §3: top-1 under-estimated at high entropy (acceptance > p), over-estimated at low entropy (p >
    acceptance); each judged by the 95% t interval of the mean of accept − p over at least min_count tokens."""
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
        ev = mean_rule(t.accept - t.p, 0.0, "mean(acceptance − p) of the top-1 tokens", above=positive,
                       min_n=min_count)
        ours = (f"acceptance − p = {b['accept_minus_p']:+.3f} (95% CI {ev.low:+.3f} to {ev.high:+.3f}; acceptance "
                f"{b['accept']:.3f}, p {b['mean_p']:.3f}, {b['count']} top-1 tokens)")
        out.append(claim(name, text, ours, ev, **b, top1_by_entropy_bin=by_bin))
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


def ece_interval(confidence: Any, accept: Any, n_bins: int = 10, n_resamples: int = 1000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the ECE (tokens resampled with replacement; scipy bootstrap, seeded)."""
    conf, acc = np.asarray(confidence, dtype=float), np.asarray(accept, dtype=float)
    n = len(conf)
    if n == 0:
        return math.nan, math.nan
    bins = np.clip((conf * n_bins).astype(int), 0, n_bins - 1).astype(float)

    def resampled_ece(gap: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        """ECE = (1/N) Σ_b |Σ_{i in b} (acc_i − conf_i)| of every resample (rows of the leading axes)."""
        shape, rows = gap.shape[:-1], int(np.prod(gap.shape[:-1]))
        keys = (np.arange(rows)[:, None] * n_bins + b.reshape(rows, n).astype(int)).ravel()
        sums = np.bincount(keys, gap.reshape(rows, n).ravel(), rows * n_bins).reshape(rows, n_bins)
        return (np.abs(sums).sum(1) / n).reshape(shape)

    res = stats.bootstrap((acc - conf, bins), resampled_ece, paired=True, vectorized=True, axis=-1,
                          confidence_level=level, n_resamples=n_resamples, batch=max(1, 2_000_000 // n),
                          method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def calibration_stats(confidence: Any, accept: Any, n_bins: int = 10, n_resamples: int = 1000) -> dict[str, Any]:
    """ECE, its 95% bootstrap interval and the token count."""
    lo, hi = ece_interval(confidence, accept, n_bins, n_resamples)
    return {"ece": ece(confidence, accept, n_bins), "ci_low": lo, "ci_high": hi, "tokens": len(np.asarray(confidence))}


def calibration_claim(name: str, paper: str, st: dict[str, Any], tolerance: float = 0.05,
                      paper_ece: Optional[float] = None, min_count: int = 100) -> dict[str, Any]:
    """'well calibrated' from calibration_stats: holds if the whole 95% bootstrap interval of the ECE is ≤
    tolerance, does not hold if it is all above; inconclusive otherwise or below min_count tokens (the ECE of
    a few tokens is biased upwards)."""
    lo, hi, n = st["ci_low"], st["ci_high"], st["tokens"]
    ev = interval_rule(st["ece"], lo, hi, tolerance, n, "the ECE", above=False, min_n=min_count, unit="tokens",
                       method="95% bootstrap")
    extra = {} if paper_ece is None else {"paper_ece": paper_ece, "paper_ece_in_interval": bool(lo <= paper_ece <= hi)}
    return claim(name, paper, f"ECE {st['ece']:.3f} (95% CI {lo:.3f}–{hi:.3f}, {n} tokens)", ev, **st,
                 tolerance=tolerance, **extra)


def calibration_diagrams(tokens: pd.DataFrame, n_bins: int = 10, classifier: Optional[np.ndarray] = None,
                         classifier_name: str = "", n_resamples: int = 1000, tolerance: float = 0.05
                         ) -> tuple[list[dict[str, Any]], list[str]]:
    """EDD Fig. 3b (confidence vs acceptance up to the first rejection), joint probability P vs path
    acceptance on the rank-0 chain (PCT's p_j ≈ ∏ c_i) and, given its output per token row, C2T's
    classifier vs acceptance. Returns (diagrams {title, xlabel, table, stats, claim?}, notes)."""
    cal, chain = calibration_tokens(tokens), tokens[tokens.chain]
    specs = [("draft confidence (max probability)", "draft confidence", cal.confidence, cal.accept,
              ("EDD Fig. 3b: draft confidence is calibrated with acceptance",
               "ECE 0.019 (EDD + LLaMA2-Chat 13B, MT-bench, chain of 10)", 0.019))]
    notes = []
    if len(chain) and chain.depth.max() > 1:
        specs.append(("joint probability P (rank-0 chain)", "joint probability P = ∏ confidence", chain.joint,
                      chain.accept, ("PCT: path acceptance ≈ product of confidences",
                                     "p_j ≈ ∏ c_i (PCT's assumption; no ECE reported)", None)))
    else:
        notes.append("joint P vs path acceptance needs the greedy logbook's chains (temperature 0): skipped")
    if classifier is not None:
        specs.append((f"C2T classifier {classifier_name}", "classifier output F(P, H, d)", classifier,
                      tokens.accept, None))
    diagrams = []
    for title, xlabel, conf, acc, claim_spec in specs:
        d = {"title": title, "xlabel": xlabel, "table": reliability_table(conf, acc, n_bins),
             "stats": calibration_stats(conf, acc, n_bins, n_resamples)}
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


def dyspec_claims(tokens: pd.DataFrame, label: str, strong: float = 0.5, alpha: float = 0.01,
                  min_count: int = 30) -> list[dict[str, Any]]:
    """DySpec §3 on the examined tokens: acceptance rises with draft probability (the (1 − alpha) interval of
    Spearman ρ above 0) and draft and target probabilities are strongly correlated (the 95% interval of ρ ≥
    strong); Fisher-z intervals of ρ, at least min_count tokens."""
    t = tokens[tokens.examined]
    rho_a, p_a = spearman(t.p, t.accept)
    rho_t, p_t = spearman(t.p, t.target_prob)
    rises = correlation_rule(t.p, t.accept, 0.0, "Spearman ρ(p, acceptance)", strict=True, min_n=min_count,
                             level=1 - alpha)
    corr = correlation_rule(t.p, t.target_prob, strong, "Spearman ρ(p, target p)", min_n=min_count)
    n = len(t)
    return [claim(f"DySpec Fig. 2 left ({label}): acceptance rises with draft probability",
                  "Hypothesis 1: tokens of higher draft probability have a higher acceptance rate",
                  f"Spearman ρ(p, acceptance) = {rho_a:.3f} (p-value {p_a:.1e}, {n} tokens)", rises,
                  rho=rho_a, p_value=p_a, tokens=n),
            claim(f"DySpec Fig. 2 right ({label}): draft and target probabilities strongly correlated",
                  "draft distribution strongly correlated with the target distribution",
                  f"Spearman ρ(p, target p) = {rho_t:.3f} (95% CI {corr.low:.3f}–{corr.high:.3f}, {n} tokens)", corr,
                  rho=rho_t, p_value=p_t, tokens=n)]


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


def crossover_entropy(rates: pd.DataFrame, min_count: int = 20) -> Optional[float]:
    """The entropy where mismatch becomes likelier than match: over bins with ≥ min_count tokens, in order,
    the first whose match rate is below 0.5 — interpolated linearly between its centre and the previous
    bin's; that bin's lower edge when it is the first populated bin; None when no bin falls below 0.5."""
    r = rates[rates["count"] >= min_count]
    centres, rate = ((r.lo + r.hi) / 2).to_numpy(), r.match_rate.to_numpy()
    below = np.flatnonzero(rate < 0.5)
    if len(below) == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(r.lo.iloc[0])
    c0, c1, r0, r1 = centres[i - 1], centres[i], rate[i - 1], rate[i]
    return float(c0 + (r0 - 0.5) / (r0 - r1) * (c1 - c0))


def _crossover_of(edges: np.ndarray, min_count: int) -> Callable[[np.ndarray, np.ndarray], float]:
    """crossover_entropy of a token sample as a number for the bootstrap: the last edge when match stays
    likelier in every bin, NaN without a populated bin."""
    def statistic(entropy: np.ndarray, match: np.ndarray) -> float:
        rates = match_rate_by_entropy(entropy, match, edges)
        if not (rates["count"] >= min_count).any():
            return math.nan
        cross = crossover_entropy(rates, min_count)
        return float(edges[-1]) if cross is None else cross
    return statistic


def gunjur_claims(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float], paper_cutoff: float = 1.0,
                  tolerance: float = 0.5, min_count: int = 20, alpha: float = 0.01, n_resamples: int = 1000
                  ) -> list[dict[str, Any]]:
    """Gunjur et al. §3: mismatch becomes likelier than match above entropy ≈ 1 (the 95% bootstrap interval of
    the crossover over tokens within paper_cutoff ± tolerance; "never" counts as the last bin edge), and the
    mismatch probability grows with entropy (the (1 − alpha) Fisher-z interval of Spearman ρ above 0)."""
    n = len(top1)
    populated = int((rates["count"] >= min_count).sum())
    edges = np.r_[rates.lo.to_numpy(), rates.hi.iloc[-1]] if len(rates) else np.asarray(MATCH_EDGES)
    what = "the crossover entropy"
    low = bootstrap_rule([top1.entropy, top1.accept], _crossover_of(edges, min_count), paper_cutoff - tolerance,
                         what, min_n=min_count, unit="tokens", n_resamples=n_resamples, vectorized=False)
    high = interval_rule(low.estimate, low.low, low.high, paper_cutoff + tolerance, n, what, above=False,
                         min_n=min_count, unit="tokens", method="95% bootstrap")
    cross = all_of([low, high], f"95% bootstrap interval of {what} within {paper_cutoff:g} ± {tolerance:g} nats "
                                f"(never crossing counts as {edges[-1]:g}), n ≥ {min_count} tokens")
    grows = correlation_rule(top1.entropy, 1.0 - top1.accept, 0.0, "Spearman ρ(entropy, mismatch)", strict=True,
                             min_n=min_count, level=1 - alpha)
    rho, pv = spearman(top1.entropy, 1.0 - top1.accept)
    cross_text = (f"none: no entropy bin with ≥ {min_count} tokens" if populated == 0 else
                  "never: match likelier in every bin" if crossover is None else f"{crossover:.2f} nats")
    return [claim("Gunjur Fig. 1: mismatch likelier than match above entropy ≈ 1",
                  f"crossover at entropy {paper_cutoff:g} (the simple cutoff)",
                  f"crossover {cross_text} (95% CI {low.low:.2f}–{low.high:.2f}; {n} top-1 tokens)", cross,
                  crossover=crossover, paper_cutoff=paper_cutoff, tolerance=tolerance, populated_bins=populated,
                  tokens=n, overall_match_rate=float(top1.accept.mean()) if n else math.nan),
            claim("Gunjur Fig. 1: mismatch probability grows with entropy",
                  "mismatch probability of a drafted token increases with its entropy",
                  f"Spearman ρ(entropy, mismatch) = {rho:.3f} (p-value {pv:.1e}, {n} tokens)", grows, rho=rho,
                  p_value=pv, tokens=n)]


def acceptance_report(tables: dict[str, pd.DataFrame]) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """DySpec claims for each named token table, and Spearman ρ per table: {name: {accept, target_prob}}."""
    claims, rhos = [], {}
    for name, t in tables.items():
        rises, corr = dyspec_claims(t, name)
        claims += [rises, corr]
        rhos[name] = {"accept": rises["details"]["rho"], "target_prob": corr["details"]["rho"]}
    return claims, rhos

