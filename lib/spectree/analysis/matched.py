"""The rules notebook 02's replay claims share: a rate of two scored rows compared paired over their prompts
(`compare`), two knob sweeps read at a matched γ or τ with every resample recomputing the curves (`matched_rule`), a
claim re-read at other knob values (`knobs_reading`), and how an estimate and its interval print (`estimate_text`).
Every interval is scipy's BCa bootstrap over the prompts' per-prompt sums (`sweeps.score`'s `by_prompt`)."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from spectree.analysis import sweeps
from spectree.analysis.sweeps import scored
from spectree.claims.claims import Evidence, bootstrap_rule, pooled_difference, pooled_quotient, unscored
from spectree.claims.diagnosis import reading
from spectree.claims.verdicts import HOLDS

INTERVAL = "BCa"  # every claim's bootstrap interval (scipy's bias-corrected and accelerated)
RATES = {"tau": ("tau", "steps"), "gamma": ("gamma", "steps"), "alpha": ("tau_drafted", "depth")}  # per-prompt sums
SUMS = ("steps", "tau", "gamma", "tau_drafted", "depth")  # what a matched reading resamples, per row and prompt


def pick(table: pd.DataFrame, group: str, name: str, **params: Any) -> Optional[pd.Series]:
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
                          bar, what, above=above, strict=strict, method=INTERVAL)


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
    return bootstrap_rule(arrays, statistic, bar, what, above=above, strict=strict, method=INTERVAL)


def second_reading(label: str, ev: Evidence, fmt: str) -> str:
    """A claim re-read at another knob value, in words: "m = 8: holds (+0.012 (95% CI …))"."""
    return f"{label}: {ev.verdict}" + (f" ({estimate_text(ev, fmt)})" if math.isfinite(ev.estimate) else "")


def knobs_reading(at: str, others: list[tuple[str, Evidence, str]]) -> dict:
    """The `diagnosis.KNOBS` reading of a claim read at `at` (the paper's knob values), re-read at each other value
    (label, evidence, number format): it holds where any other value holds, naming those (`where`)."""
    holding = [label for label, ev, _ in others if ev.verdict == HOLDS]
    text = "; ".join([at] + [second_reading(label, ev, fmt) for label, ev, fmt in others])
    return reading(text, HOLDS if holding else (others[0][1].verdict if others else ""), tried=bool(others),
                   where=", ".join(holding), off_point=True)


def estimate_text(ev: Evidence, fmt: str) -> str:
    """'+0.12 (95% CI +0.05–+0.20)': a matched reading's estimate and interval, as the claims print them."""
    if not math.isfinite(ev.estimate):
        return "not reached"
    return f"{ev.estimate:{fmt}}" + (f" (95% CI {ev.low:{fmt}}–{ev.high:{fmt}})" if math.isfinite(ev.low) else "")
