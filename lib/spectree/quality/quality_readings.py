"""Notebook 11's claims by draft quality: the verdicts each `quality.quality.Quality` (one λ's readings) holds, read
across the agreements — one row per claim (`flips`) and one reading per paper claim (`draft_quality`, notebook 11's
summary key of that name), shown under the claim's scorecard row as a labelled reading (`claims.scorecard`), never
as its diagnosis: a mixture draft draws on the target."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from spectree.claims.verdicts import BAR, FAILS, HOLDS, INCONCLUSIVE

PAPERS_AGREEMENT = (0.55, 0.85)  # the papers' drafts: top-1 agreement 0.6–0.85 at draft position 1, with a margin
# (11's targets 0.6 and 0.8 land at 0.60 and 0.81 on the default prompts)


def by_agreement(results: Sequence[Any]) -> list[Any]:
    return sorted(results, key=lambda q: (q.agreement["agreement"], q.weight))


def verdicts_by_agreement(results: Sequence[Any]) -> tuple[list[Any], dict[str, list[str]]]:
    """(the results by agreement, lowest first; {claim name: its verdict at each, "—" where not judged})."""
    ordered = by_agreement(results)
    verdicts: dict[str, list[str]] = {}
    for i, q in enumerate(ordered):
        for c in q.claims:
            verdicts.setdefault(c["name"], ["—"] * len(ordered))[i] = c["verdict"]
    return ordered, verdicts


def _points(ordered: Sequence[Any], vs: Sequence[str], which: str) -> str:
    at = [f"{q.agreement['agreement']:.2f}" for q, v in zip(ordered, vs) if v == which]
    return at[0] if len(at) == 1 else ", ".join(at[:-1]) + " and " + at[-1] if at else ""


def reading(ordered: Sequence[Any], vs: Sequence[str], papers: tuple[float, float] = PAPERS_AGREEMENT) -> str:
    """One claim's verdicts by agreement (`verdicts_by_agreement`) in words, the "draft quality" factor of its
    diagnosis (`claims.claims.diagnose`). It opens with "holds" only when the claim holds at an agreement of the
    papers' drafts (`papers`): "holds from agreement 0.60 (λ 0.213) up to 0.80" (there and at every higher one),
    "holds at 0.60; does not hold at 0.80"; otherwise "does not hold at any agreement up to 0.80", "inconclusive at
    every agreement up to 0.80", or the verdicts at the papers' agreements first ("does not hold at 0.60 and 0.80;
    inconclusive at 0.38")."""
    scored = [(q, v) for q, v in zip(ordered, vs) if v != "—"]
    if not scored:
        return ""
    qs, verdicts = [q for q, _ in scored], [v for _, v in scored]
    top = f"{qs[-1].agreement['agreement']:.2f}"
    inside = [v for q, v in scored if papers[0] <= q.agreement["agreement"] <= papers[1]]

    def listing(order: Sequence[str], upto: int = len(verdicts)) -> str:
        return "; ".join(f"{v} at {_points(qs[:upto], verdicts[:upto], v)}" for v in dict.fromkeys(order)
                         if v in verdicts[:upto])
    if not inside:
        return f"not read at the papers' draft quality (agreement {papers[0]:g}–{papers[1]:g}): {listing(verdicts)}"
    tail = len(verdicts)
    while tail > 0 and verdicts[tail - 1] == HOLDS:
        tail -= 1
    if tail < len(verdicts) and qs[tail].agreement["agreement"] <= papers[1]:  # holds from there to the best draft
        first = f"{qs[tail].agreement['agreement']:.2f} (λ {qs[tail].weight:.3g})"
        if tail == 0:
            return f"holds at every agreement from {first} up to {top}"
        return f"holds from agreement {first} up to {top}; {listing(verdicts, tail)}"
    if len(set(verdicts)) == 1:
        return {FAILS: f"does not hold at any agreement up to {top}",
                INCONCLUSIVE: f"inconclusive at every agreement up to {top}"}.get(
            verdicts[0], f"{verdicts[0]} at every agreement up to {top}")
    return listing(sorted(dict.fromkeys(inside), key=lambda v: v != HOLDS) + verdicts)


def draft_quality(results: Sequence[Any], papers: tuple[float, float] = PAPERS_AGREEMENT
                  ) -> dict[str, dict[str, str]]:
    """{scorecard key: {"text", "verdict"}} for every paper claim these logbooks read: notebook 11's summary key
    `draft_quality`, shown under the claim's scorecard row as a labelled reading (`claims.scorecard.score`), never
    as its diagnosis — a mixture draft draws on the target, and these logbooks read their own protocol (their
    positions and budgets: a setting off the paper's, e.g. DySpec below m = 64, is named first). `verdict`: the
    claim's at the best draft within the papers' agreement (`papers`), "" where none was read there."""
    ordered, verdicts = verdicts_by_agreement(results)
    named = {c["name"]: c for q in results for c in q.claims}
    grouped: dict[str, list[str]] = {}
    best: dict[str, str] = {}
    for name, vs in verdicts.items():
        c = named[name]
        if c.get("kind") == BAR or not c.get("key"):
            continue
        off = f"at {c['off_point']}: " if c.get("off_point") else ""
        grouped.setdefault(c["key"], []).append(f"{name}: {off}{reading(ordered, vs, papers)}")
        inside = [v for q, v in zip(ordered, vs) if papers[0] <= q.agreement["agreement"] <= papers[1] and v != "—"]
        if inside:
            best[c["key"]] = inside[-1]
    return {key: {"text": "; ".join(texts), "verdict": best.get(key, "")} for key, texts in grouped.items()}


def flips(results: Sequence[Any], papers: tuple[float, float] = PAPERS_AGREEMENT) -> pd.DataFrame:
    """One row per claim: its verdict at each agreement (columns 'agreement 0.38 (λ 0)', …, lowest first),
    `holds from`: the lowest agreement from which it holds at every higher one measured ("everywhere" if it holds
    at the lowest; at the highest, "never in range" if it does not hold there, "undecided at the best draft" if
    it was inconclusive or not judged there), and `draft quality`, its `reading`."""
    ordered, verdicts = verdicts_by_agreement(results)
    cols = [f"agreement {q.agreement['agreement']:.2f} (λ {q.weight:g})" for q in ordered]
    rows = []
    for name, vs in verdicts.items():
        tail = len(vs)
        while tail > 0 and vs[tail - 1] == HOLDS:
            tail -= 1
        start = (("never in range" if vs[-1] == FAILS else "undecided at the best draft")
                 if tail == len(vs) else "everywhere" if tail == 0 else
                 f"{ordered[tail].agreement['agreement']:.2f} (λ {ordered[tail].weight:g})")
        rows.append({"claim": name, **dict(zip(cols, vs)), "holds from": start,
                     "draft quality": reading(ordered, vs, papers)})
    return pd.DataFrame(rows)


def readings_table(results: Sequence[Any]) -> pd.DataFrame:
    """Long table of the 04–07 readings: λ, agreement, reading, value (for small multiples)."""
    return pd.DataFrame([{"weight": q.weight, "agreement": q.agreement["agreement"], "reading": k, "value": v}
                         for q in results for k, v in q.readings.items()])


__all__ = ["PAPERS_AGREEMENT", "by_agreement", "verdicts_by_agreement", "reading", "draft_quality", "flips",
           "readings_table"]
