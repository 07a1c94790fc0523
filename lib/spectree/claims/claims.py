"""Claims: the papers' statements next to ours, judged by stated statistical rules in one vocabulary.

Every notebook's claims are built here: `claim(name, paper, ours, evidence)` takes the `Evidence` of one rule
helper, so every claim carries its verdict (one of VERDICTS), the `rule` that decided it, the number `n` of
independent units its evidence rests on (prompts; trees, seeds or timing rounds where a claim is not about prompts),
its kind (a paper's statement, or a bar of ours: counted apart) and, where a paper claim does not hold or is
inconclusive, a computed `diagnosis` (`diagnose`). The rules share one reading: a claim holds when the whole
interval of its statistic is on the claimed side of the bar, does not hold when the whole interval is on the other
side, and is inconclusive otherwise or on fewer than MIN_UNITS units; a claim this pair cannot test says "not
testable" and why (`not_testable`), never a verdict by construction. Intervals come from
scipy: Wilson intervals for proportions (`binomtest`), t intervals for means (`ttest_1samp`), percentile
bootstraps paired over prompts (`bootstrap`), Fisher-z intervals for Spearman ρ (`pearsonr` on ranks);
deterministic readings use a stated tolerance as their interval. Statistics of draft tokens (notebooks 04–07)
are bootstrapped over PROMPTS, every drawn prompt with all its tokens (`cluster_rule`, numbers in
`spectree.claims.rules`), because tokens of one prompt are correlated: their n is the number of prompts.

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

from spectree.claims.diagnosis import PROMPTS, diagnose, reading
from spectree.claims.rules import Statistic, cluster_interval
from spectree.claims.verdicts import (FAILS, HOLDS, INCONCLUSIVE, KINDS, NOT_SPLIT, NOT_TESTABLE, PAPER, REPEATS,
                                        UNDECIDED, UNSTABLE, VERDICTS, side)
LOSSLESS = "\"SD can achieve lossless acceleration\" (EDD §4.1, l.521)"  # the papers' premise, the paper column
MIN_PROMPTS = 8  # comparisons resampled over prompts need at least this many
MIN_UNITS = 8  # no holds / does not hold on fewer independent units (prompts; trees, seeds or timing rounds)
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
    bar: float = math.nan  # what the interval was read against (NaN where no single bar applies)
    above: bool = True  # the claim is statistic ≥ bar (False: ≤ bar)
    halves: tuple[str, ...] = ()  # the side of the bar (`verdicts.side`) of the statistic on each of two disjoint
    # halves of the units (alternate units: `halves_of`); () where the rule cannot split them
    half_estimates: tuple[float, ...] = ()  # the statistic on each half (a single rule's; () for `all_of`)


def claim(name: str, paper: str, ours: Any, evidence: Evidence, goal: str = "", *, kind: str = PAPER,
          key: str = "", off_point: str = "", cell: str = "", readings: Optional[dict[str, Any]] = None,
          **details: Any) -> dict[str, Any]:
    """One reading of a claim: the paper's statement (its own words or number, "—" where the paper states none),
    our `goal` where the bar is ours and not the paper's (e.g. an issue's target, a threshold the paper leaves
    open), ours, and the evidence's verdict, rule, n and interval. `kind` says what is judged: "paper" (a paper's
    statement about a method's behaviour) or "bar" (a goal we set: speed ≥ x, projection accuracy, a lossless
    check, engine tuning, the GPU checklist, even where a paper number stands beside it); the tallies count them
    apart.
    A paper claim names its `key` in the scorecard (`claims.scorecard.PAPER_CLAIMS`): every reading of one claim
    carries the same key, and the scorecard shows it once. `off_point` says how this reading's setting differs from
    the paper's operating point ("m = 32 (the paper's 64)"; "" where it is the paper's: a tallied reading); `cell`
    which of the paper's settings it covers where the claim spans several ("T = 0.6").
    `readings` re-read a claim under each factor that applies ({factor: `diagnosis.reading`}: another knob value,
    another comparison) and are kept whatever its verdict; only a paper claim that does not hold or is
    inconclusive gets a `diagnosis` from them (`diagnosis.diagnose`; the prompts' factor is read from the evidence
    itself, `prompts_reading`, unless given): a claim that holds, and a bar of ours, is never diagnosed.
    A decisive verdict on fewer than MIN_UNITS independent units (`evidence.n`) is inconclusive; a decisive paper
    verdict whose two halves of units (`Evidence.halves`) do not both fall on its side is inconclusive
    ("unstable"), and `repeat` says which (`repeated`). A bar of ours (one that opens with ≥ ≤ < >, or names an
    issue) given as the paper's statement is an error: it belongs in `goal`."""
    if evidence.verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {evidence.verdict!r}")
    if kind not in KINDS:
        raise ValueError(f"claim {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if paper.lstrip()[:1] in set("≥≤<>") or "issue" in paper.lower():
        raise ValueError(f"claim {name!r}: the paper column holds the paper's statement, not our bar {paper!r}; "
                         "give the bar as goal=")
    evidence, repeat = repeated(enough_units(evidence)) if kind == PAPER else (enough_units(evidence), "")
    readings = dict(readings or {})  # kept whatever the verdict: a holding claim's second readings stay shown
    diagnosed = kind == PAPER and evidence.verdict in (FAILS, INCONCLUSIVE)  # only these are diagnosed
    if diagnosed:
        readings.setdefault(PROMPTS, prompts_reading(evidence))
    diagnosis = diagnose(readings, at_paper_point=not off_point, point=off_point) if diagnosed and readings else ""
    return {"name": name, "kind": kind, "key": key, "off_point": off_point, "cell": cell, "paper": paper,
            "goal": goal, "ours": ours, "verdict": evidence.verdict, "rule": evidence.rule, "n": int(evidence.n),
            "estimate": evidence.estimate, "interval": [evidence.low, evidence.high], "halves": list(evidence.halves),
            "repeat": repeat, "readings": readings, "diagnosis": diagnosis, "details": details}


def repeated(evidence: Evidence) -> tuple[Evidence, str]:
    """A decisive verdict re-read on two disjoint halves of its units: (the evidence, "repeats") when the statistic
    of each half falls on the verdict's side of the bar; (inconclusive, "unstable") when one does not, its rule
    saying so; (the evidence, "not split") when its rule cannot split its units; any other verdict: (it, "")."""
    if evidence.verdict not in (HOLDS, FAILS):
        return evidence, ""
    if len(evidence.halves) != 2:
        return evidence, NOT_SPLIT
    if all(h == evidence.verdict for h in evidence.halves):
        return evidence, REPEATS
    text = f"{evidence.rule}; unstable: {evidence.verdict} on all units, the two halves read " + \
        " and ".join(evidence.halves)
    return replace(evidence, verdict=INCONCLUSIVE, rule=text), UNSTABLE


def halves_of(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The two disjoint halves a verdict is re-read on: alternate units (0, 2, 4, … and 1, 3, 5, …), so that two
    datasets in order (MT-bench then HumanEval) are in both."""
    index = np.arange(int(n))
    return index[0::2], index[1::2]


def enough_units(evidence: Evidence, min_units: int = MIN_UNITS) -> Evidence:
    """A holds / does not hold resting on fewer than `min_units` independent units becomes inconclusive, and its
    rule says why; every other verdict is returned as it is."""
    if evidence.verdict in (HOLDS, FAILS) and evidence.n < min_units:
        return replace(evidence, verdict=INCONCLUSIVE,
                       rule=f"{evidence.rule}; n = {evidence.n} < {min_units} independent units: inconclusive")
    return evidence


def not_testable(why: str) -> Evidence:
    """A claim that cannot be tested here (the paper leaves the setting unsaid, or this pair cannot reach the
    comparison's premise): verdict "not testable", the reason as its rule, n = 0. Never a verdict by construction."""
    return Evidence(NOT_TESTABLE, why, 0)


# --- rules --------------------------------------------------------------------------------------------------

def interval_rule(estimate: float, low: float, high: float, bar: float, n: int, what: str, *, above: bool = True,
                  strict: bool = False, min_n: int = 1, unit: str = "", method: str = "95%",
                  halves: Sequence[float] = ()) -> Evidence:
    """The shared reading of an interval against a bar: the claim is `statistic ≥ bar` (above; `>` if strict) or
    `≤ bar` (`<`); it holds when the whole [low, high] satisfies it, does not hold when the whole interval
    violates it, and is inconclusive otherwise, with a NaN estimate or interval, or with fewer than min_n units.
    `halves`: the statistic on two disjoint halves of the units (`halves_of`), kept as their sides of the bar."""
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
    halves = tuple(float(h) for h in halves) if len(halves) == 2 else ()
    sides = tuple(side(h, bar, above, strict) for h in halves)
    return Evidence(verdict, rule, int(n), float(estimate), lo, hi, float(bar), above, sides, halves)


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
    halves = [float(x[h].mean()) for h in halves_of(len(x))] if len(x) >= 2 else ()
    return interval_rule(float(x.mean()) if len(x) else math.nan, lo, hi, bar, len(x), what, above=above,
                         strict=strict, min_n=max(2, min_n), unit=unit, method=f"{level:.0%} t", halves=halves)


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
                   level: float = 0.95, n_resamples: int = 2000, seed: int = 0, vectorized: bool = True,
                   method: str = "percentile") -> Evidence:
    """A statistic of paired per-unit samples (one value per prompt, or per token, in each array) against a bar,
    by a seeded bootstrap over the units (scipy bootstrap, paired; `method` "percentile" or "BCa", the
    bias-corrected and accelerated interval). `statistic(*arrays, axis=-1)`
    is vectorised unless `vectorized` is False (then `statistic(*arrays)` on 1-D arrays); a statistic
    undefined (NaN) in more resamples than the interval's lower tail leaves the claim inconclusive. The statistic
    on each half of the units (`halves_of`) is kept for `repeated`."""
    arrays = [np.asarray(s, dtype=float) for s in samples]
    n = len(arrays[0]) if arrays else 0

    def at(units: Any) -> float:
        part = [a[..., units] for a in arrays]
        return float(statistic(*part, axis=-1) if vectorized else statistic(*part))
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        estimate = at(slice(None)) if n else math.nan
        halves = [at(h) for h in halves_of(n)] if n >= 2 else ()
        lo = hi = math.nan
        if n >= max(2, min_n):
            batch = max(1, 4_000_000 // (n * len(arrays)))  # resamples per call: about 32 MB of floats
            res = stats.bootstrap(arrays, statistic, paired=True, vectorized=vectorized, axis=-1,
                                  confidence_level=level, n_resamples=n_resamples, batch=batch,
                                  method=method, rng=np.random.default_rng(seed))
            if np.isnan(res.bootstrap_distribution).mean() <= (1 - level) / 2:
                lo, hi = res.confidence_interval
                spread = res.bootstrap_distribution[~np.isnan(res.bootstrap_distribution)]
                if math.isnan(lo) and len(spread) and spread.min() == spread.max():  # BCa of a constant statistic
                    lo = hi = float(spread[0])
    kind = "BCa " if method.lower() == "bca" else ""
    return interval_rule(estimate, lo, hi, bar, n, what, above=above, strict=strict, min_n=max(2, min_n),
                         unit=unit, method=f"{level:.0%} paired {kind}bootstrap", halves=halves)


def prompt_interval_rule(estimate: float, low: float, high: float, bar: float, n_prompts: int, what: str, *,
                         above: bool = True, strict: bool = False, min_n: int = MIN_PROMPTS, tokens: int = 0,
                         min_tokens: int = 0, level: float = 0.95, halves: Sequence[float] = ()) -> Evidence:
    """`interval_rule` for an interval of a token statistic bootstrapped over prompts (`rules.cluster_interval`):
    n is the number of prompts, inconclusive below min_n of them or below min_tokens tokens in all; `halves` the
    statistic on each half of the prompts (`halves_of`)."""
    if tokens < min_tokens:
        low = high = math.nan
    ev = interval_rule(estimate, low, high, bar, n_prompts, what, above=above, strict=strict, min_n=max(2, min_n),
                       halves=halves)
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
    halves: Sequence[float] = ()
    if n_prompts >= 2:  # each half of the prompts alone: weight 1 on its prompts, 0 on the others
        weights = np.zeros((2, n_prompts))
        for row, units in enumerate(halves_of(n_prompts)):
            weights[row, units] = 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            halves = [float(v) for v in statistic(weights)]
    return prompt_interval_rule(est, lo, hi, bar, n_prompts, what, above=above, strict=strict, min_n=min_n,
                                tokens=tokens, min_tokens=min_tokens, level=level, halves=halves)


def tolerance_rule(value: float, tolerance: float, n: int, what: str, unit: str, halves: Sequence[float] = ()
                   ) -> Evidence:
    """A deterministic effect against zero: holds above +tolerance, does not hold below −tolerance, else
    inconclusive (the tolerance is the interval: readings of a fixed model or of seeded trees); `halves` the
    effect on each half of the units."""
    v = float(value) if value is not None else math.nan
    return interval_rule(v, v - tolerance, v + tolerance, 0.0, n, what, strict=True, unit=unit,
                         method=f"±{tolerance:g} tolerance", halves=halves)


def all_of(parts: Iterable[Evidence], rule: Optional[str] = None) -> Evidence:
    """Several rules together: holds if every part holds, does not hold if any part does not, not testable if no
    part can be tested, else inconclusive; n is the smallest part's, the estimate and interval those of the part
    that decides (`_deciding`; no parts: inconclusive, n = 0); each half of the units is read the same way over the
    parts' halves."""
    parts = list(parts)
    verdicts = {p.verdict for p in parts}
    verdict = (FAILS if FAILS in verdicts else HOLDS if parts and verdicts == {HOLDS} else
               NOT_TESTABLE if parts and verdicts == {NOT_TESTABLE} else INCONCLUSIVE)
    text = rule or "; ".join(dict.fromkeys(p.rule for p in parts)) or "nothing to judge"
    if len(parts) == 1:
        return replace(parts[0], rule=text)
    halves: tuple[str, ...] = ()
    if parts and all(len(p.halves) == 2 for p in parts):  # each half as the verdict over the parts' halves
        halves = tuple(FAILS if FAILS in s else HOLDS if set(s) == {HOLDS} else UNDECIDED
                       for s in zip(*(p.halves for p in parts)))
    if not parts:
        return Evidence(verdict, text, 0, math.nan, halves=halves)
    decides = _deciding(parts)
    return Evidence(verdict, text, min(p.n for p in parts), decides.estimate, decides.low, decides.high,
                    halves=halves)


def _deciding(parts: list[Evidence]) -> Evidence:
    """The part whose reading `all_of`'s verdict reports: of the parts that do not hold (else the inconclusive ones,
    else all), the one furthest on the failing side of its bar (the first where no bar is known)."""
    pool = ([p for p in parts if p.verdict == FAILS] or [p for p in parts if p.verdict == INCONCLUSIVE] or parts)

    def short(p: Evidence) -> float:  # how far the estimate falls short of its bar (positive: on the failing side)
        gap = (p.bar - p.estimate) if p.above else (p.estimate - p.bar)
        return gap if math.isfinite(gap) else -math.inf
    return max(pool, key=short)


def units_needed(evidence: Evidence) -> float:
    """How many units (prompts) an inconclusive interval would need to clear its bar, if the estimate stayed where
    it is and the interval narrowed as 1/√n: n · (reach / |estimate − bar|)², where the reach is the interval's side
    towards the bar (a skewed BCa interval is longer on one side), and at least n + 1 (at n it does not clear).
    NaN where that cannot be read (no interval or bar); inf when the estimate sits on the bar."""
    est, lo, hi, bar = evidence.estimate, evidence.low, evidence.high, evidence.bar
    if not all(map(math.isfinite, (est, lo, hi, bar))) or evidence.n < 1:
        return math.nan
    gap = abs(est - bar)
    reach = est - lo if bar < est else hi - est
    return math.inf if gap == 0 else max(evidence.n + 1.0, evidence.n * (reach / gap) ** 2)


def prompts_reading(evidence: Evidence, unit: str = "prompts", feasible: float = 4.0) -> dict[str, Any]:
    """The 'more prompts' factor of a diagnosis (`diagnosis.reading`): for a does-not-hold, that more units would not
    flip it (its whole interval is on the other side of the bar); for an inconclusive one, the n at which its
    interval would clear the bar (`units_needed`), the side it would land on (`projects`: holds / does not hold) and
    whether that n is within `feasible` × today's (only then "too few", and only a projection to the holding side
    opens a diagnosis with it)."""
    if evidence.verdict == FAILS:
        whole = ("the whole interval is on the other side of the bar" if math.isfinite(evidence.low) else
                 "a part's whole interval is on the other side of its bar")  # `all_of` keeps no single interval
        return reading(f"would not flip it ({whole}, n = {evidence.n} {unit})", FAILS, unit=unit)
    if evidence.verdict != INCONCLUSIVE:
        return reading("")
    need = units_needed(evidence)
    if math.isnan(need):
        return reading("cannot tell: no single interval to project (several parts, or none computed)", tried=False,
                       unit=unit)
    if math.isinf(need):
        return reading("would not decide it (the estimate sits on the bar)", INCONCLUSIVE, unit=unit)
    lands = side(evidence.estimate, evidence.bar, evidence.above)
    words = "hold" if lands == HOLDS else "not hold"
    if need <= feasible * max(evidence.n, 1):
        return reading(f"too few {unit}: at this estimate it would {words} from ≈ {math.ceil(need)} {unit} "
                       f"(n = {evidence.n})", INCONCLUSIVE, projects=lands, unit=unit)
    return reading(f"would hardly decide it (≈ {math.ceil(need)} {unit} needed at this estimate, it would {words}; "
                   f"n = {evidence.n})", INCONCLUSIVE, projects="", unit=unit)


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
