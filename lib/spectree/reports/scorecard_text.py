"""RESULTS.md's scorecard: each paper claim once (`claims.scorecard`), per paper, with its tallies.

Rendered from the notebooks' summaries: every paper-claim reading of every notebook, tagged with the notebook it came
from, and notebook 11's readings by draft quality (its summary's `draft_quality`, by scorecard key). The tallies
count each claim once; how many decisive verdicts repeat on two disjoint halves of their units is stated beside
them.
"""
from __future__ import annotations

from typing import Any, Mapping

from spectree.claims.scorecard import PAPERS, repeat_count, scorecard, tally, unread_count, unregistered
from spectree.claims.verdicts import BAR, INCONCLUSIVE, VERDICTS

QUALITY_STEM = "11_draft_quality"  # its summary's `draft_quality`: {scorecard key: {"text", "verdict"}}


def readings_of(summaries: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every paper-claim reading of the summaries ({notebook stem: summary}), each tagged with its `notebook`."""
    out = []
    for stem, summary in summaries.items():
        claims = summary.get("claims") if isinstance(summary.get("claims"), list) else []
        out += [{**c, "notebook": stem} for c in claims if isinstance(c, dict) and c.get("kind") != BAR]
    return out


def quality_of(summaries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Notebook 11's readings by draft quality, {scorecard key: {"text", "verdict"}} ({} without them; an older
    summary keyed by claim name gives none)."""
    readings = (summaries.get(QUALITY_STEM) or {}).get("draft_quality")
    return {k: v for k, v in readings.items() if isinstance(v, dict)} if isinstance(readings, dict) else {}


def rows_of(summaries: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The scorecard rows of these summaries (`claims.scorecard.scorecard`)."""
    return scorecard(readings_of(summaries), quality_of(summaries))


def tally_line(rows: list[dict[str, Any]]) -> str:
    """'paper claims (each once, the scorecard): 12 holds, …'."""
    counts, unread = tally(rows), unread_count(rows)
    return "paper claims (each once, the scorecard): " + ", ".join(
        f"{counts[v]} {v}" + (f" ({unread} of them not read at the paper's operating point)"
                              if v == INCONCLUSIVE and unread else "") for v in VERDICTS)


def repeat_line(rows: list[dict[str, Any]]) -> str:
    """'decisive paper verdicts that repeat on both halves of their units: 9 of 11'."""
    repeated, decisive = repeat_count(rows)
    return (f"decisive paper verdicts that repeat on both halves of their units (prompts; seeds where training "
            f"enters): {repeated} of {decisive}")


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _verdict(row: dict[str, Any]) -> str:
    return f"{row['verdict']} (n = {row['n']})" if row["verdict"] in (INCONCLUSIVE,) or row["n"] else row["verdict"]


def _ours(row: dict[str, Any]) -> str:
    """Our reading at the paper's point ('—' without one), then the bar of ours it is scored against, where the
    paper gives none: 'ECE 0.033 (…) · bar of ours: ECE ≤ 0.05 (our bar)'."""
    goal = row.get("goal") or ""
    return (row["ours"] or "—") + (f" · bar of ours: {goal}" if goal else "")


def _others(row: dict[str, Any]) -> str:
    return "; ".join(f"{r['label']}: **{r['verdict'] or '—'}**" + (f" ({r['ours']})" if r.get("ours") else "")
                     for r in row["readings"])


def render_scorecard(rows: list[dict[str, Any]], summaries: Mapping[str, dict[str, Any]] = {}) -> list[str]:
    """The scorecard's markdown: a table per paper, one row per claim (the paper's words and its table or figure,
    our reading at the paper's operating point with the bar of ours it is scored against, the verdict with its n,
    whether it repeats on both halves, the diagnosis in one line, every other reading labelled)."""
    out = ["## Scorecard: each paper claim once", "",
           "Each claim the papers make, read at the paper's operating point; a reading in another setting (another "
           "notebook, budget, temperature, knob value, a mixture draft) is listed under *other readings* and never "
           "tallied. *Repeats*: the verdict holds on both halves of its units (alternate prompts; seeds where "
           "training enters). The notebook sections below hold the figures and every reading in full.", ""]
    for paper in PAPERS:
        mine = [r for r in rows if r["paper"] == paper]
        if not mine:
            continue
        counts = tally(mine)
        out += [f"### {paper}", "", ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]), "",
                "| claim | paper | ours, at the paper's point | verdict | repeats | diagnosis | other readings |",
                "|---|---|---|---|---|---|---|"]
        out += [f"| {_cell(r['claim'])} ({_cell(r['where'])}; read at: {_cell(r['point'])}) | {_cell(r['words'])} "
                f"| {_cell(_ours(r))} | **{_cell(_verdict(r))}** | {_cell(r['repeat'])} "
                f"| {_cell(r['diagnosis'])} | {_cell(_others(r))} |" for r in mine] + [""]
    loose = unregistered(readings_of(summaries))
    if loose:
        out += ["Readings without a scorecard key (not tallied): " + "; ".join(
            f"{_cell(c.get('name'))} ({c['notebook']}): {c.get('verdict')}" for c in loose), ""]
    return out
