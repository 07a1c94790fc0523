"""Resampling prompts: the cluster bootstrap behind the token-table claims of notebooks 04–07.

Draft tokens of one prompt share its text, its positions and its difficulty, so they are not independent, and
an interval that resamples tokens is too narrow. These helpers resample PROMPTS instead (a cluster bootstrap):
each resample draws the prompts with replacement (seeded), and the statistic is recomputed on every token of the
drawn prompts, a prompt drawn twice counting twice. A statistic is therefore a function of the resamples'
prompt multiplicities W (resamples × prompts); it is computed from per-prompt sufficient statistics, so that
thousands of resamples of tens of thousands of tokens take milliseconds: ratios of per-prompt sums (a mean over
tokens; an ECE or match rates over bins pooled across the drawn prompts) and Spearman ρ, exactly that of the
resampled tokens (midranks, ties shared), from per-prompt rank counts. The verdicts are read by
`spectree.claims.claims.cluster_rule`; this module holds numbers only.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]  # prompt multiplicities (resamples, prompts) → (resamples,)


def prompt_codes(prompt: Any) -> tuple[np.ndarray, int]:
    """(code per token in 0..G−1, G): the tokens' prompt labels as consecutive integers."""
    labels = np.asarray(prompt)
    if labels.size == 0:
        return np.zeros(0, dtype=int), 0
    uniques, codes = np.unique(labels, return_inverse=True)
    return codes.reshape(-1), len(uniques)


def prompt_sums(codes: np.ndarray, n_prompts: int, values: Any = None, bins: Any = None, n_bins: int = 0
                ) -> np.ndarray:
    """Per-prompt sums of `values` (token counts without values): shape (G,), or (G, n_bins) given a bin
    index per token."""
    w = None if values is None else np.asarray(values, dtype=float)
    if bins is None:
        return np.bincount(codes, w, n_prompts).astype(float)
    keys = codes * n_bins + np.asarray(bins, dtype=int)
    return np.bincount(keys, w, n_prompts * n_bins).astype(float).reshape(n_prompts, n_bins)


def resample_weights(n_prompts: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    """(n_resamples, G) multiplicities: each row counts how often every prompt is drawn when G prompts are
    drawn with replacement (numpy default_rng(seed), so every interval is reproducible)."""
    return np.random.default_rng(seed).multinomial(n_prompts, np.full(n_prompts, 1.0 / n_prompts), n_resamples)


def ratio_statistic(num: np.ndarray, den: np.ndarray) -> Statistic:
    """Σ num / Σ den over the drawn prompts (num, den: per-prompt sums), e.g. the mean of a token value."""
    return lambda w: (w @ num) / (w @ den)


def _midcounts(x: np.ndarray, codes: np.ndarray, n_prompts: int) -> np.ndarray:
    """C[i, g] = tokens of prompt g below x_i plus half of those equal to it: token i's midrank among the
    resampled tokens is Σ_g W_g C[i, g] + ½ (the ½ does not change a correlation)."""
    out = np.empty((len(x), n_prompts))
    for g in range(n_prompts):
        s = np.sort(x[codes == g])
        out[:, g] = (np.searchsorted(s, x, "left") + np.searchsorted(s, x, "right")) / 2
    return out


def _pearson(n: np.ndarray, mx: np.ndarray, my: np.ndarray, xx: np.ndarray, yy: np.ndarray, xy: np.ndarray
             ) -> np.ndarray:
    """Pearson r from weighted means of x, y, x², y², xy (n: total weight); NaN for a constant x or y."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (xy / n - mx * my / n ** 2) / np.sqrt((xx / n - (mx / n) ** 2) * (yy / n - (my / n) ** 2))
    return np.where(np.isfinite(rho), np.clip(rho, -1.0, 1.0), np.nan)


def _spearman_by_prompt(x: np.ndarray, y: np.ndarray, codes: np.ndarray, n_prompts: int) -> Statistic:
    """Few prompts: a token's midrank in a resample is linear in W (`_midcounts`), so the weighted sums of
    ranks, squares and products are quadratic and cubic forms in W with per-prompt tensors computed once
    (O(N G² + B G³), independent of the token count per resample)."""
    order = np.argsort(codes, kind="stable")
    x, y, codes = x[order], y[order], codes[order]
    cx, cy = _midcounts(x, codes, n_prompts), _midcounts(y, codes, n_prompts)
    starts = np.searchsorted(codes, np.arange(n_prompts + 1))
    segments = [slice(a, b) for a, b in zip(starts[:-1], starts[1:])]
    count = np.diff(starts).astype(float)
    first = np.stack([np.stack([cx[s].sum(0), cy[s].sum(0)]) for s in segments])  # (k, 2, g)
    second = np.stack([np.stack([cx[s].T @ cx[s], cy[s].T @ cy[s], cx[s].T @ cy[s]]) for s in segments])
    second = second.transpose(1, 0, 2, 3).reshape(3, n_prompts, n_prompts * n_prompts)  # (3, k, g·h)

    def statistic(w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        mx, my = (((w @ first[:, i]) * w).sum(1) for i in range(2))  # Σ_k W_k Σ_g W_g Σ_{i in k} C[i, g]
        xx, yy, xy = ((np.einsum("bgh,bh->bg", (w @ s).reshape(-1, n_prompts, n_prompts), w) * w).sum(1)
                      for s in second)
        return _pearson(w @ count, mx, my, xx, yy, xy)
    return statistic


def _spearman_by_token(x: np.ndarray, y: np.ndarray, codes: np.ndarray) -> Statistic:
    """Many prompts: every resample's tokens re-ranked by weight (midrank = weight of the smaller values plus
    half that of the equal ones, on the values sorted once), O(B N), in chunks of about 2M token weights."""
    ranked = []
    for v in (x, y):
        order = np.argsort(v, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(v[order]) != 0])
        group = np.cumsum(np.r_[True, np.diff(v[order]) != 0]) - 1  # tie group of each sorted token
        ranked.append((order, starts, group))

    def ranks(w: np.ndarray, order: np.ndarray, starts: np.ndarray, group: np.ndarray) -> np.ndarray:
        tied = np.add.reduceat(w[:, order], starts, axis=1)
        mid = np.cumsum(tied, axis=1) - tied / 2
        out = np.empty_like(w)
        out[:, order] = mid[:, group]
        return out

    def statistic(w: np.ndarray) -> np.ndarray:
        step = max(1, 2_000_000 // len(codes))
        out = []
        for i in range(0, len(w), step):
            wt = np.asarray(w[i:i + step], dtype=float)[:, codes]  # each token weighted by its prompt's draws
            rx, ry = (ranks(wt, *r) for r in ranked)
            out.append(_pearson(wt.sum(1), (wt * rx).sum(1), (wt * ry).sum(1), (wt * rx * rx).sum(1),
                                (wt * ry * ry).sum(1), (wt * rx * ry).sum(1)))
        return np.concatenate(out)
    return statistic


def spearman_statistic(x: Any, y: Any, codes: np.ndarray, n_prompts: int) -> Statistic:
    """Spearman ρ of (x, y) over each resample's tokens: the Pearson correlation of their midranks among the
    drawn tokens (ties share a rank), as scipy's spearmanr gives on the expanded sample (a test checks it),
    without building that sample: per-prompt rank tensors for few prompts, weighted re-ranking of the tokens
    for many (whichever is cheaper). NaN for a resample with a constant x or y."""
    x, y, codes = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(codes, dtype=int)
    g3, n = n_prompts ** 3, len(codes)
    if n == 0:
        return lambda w: np.full(len(w), np.nan)
    if g3 <= 30 * n and g3 <= 10_000_000 and n * n_prompts <= 10_000_000:  # time and memory of the tensors
        return _spearman_by_prompt(x, y, codes, n_prompts)
    return _spearman_by_token(x, y, codes)


def cluster_interval(statistic: Statistic, n_prompts: int, level: float = 0.95, n_resamples: int = 2000,
                     seed: int = 0, batch: Optional[int] = None) -> tuple[float, float, float]:
    """(estimate, low, high): the statistic on all prompts and the percentile interval of its seeded bootstrap
    over prompts. A resample where the statistic is undefined (NaN) counts against the claim on both sides
    (as −∞ for the low end, +∞ for the high end); when they are more than the interval's tail, the interval
    is NaN (undecided). No prompts: all NaN."""
    if n_prompts < 1:
        return math.nan, math.nan, math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = float(statistic(np.ones((1, n_prompts)))[0])
        w = resample_weights(n_prompts, n_resamples, seed)
        step = batch or 256
        dist = np.concatenate([np.asarray(statistic(w[i:i + step]), dtype=float) for i in range(0, len(w), step)])
    tail = (1 - level) / 2
    missing = np.isnan(dist)
    if missing.mean() > tail:
        return estimate, math.nan, math.nan
    low = float(np.quantile(np.where(missing, -np.inf, dist), tail))
    high = float(np.quantile(np.where(missing, np.inf, dist), 1 - tail))
    return estimate, low, high
