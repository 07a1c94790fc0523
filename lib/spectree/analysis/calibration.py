"""EDD Fig. 3b: draft confidence against acceptance — reliability table, ECE and its bootstrap interval over
prompts, and the calibration claims (numpy / pandas only).

The token table is `token_tables.logbook_tokens`' (one row per draft token; columns in `analysis.stats`).
Every interval resamples PROMPTS with all their tokens (`rules.cluster_interval`).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from spectree.claims.claims import MIN_PROMPTS, claim, halves_of, prompt_interval_rule
from spectree.claims.rules import cluster_interval, prompt_codes, prompt_sums
from spectree.strategies.pct import PCT, expands, keeps_leaf
from spectree.claims.names import paper_kind, sd_st


EDD_13B_RATIO = 1.4 / 50.1  # s_d/s_t of EDD + LLaMA2-Chat 13B, Fig. 3b's pair (s3 l.1388)
PCT_LEAF_MIN = PCT.leaf_min  # PCT removes leaves whose P is below 0.01 (s3 l.1388)


def calibration_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """EDD Fig. 3b's tokens: the rank-0 chain counted up to and including its first rejection."""
    return tokens[tokens.examined & tokens.chain]


def pct_chain_tokens(tokens: pd.DataFrame, ratio: float = EDD_13B_RATIO, leaf_min: float = PCT_LEAF_MIN
                     ) -> pd.DataFrame:
    """The rank-0 chain tokens PCT drafts and keeps, whether or not an earlier token was rejected: a node is
    expanded while its P = ∏ c_i ≥ s_d/s_t (s3 l.395, l.403), so a chain token is drafted when its parent's P
    (its own P ÷ its probability; the root's is 1) reaches `ratio`, and kept when its own P ≥ `leaf_min` (a chain
    token below it is a leaf, since leaf_min < ratio): PCT's own rules, `pct.expands` and `pct.keeps_leaf`. Both
    cuts read the prediction, never the acceptance, so P stays comparable with the path's acceptance (every token of
    the path accepted): p_j is the chance, before verification, that d_j and all before it are accepted (s3 l.395)."""
    chain = tokens[tokens.chain]
    parent = np.where(chain.depth > 1, chain.joint / chain.p, 1.0)
    return chain[expands(parent, ratio) & keeps_leaf(chain.joint.to_numpy(), leaf_min)]


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
                 level: float = 0.95, seed: int = 0) -> tuple[float, float, list[float]]:
    """Percentile interval of the ECE bootstrapped over prompts (seeded; `rules.cluster_interval`): every
    resample pools the drawn prompts' tokens into the bins, ECE = Σ_b |Σ_{i in b} (acc_i − conf_i)| / N; and the
    ECE of each half of the prompts (`claims.halves_of`, [] under two prompts)."""
    conf, acc = np.asarray(confidence, dtype=float), np.asarray(accept, dtype=float)
    codes, g = prompt_codes(prompt)
    bins = np.clip((conf * n_bins).astype(int), 0, n_bins - 1)
    gap, count = prompt_sums(codes, g, acc - conf, bins, n_bins), prompt_sums(codes, g)

    def statistic(w: np.ndarray) -> np.ndarray:
        return np.abs(w @ gap).sum(-1) / (w @ count)
    _, lo, hi = cluster_interval(statistic, g, level, n_resamples, seed)
    weights = np.zeros((2, g))
    for row, units in enumerate(halves_of(g)):
        weights[row, units] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        halves = [float(v) for v in statistic(weights)] if g >= 2 else []
    return lo, hi, halves


def calibration_stats(confidence: Any, accept: Any, prompt: Any, n_bins: int = 10, n_resamples: int = 1000
                      ) -> dict[str, Any]:
    """ECE, its 95% bootstrap interval over prompts, the ECE of each half of the prompts, and the token and prompt
    counts."""
    lo, hi, halves = ece_interval(confidence, accept, prompt, n_bins, n_resamples)
    return {"ece": ece(confidence, accept, n_bins), "ci_low": lo, "ci_high": hi, "halves": halves,
            "tokens": len(np.asarray(confidence)), "prompts": prompt_codes(prompt)[1]}


def calibration_claim(name: str, paper: str, st: dict[str, Any], tolerance: float = 0.05,
                      paper_ece: Optional[float] = None, min_count: int = 100, min_prompts: int = MIN_PROMPTS,
                      key: str = "") -> dict[str, Any]:
    """'well calibrated' from calibration_stats: holds if the whole 95% bootstrap interval over prompts of the
    ECE is ≤ tolerance, does not hold if it is all above; inconclusive otherwise, below min_prompts prompts or
    below min_count tokens (the ECE of a few tokens is biased upwards)."""
    lo, hi, n, g = st["ci_low"], st["ci_high"], st["tokens"], st["prompts"]
    ev = prompt_interval_rule(st["ece"], lo, hi, tolerance, g, "the ECE", above=False, min_n=min_prompts,
                              tokens=n, min_tokens=min_count, halves=st.get("halves") or ())
    extra = {} if paper_ece is None else {"paper_ece": paper_ece, "paper_ece_in_interval": bool(lo <= paper_ece <= hi)}
    return claim(name, paper, f"ECE {st['ece']:.3f} (95% CI over prompts {lo:.3f}–{hi:.3f}, {n} tokens of {g} "
                 f"prompts)", ev, goal=f"ECE ≤ {tolerance:g} (our bar)", key=key, **st, tolerance=tolerance, **extra)


def calibration_diagrams(tokens: pd.DataFrame, n_bins: int = 10, classifier: Optional[np.ndarray] = None,
                         classifier_name: str = "", n_resamples: int = 1000, tolerance: float = 0.05,
                         pct_ratio: float = EDD_13B_RATIO) -> tuple[list[dict[str, Any]], list[str]]:
    """EDD Fig. 3b (confidence vs acceptance up to the first rejection, the footnote's population, s3 l.397);
    PCT's p_j ≈ ∏ c_i: joint probability P vs path acceptance on the rank-0 chain tokens PCT drafts at
    s_d/s_t = `pct_ratio` (`pct_chain_tokens`; the claim), on every chain token (rejected or not) and on the
    footnote's population (both without a verdict); and, given its output per token row, C2T's classifier vs
    acceptance. Returns (diagrams {title, xlabel, table, stats, claim?}, notes).

    The footnote's population conditions on every earlier token being accepted, so a token's path acceptance
    there is its own acceptance a_j, not ∏ a_i: a perfectly calibrated independent draft reads as under-confident
    (tests/analysis/test_calibration.py). Every chain token instead counts the many deep tokens PCT never drafts
    (P ≈ 0, acceptance 0), which pull the ECE towards 0."""
    cal, chain = calibration_tokens(tokens), tokens[tokens.chain]
    specs = [("draft confidence (max probability)", "draft confidence", cal.confidence, cal.accept, cal.prompt,
              ("EDD Fig. 3b: draft confidence is calibrated with acceptance",
               "ECE 0.019 (Fig. 3b; EDD + LLaMA2-Chat 13B, MT-bench, chains of 10)", 0.019,
               "edd-fig3b-calibrated"))]
    notes = []
    if len(chain) and chain.depth.max() > 1:
        pct = pct_chain_tokens(tokens, pct_ratio)
        path = "joint probability P = ∏ confidence"
        named = sd_st(paper_kind(pct_ratio) or "one-token", pct_ratio)
        specs += [(f"joint P, chain tokens PCT drafts ({named}; verdict)", path, pct.joint,
                   pct.accept, pct.prompt, ("PCT: path acceptance ≈ product of confidences",
                                            "“p_j ≈ ∏_{i=1}^j c_i” (§3.2; no ECE reported)", None,
                                            "edd-pct-path")),
                  ("joint P, every chain token", path, chain.joint, chain.accept, chain.prompt, None),
                  ("joint P, up to the first rejection (conditional)", path, cal.joint, cal.accept, cal.prompt, None)]
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
            d["claim"] = calibration_claim(*claim_spec[:2], d["stats"], tolerance, claim_spec[2], key=claim_spec[3])
        diagrams.append(d)
    return diagrams, notes
