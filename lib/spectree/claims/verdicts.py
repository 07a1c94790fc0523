"""The verdict vocabulary every claim, reading and tally shares: four verdicts, two kinds of claim, and which side of
its bar a statistic falls on (the sides the two halves of a claim's units are read by, `claims.claims`)."""
from __future__ import annotations

import math

VERDICTS = ("holds", "does not hold", "inconclusive", "not testable")
HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = VERDICTS
KINDS = ("paper", "bar")  # a paper's statement about a method's behaviour; a goal we set (speed, lossless, ...)
PAPER, BAR = KINDS
UNDECIDED = "undecided"  # the side of a statistic that could not be computed (NaN)
REPEATS, UNSTABLE, NOT_SPLIT = "repeats", "unstable", "not split"  # a decisive paper verdict on two disjoint halves


def side(estimate: float, bar: float, above: bool = True, strict: bool = False) -> str:
    """Which side of `bar` an estimate falls on, in verdict words: HOLDS where the claim (statistic ≥ bar, or > bar
    if strict; ≤ / < when not `above`) is met, FAILS where it is not, UNDECIDED for a NaN estimate or bar."""
    x, b = float(estimate), float(bar)
    if math.isnan(x) or math.isnan(b):
        return UNDECIDED
    met = (x > b if strict else x >= b) if above else (x < b if strict else x <= b)
    return HOLDS if met else FAILS
