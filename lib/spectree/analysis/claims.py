"""Claims: the papers' statements next to ours, judged by stated statistical rules in one vocabulary.

Every notebook's claims are built here: `claim(name, paper, ours, evidence)` takes the `Evidence` of one rule
helper, so every claim carries its verdict (one of VERDICTS), the `rule` that decided it and the sample size `n`
its evidence rests on (tokens, prompts, trees, grid points, timing repeats). The rules share one reading: a claim
holds when the whole interval of its statistic is on the claimed side of the bar, does not hold when the whole
interval is on the other side, and is inconclusive otherwise or below the rule's minimum n. Intervals come from
scipy: Wilson intervals for proportions (`binomtest`), t intervals for means (`ttest_1samp`), percentile
bootstraps paired over prompts (`bootstrap`), Fisher-z intervals for Spearman ρ (`pearsonr` on ranks);
deterministic readings use a stated tolerance as their interval. Statistics of draft tokens (notebooks 04–07)
are bootstrapped over PROMPTS, every drawn prompt with all its tokens (`cluster_rule`, numbers in
`spectree.analysis.rules`), because tokens of one prompt are correlated: their n is the number of prompts.

The replay-sweep claims of notebook 02 (`collect_claims`) compare policies replayed on the same prompts with a
paired bootstrap over the prompts' per-prompt sums (`sweeps.score`'s `by_prompt`); where a paper compares methods
at a matched γ or τ, each method's knob is swept and its curve read at the other's point (`matched_rule`).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np
from scipy import stats

from spectree.analysis.rules import Statistic, cluster_interval

VERDICTS = ("holds", "does not hold", "inconclusive")
HOLDS, FAILS, INCONCLUSIVE = VERDICTS
LOSSLESS = "\"SD can achieve lossless acceleration\" (EDD §4.1, l.521)"  # the papers' premise, the paper column
MIN_PROMPTS = 8  # comparisons resampled over prompts need at least this many
OPS = {(True, False): "≥", (True, True): ">", (False, False): "≤", (False, True): "<"}  # (above, strict)


@dataclass(frozen=True)
class Evidence:
    """The outcome of one rule: verdict, the rule in words, sample size, the estimate and its interval."""
    verdict: str
    rule: str
    n: int
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan


def claim(name: str, paper: str, ours: Any, evidence: Evidence, goal: str = "", **details: Any) -> dict[str, Any]:
    """One reproduced claim: the paper's statement (its own words or number, "—" where the paper states none),
    our `goal` where the bar is ours and not the paper's (e.g. an issue's target, a threshold the paper leaves
    open), ours, and the evidence's verdict, rule, n and interval. A bar of ours (one that opens with ≥ ≤ < >, or
    names an issue) given as the paper's statement is an error: it belongs in `goal`."""
    if evidence.verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {evidence.verdict!r}")
    if paper.lstrip()[:1] in set("≥≤<>") or "issue" in paper.lower():
        raise ValueError(f"claim {name!r}: the paper column holds the paper's statement, not our bar {paper!r}; "
                         "give the bar as goal=")
    return {"name": name, "paper": paper, "goal": goal, "ours": ours, "verdict": evidence.verdict,
            "rule": evidence.rule,
            "n": int(evidence.n), "estimate": evidence.estimate, "interval": [evidence.low, evidence.high],
            "details": details}


def verdict_text(c: dict[str, Any]) -> str:
    """The verdict for display: "inconclusive (n = 12)" for an inconclusive claim that states its sample size,
    the plain verdict otherwise."""
    verdict = str(c.get("verdict", ""))
    return f"{verdict} (n = {c['n']})" if verdict == INCONCLUSIVE and c.get("n") is not None else verdict


def claims_text(claims: Sequence[dict[str, Any]]) -> str:
    """Every claim as a short block (name: verdict, then paper, ours and rule), for the notebooks to print."""
    return "\n".join(f"{c['name']}: {verdict_text(c).upper()}\n  paper: {c['paper']}\n"
                     + (f"  goal:  {c['goal']}\n" if c.get("goal") else "") + f"  ours:  {c['ours']}\n"
                     f"  rule:  {c['rule']}" for c in claims)


def tally(claims: Sequence[dict[str, Any]]) -> str:
    """'2 holds, 0 does not hold, 1 inconclusive'."""
    return ", ".join(f"{sum(c.get('verdict') == v for c in claims)} {v}" for v in VERDICTS)


def jsonable(obj: Any) -> Any:
    """numpy scalars → Python numbers, NaN / inf → None, recursively (strict JSON for the summaries)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def claims_summary(claims: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary JSON's claim part: the tally and the claims themselves (strict JSON)."""
    return {"claims_tally": tally(claims), "claims": jsonable(list(claims))}


# --- rules --------------------------------------------------------------------------------------------------

def interval_rule(estimate: float, low: float, high: float, bar: float, n: int, what: str, *, above: bool = True,
                  strict: bool = False, min_n: int = 1, unit: str = "", method: str = "95%") -> Evidence:
    """The shared reading of an interval against a bar: the claim is `statistic ≥ bar` (above; `>` if strict) or
    `≤ bar` (`<`); it holds when the whole [low, high] satisfies it, does not hold when the whole interval
    violates it, and is inconclusive otherwise, with a NaN estimate or interval, or with fewer than min_n units."""
    op = OPS[(above, strict)]
    rule = f"{method} interval of {what} {op} {bar:g}" + (f", n ≥ {min_n} {unit}".rstrip() if min_n > 1 else "")
    lo, hi = float(low), float(high)
    if n < min_n or math.isnan(lo) or math.isnan(hi) or math.isnan(float(estimate)):
        verdict = INCONCLUSIVE
    elif above:
        verdict = HOLDS if (lo > bar if strict else lo >= bar) else FAILS if (hi <= bar if strict else hi < bar) \
            else INCONCLUSIVE
    else:
        verdict = HOLDS if (hi < bar if strict else hi <= bar) else FAILS if (lo >= bar if strict else lo > bar) \
            else INCONCLUSIVE
    return Evidence(verdict, rule, int(n), float(estimate), lo, hi)


def proportion_rule(successes: int, n: int, bar: float, what: str, *, above: bool = True, min_n: int = 1,
                    level: float = 0.95, unit: str = "tokens") -> Evidence:
    """A proportion against a bar, by the Wilson interval of `successes` out of `n` (scipy binomtest)."""
    n = int(n)
    lo, hi = (stats.binomtest(int(successes), n).proportion_ci(level, "wilson") if n else (math.nan, math.nan))
    return interval_rule(successes / n if n else math.nan, lo, hi, bar, n, what, above=above, min_n=max(1, min_n),
                         unit=unit, method=f"{level:.0%} Wilson")


def mean_rule(values: Any, bar: float, what: str, *, above: bool = True, strict: bool = True, min_n: int = 2,
              level: float = 0.95, unit: str = "tokens") -> Evidence:
    """A mean against a bar, by its t interval (scipy ttest_1samp)."""
    x = np.asarray(values, dtype=float)
    if len(x) >= 2 and np.ptp(x) > 0:
        lo, hi = stats.ttest_1samp(x, bar).confidence_interval(level)
    else:
        lo = hi = float(x.mean()) if len(x) >= 2 else math.nan  # constant values: the mean is exact
    return interval_rule(float(x.mean()) if len(x) else math.nan, lo, hi, bar, len(x), what, above=above,
                         strict=strict, min_n=max(2, min_n), unit=unit, method=f"{level:.0%} t")


def correlation_rule(x: Any, y: Any, bar: float, what: str, *, above: bool = True, strict: bool = False,
                     min_n: int = 10, level: float = 0.95) -> Evidence:
    """Spearman ρ against a bar, by the Fisher-z interval of the Pearson correlation of the ranks (scipy)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rho = lo = hi = math.nan
    if len(x) >= 4 and np.ptp(x) > 0 and np.ptp(y) > 0:
        res = stats.pearsonr(stats.rankdata(x), stats.rankdata(y))
        rho, (lo, hi) = float(res.statistic), res.confidence_interval(level)
    return interval_rule(rho, lo, hi, bar, len(x), what, above=above, strict=strict, min_n=max(4, min_n),
                         unit="tokens", method=f"{level:.0%} Fisher-z")


def bootstrap_rule(samples: Sequence[Any], statistic: Callable[..., Any], bar: float, what: str, *,
                   above: bool = True, strict: bool = False, min_n: int = MIN_PROMPTS, unit: str = "prompts",
                   level: float = 0.95, n_resamples: int = 2000, seed: int = 0, vectorized: bool = True) -> Evidence:
    """A statistic of paired per-unit samples (one value per prompt, or per token, in each array) against a bar,
    by a seeded percentile bootstrap over the units (scipy bootstrap, paired). `statistic(*arrays, axis=-1)`
    is vectorised unless `vectorized` is False (then `statistic(*arrays)` on 1-D arrays); a statistic
    undefined (NaN) in more resamples than the interval's lower tail leaves the claim inconclusive."""
    arrays = [np.asarray(s, dtype=float) for s in samples]
    n = len(arrays[0]) if arrays else 0
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        estimate = float(statistic(*arrays, axis=-1) if vectorized else statistic(*arrays)) if n else math.nan
        lo = hi = math.nan
        if n >= max(2, min_n):
            batch = max(1, 4_000_000 // (n * len(arrays)))  # resamples per call: about 32 MB of floats
            res = stats.bootstrap(arrays, statistic, paired=True, vectorized=vectorized, axis=-1,
                                  confidence_level=level, n_resamples=n_resamples, batch=batch,
                                  method="percentile", rng=np.random.default_rng(seed))
            if np.isnan(res.bootstrap_distribution).mean() <= (1 - level) / 2:
                lo, hi = res.confidence_interval
    return interval_rule(estimate, lo, hi, bar, n, what, above=above, strict=strict, min_n=max(2, min_n),
                         unit=unit, method=f"{level:.0%} paired bootstrap")


def prompt_interval_rule(estimate: float, low: float, high: float, bar: float, n_prompts: int, what: str, *,
                         above: bool = True, strict: bool = False, min_n: int = MIN_PROMPTS, tokens: int = 0,
                         min_tokens: int = 0, level: float = 0.95) -> Evidence:
    """`interval_rule` for an interval of a token statistic bootstrapped over prompts (`rules.cluster_interval`):
    n is the number of prompts, inconclusive below min_n of them or below min_tokens tokens in all."""
    if tokens < min_tokens:
        low = high = math.nan
    ev = interval_rule(estimate, low, high, bar, n_prompts, what, above=above, strict=strict, min_n=max(2, min_n))
    floor = f"n ≥ {max(2, min_n)} prompts" + (f" and ≥ {min_tokens} tokens" if min_tokens > 1 else "")
    return replace(ev, rule=f"{level:.0%} bootstrap interval over prompts of {what} {OPS[(above, strict)]} {bar:g}, "
                            f"{floor}")


def cluster_rule(statistic: Statistic, n_prompts: int, bar: float, what: str, *, above: bool = True,
                 strict: bool = False, min_n: int = MIN_PROMPTS, tokens: int = 0, min_tokens: int = 0,
                 level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Evidence:
    """A statistic of draft tokens against a bar, by a seeded percentile bootstrap that resamples PROMPTS with
    all their tokens (`rules.cluster_interval`; tokens of one prompt are correlated, so resampling tokens
    would give too narrow an interval). `statistic(W)` maps prompt multiplicities (resamples × prompts) to
    the statistic per resample (`rules.ratio_statistic`, `rules.spearman_statistic`, or one built on
    `rules.prompt_sums`); n is the number of prompts, inconclusive below min_n or below min_tokens tokens."""
    enough = n_prompts >= max(2, min_n) and tokens >= min_tokens
    if enough:
        est, lo, hi = cluster_interval(statistic, n_prompts, level, n_resamples, seed)
    else:  # too few to resample: the estimate alone
        with np.errstate(invalid="ignore", divide="ignore"):
            est = float(statistic(np.ones((1, n_prompts)))[0]) if n_prompts else math.nan
        lo = hi = math.nan
    return prompt_interval_rule(est, lo, hi, bar, n_prompts, what, above=above, strict=strict, min_n=min_n,
                                tokens=tokens, min_tokens=min_tokens, level=level)


def tolerance_rule(value: float, tolerance: float, n: int, what: str, unit: str) -> Evidence:
    """A deterministic effect against zero: holds above +tolerance, does not hold below −tolerance, else
    inconclusive (the tolerance is the interval: readings of a fixed model or of seeded trees)."""
    v = float(value) if value is not None else math.nan
    return interval_rule(v, v - tolerance, v + tolerance, 0.0, n, what, strict=True, unit=unit,
                         method=f"±{tolerance:g} tolerance")


def all_of(parts: Iterable[Evidence], rule: Optional[str] = None) -> Evidence:
    """Several rules together: holds if every part holds, does not hold if any part does not, else inconclusive;
    n is the smallest part's, the estimate the first part's (no parts: inconclusive, n = 0)."""
    parts = list(parts)
    verdicts = {p.verdict for p in parts}
    verdict = FAILS if FAILS in verdicts else HOLDS if parts and verdicts == {HOLDS} else INCONCLUSIVE
    text = rule or "; ".join(dict.fromkeys(p.rule for p in parts)) or "nothing to judge"
    single = parts[0] if len(parts) == 1 else Evidence(verdict, text, 0, parts[0].estimate if parts else math.nan)
    return Evidence(verdict, text, min((p.n for p in parts), default=0), single.estimate, single.low, single.high)


def unscored(why: str = "not scored") -> Evidence:
    """No evidence at all (a pair or policy missing): inconclusive, n = 0."""
    return Evidence(INCONCLUSIVE, why, 0)


def pooled(num: Any, den: Any, axis: int = -1) -> Any:
    """Σ num / Σ den (a pooled rate such as τ = Σ τ / Σ forwards), vectorised for the bootstrap."""
    return np.sum(num, axis=axis) / np.sum(den, axis=axis)


def pooled_difference(a_num: Any, a_den: Any, b_num: Any, b_den: Any, axis: int = -1) -> Any:
    """pooled(a) − pooled(b) over paired units."""
    return pooled(a_num, a_den, axis) - pooled(b_num, b_den, axis)


def pooled_quotient(a_num: Any, a_den: Any, b_num: Any, b_den: Any, axis: int = -1) -> Any:
    """pooled(a) / pooled(b) over paired units."""
    return pooled(a_num, a_den, axis) / pooled(b_num, b_den, axis)
