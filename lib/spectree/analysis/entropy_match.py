"""Gunjur et al. Fig. 1: entropy of matched vs mismatched draft tokens, the crossover entropy where mismatch
becomes likelier than match, and its claims (numpy / pandas only).

The paper decodes at T = 0.4 (s1 l.123): the draft samples its token from its distribution at T, the target
samples one at T and the token matches when the two are equal (Alg. 1, l.97–99). `drawn_tokens` gives one row
per drafted position: an entropy (nats) — of the draft's raw distribution softmax(logits), Gunjur's "logit
entropy", or of the distribution at T the token is drawn from (`ENTROPY_OF`, `entropy_label`) — and the
probability that the token matches — at T = 0 the greedy draw's 0/1 match. The token tables are `token_tables.token_table`'s (columns
in `analysis.stats`). Every interval resamples PROMPTS with all their tokens (`claims.cluster_rule`).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from spectree.claims.claims import MIN_PROMPTS, all_of, claim, cluster_rule, not_testable, prompt_interval_rule
from spectree.claims.rules import prompt_codes, prompt_sums
from spectree.analysis.stats import rise_rule, spearman, step_text, uniform_bin
from spectree.core.errors import SpectreeError

CROSSOVER_OF_THE_PAIR = ("where mismatch overtakes match (≈ 1 nat) is a property of the paper's pair, GPT-2 drafting for "
                         "GPT-2-large at T = 0.4 (§3.1, Fig. 1): another pair crosses where its own entropies do, so "
                         "this pair's crossover is a reading of the pair, shown beside, not a test of the claim; the "
                         "claim's shape (mismatch grows with entropy) is judged in the next row")

MATCH_EDGES = tuple(np.round(np.arange(0.0, 11.0 + 1e-9, 0.25), 2))  # Gunjur Fig. 1 histogram bins (nats)


def top1_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """The draft's top-1 token of every examined distribution: Gunjur Fig. 1's tokens when the draft is greedy."""
    return tokens[tokens.examined & (tokens["rank"] == 0)]


# whose entropy Fig. 1 bins, the paper names neither (s1 l.58: "recorded the logits … to calculate their
# respective entropies"): the draft's raw distribution softmax(logits), what B(H) and simple cutoff read live at every
# temperature (`core.drafting.child_candidates`), or the distribution at T the token is drawn from
ENTROPY_OF = {"logits": "entropy_raw", "sampled": "entropy"}


def entropy_label(entropy_of: str, temperature: float) -> str:
    """The axis label of the entropy `drawn_tokens(…, temperature, entropy_of)` bins: the draft's raw distribution
    softmax(logits) (T = 1, Gunjur's "logit entropy", s1 l.24, l.58) or the distribution at T the token is drawn
    from; at T = 0 (and T = 1) the two are one."""
    if entropy_of not in ENTROPY_OF:
        raise SpectreeError(f"entropy_of must be one of {sorted(ENTROPY_OF)}, got {entropy_of!r}")
    if temperature in (0, 1):
        return "entropy of the draft distribution drafted from (softmax of the logits; full vocabulary, nats)"
    if entropy_of == "logits":
        return (f"entropy of the draft's logits, softmax at T = 1 (the token is drawn at T = {temperature:g}; "
                "full vocabulary, nats)")
    return f"entropy of the distribution drafted from, at T = {temperature:g} (full vocabulary, nats)"


def drawn_tokens(tokens: pd.DataFrame, temperature: float, entropy_of: str = "logits") -> pd.DataFrame:
    """Gunjur Fig. 1's population: one row per examined draft position (prompt, position, depth, entropy, accept),
    `accept` the probability that the drafted token matches the target's. T = 0: the top-1 token, matched 0/1
    (`top1_tokens`), its entropy the raw distribution's. T > 0 (`token_tables.temperature_tokens`: the top tokens x
    of the draft's distribution D at T, p = D(x), target_prob = the target's T(x) at T): the draft draws x with
    probability D(x) and the target's own draw equals it with probability T(x), so the match probability is
    Σ D(x)·T(x) / Σ D(x) over the table's tokens (renormalised to the drawn token being among them); `entropy` is
    the raw distribution's (`entropy_of="logits"`) or D's at T ("sampled", `ENTROPY_OF`). DySpec's min(1, T/D) is
    not Gunjur's match."""
    if entropy_of not in ENTROPY_OF:
        raise SpectreeError(f"entropy_of must be one of {sorted(ENTROPY_OF)}, got {entropy_of!r}")
    if temperature == 0:
        return top1_tokens(tokens)[["prompt", "position", "depth", "entropy", "accept"]].reset_index(drop=True)
    t = tokens[tokens.examined].assign(matched=lambda d: d.p * d.target_prob)
    g = t.groupby(["prompt", "position", "depth"], sort=True)
    out = g.agg(entropy=(ENTROPY_OF[entropy_of], "first"), mass=("p", "sum"), matched=("matched", "sum")).reset_index()
    return out.assign(accept=out.matched / out.mass)[["prompt", "position", "depth", "entropy", "accept"]]


# --- Gunjur et al. Fig. 1: matched vs mismatched entropy ----------------------------------------------------

def match_rate_by_entropy(entropy: Any, match: Any, edges: Sequence[float] = MATCH_EDGES) -> pd.DataFrame:
    """Per entropy bin (finite edges, left-closed, outside values clipped): count, matched and mismatched
    (sums of the match weights in [0, 1] and their complements) and match_rate."""
    e = np.asarray(edges, dtype=float)
    b = uniform_bin(np.asarray(entropy, dtype=float), e)
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


def entropy_quantiles(entropy: Any, bins: int = 5) -> np.ndarray:
    """Edges of `bins` entropy bins of equal token count (quantiles; tied edges merged), for `stats.rise_rule`."""
    h = np.asarray(entropy, dtype=float)
    h = h[np.isfinite(h)]
    return np.unique(np.quantile(h, np.linspace(0.0, 1.0, bins + 1))) if len(h) else np.asarray([0.0, 1.0])


def gunjur_claims(drawn: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float], paper_cutoff: float = 1.0,
                  tolerance: float = 0.5, min_count: int = 20, alpha: float = 0.05, n_resamples: int = 2000,
                  rise_bins: int = 5) -> list[dict[str, Any]]:
    """Gunjur et al. §3.1 (s1 l.58–60): mismatch becomes likelier than match above entropy ≈ 1 (the 95% bootstrap
    interval over prompts of the crossover, recomputed from the drawn prompts' pooled bins, within paper_cutoff ±
    tolerance; "never" counts as the last bin edge), and "the mismatch probability … increases with entropy" (l.58):
    the mismatch rate rises at every step across `rise_bins` entropy bins of equal token count (`stats.rise_rule`,
    each step's (1 − alpha) interval; ours: the paper gives no bins, and ρ > 0 on thousands of tokens could hardly
    fail); at least MIN_PROMPTS prompts and min_count tokens (per bin for the rise). `drawn`: `drawn_tokens`' rows
    (a match probability per drafted position)."""
    n = len(drawn)
    populated = int((rates["count"] >= min_count).sum())
    edges = np.r_[rates.lo.to_numpy(), rates.hi.iloc[-1]] if len(rates) else np.asarray(MATCH_EDGES)
    codes, g = prompt_codes(drawn.prompt)
    bins, nb = uniform_bin(drawn.entropy.to_numpy(dtype=float), edges), len(edges) - 1
    count, matched = prompt_sums(codes, g, None, bins, nb), prompt_sums(codes, g, drawn.accept, bins, nb)

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
    grows, by_bin = rise_rule(drawn.entropy, 1.0 - drawn.accept, drawn.prompt,
                              entropy_quantiles(drawn.entropy, rise_bins), "mismatch", min_count=min_count,
                              level=1 - alpha, n_resamples=n_resamples)
    rho, pv = spearman(drawn.entropy, 1.0 - drawn.accept)
    cross_text = (f"none: no entropy bin with ≥ {min_count} tokens" if populated == 0 else
                  "never: match likelier in every bin" if crossover is None else f"{crossover:.2f} nats")
    return [claim("Gunjur Fig. 1: mismatch likelier than match above entropy ≈ 1",
                  "“If the probability of mismatch is higher than the probability of a match (corresponding to "
                  "entropies higher than 1), we return early” (§3.1; T = 0.4; GPT-2 → GPT-2-large)",
                  f"crossover {cross_text} (95% CI over prompts {lo:.2f}–{hi:.2f}; {n} drafted tokens of {g} prompts): "
                  f"a reading of this pair; within {paper_cutoff:g} ± {tolerance:g} nats: {cross.verdict}",
                  not_testable(CROSSOVER_OF_THE_PAIR), key="gunjur-fig1-crossover",
                  goal=f"crossover within {paper_cutoff:g} ± {tolerance:g} nats (our tolerance), shown, not judged",
                  crossover=crossover, paper_cutoff=paper_cutoff, tolerance=tolerance, within_tolerance=cross.verdict,
                  within_rule=cross.rule, crossover_interval=[lo, hi], crossover_prompts=cross.n,
                  populated_bins=populated, tokens=n, prompts=g,
                  overall_match_rate=float(drawn.accept.mean()) if n else math.nan),
            claim("Gunjur Fig. 1: mismatch probability grows with entropy",
                  "“the mismatch probability of a given speculated logit increases with entropy” (§3.1, Fig. 1, "
                  "s1 l.58)",
                  "mismatch rate by entropy "
                  + (", ".join(f"{r['lo']:.2f}–{r['hi']:.2f}: {r['mean']:.2f}" for r in by_bin) or "no bin")
                  + f" nats (weakest step {step_text(grows, 1 - alpha)}); Spearman ρ {rho:.3f}; {n} tokens of {g} "
                  "prompts", grows,
                  goal=f"the mismatch rate rises at every step across {rise_bins} entropy bins of equal token count "
                       "(ours: the paper shows no bins and gives no number)",
                  key="gunjur-fig1-grows", rho=rho, p_value=pv, by_bin=by_bin, tokens=n, prompts=g)]
