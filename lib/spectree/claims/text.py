"""Claims written out: the verdict as displayed, each claim as a short text block for the notebooks and `bench`
to print, the two tallies (papers' claims apart from our bars) and the summary JSON's claim part (strict JSON)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from spectree.claims.verdicts import BAR, INCONCLUSIVE, VERDICTS

DIRECTION_ONLY = "direction only, not a verdict"  # beside a reading's direction, whatever its verdict


def pointing(paper_way: bool) -> str:
    """Which way a reading points beside the paper's claim, said with `DIRECTION_ONLY` (not a verdict itself)."""
    return "the paper's way" if paper_way else "against the paper"


def verdict_text(c: dict[str, Any]) -> str:
    """The verdict for display: "inconclusive (n = 12)" for an inconclusive claim that states its sample size,
    the plain verdict otherwise."""
    verdict = str(c.get("verdict", ""))
    return f"{verdict} (n = {c['n']})" if verdict == INCONCLUSIVE and c.get("n") is not None else verdict


def claims_text(claims: Sequence[dict[str, Any]]) -> str:
    """Every claim as a short block (name: verdict, then paper, ours and rule), for the notebooks to print."""
    return "\n".join(f"{c['name']}: {verdict_text(c).upper()}" + (" [our bar]" if c.get("kind") == BAR else "")
                     + f"\n  paper: {c['paper']}\n" + (f"  goal:  {c['goal']}\n" if c.get("goal") else "")
                     + f"  ours:  {c['ours']}\n  rule:  {c['rule']}" + _interval_line(c)
                     + (f"\n  why:   {c['diagnosis']}" if c.get("diagnosis") else "") for c in claims)


def _interval_line(c: dict[str, Any]) -> str:
    """'\n  read:  1.22 (interval 1.15–1.30)': the estimate the rule read and its interval, where both are numbers
    ('(exact)' for a count read without one)."""
    est, (lo, hi) = c.get("estimate"), (c.get("interval") or [None, None])[:2]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (est, lo, hi)):
        return ""
    return f"\n  read:  {est:.3g} " + ("(exact)" if lo == hi == est else f"(interval {lo:.3g}–{hi:.3g})")


def count(claims: Sequence[dict[str, Any]]) -> str:
    """'2 holds, 0 does not hold, 1 inconclusive, 0 not testable'."""
    return ", ".join(f"{sum(c.get('verdict') == v for c in claims)} {v}" for v in VERDICTS)


def tally(claims: Sequence[dict[str, Any]]) -> str:
    """The two tallies, the papers' claims apart from our own bars: 'paper claims: 2 holds, 0 does not hold,
    1 inconclusive, 0 not testable; our bars: 1 holds, …' (a claim without a kind is a paper claim)."""
    bars = [c for c in claims if c.get("kind") == BAR]
    papers = [c for c in claims if c.get("kind") != BAR]
    return f"paper claims: {count(papers)}; our bars: {count(bars)}"


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
    """The summary JSON's claim part: the two tallies (paper claims, our bars), both together as `claims_tally`,
    and the claims themselves (strict JSON)."""
    bars = [c for c in claims if c.get("kind") == BAR]
    return {"paper_claims": count([c for c in claims if c.get("kind") != BAR]), "our_bars": count(bars),
            "claims_tally": tally(claims), "claims": jsonable(list(claims))}
