"""The diagnosis of a paper claim that does not hold or is inconclusive: what was re-read, and what it showed.

A claim's `readings` map each factor re-read to a `reading` — its text, the verdict the claim gets under that
factor, and whether the factor was tried at all. `diagnose` opens with a factor only where its reading supports it:

- "holds with F (where)" — the factors whose tried reading flips the verdict to holding at the paper's point (a GPU
  cost model, a better real draft, the healthy training seeds); "holds only off the paper's point: F (where)" — a
  reading at a setting the paper does not read (another budget, s_d/s_t or comparison: `off_point` readings);
- "too few prompts" — only when the projection of the interval lands on the holding side within reach
  (`claims.prompts_reading` marks it `projects = holds`);
- "a property of this pair" — only when the claim was read at the paper's operating point (its knobs) and at a
  real draft of the papers' quality, and neither flips it;
- otherwise "no factor tried flips it", followed by what was tried and what was not.

Readings that cannot diagnose a claim are never passed here (a mixture draft's reading of a claim about the draft's
own confidence, a reading under another protocol: `claims.scorecard`); they are shown as labelled readings.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from spectree.claims.verdicts import HOLDS

QUALITY = "draft quality"  # the same claim at a better real draft (no mixture draft: it leaks the target in)
KNOBS = "knobs"  # the same claim at knob values other than the tallied reading's (budget, s_d/s_t, K, depth, T)
PROMPTS = "more prompts"  # the interval projected to more units (prompts, trees, seeds), `claims.prompts_reading`
BUDGET = "training budget"  # the same drafts trained longer, nothing else changed
SEED = "training seed"  # the spread over training seeds
GPU = "GPU cost model"  # the runs' own steps priced on a measured GPU cost model
FACTORS = (QUALITY, KNOBS, PROMPTS, BUDGET, SEED, GPU)
NO_BETTER_DRAFT = ("not read: no real draft of the papers' quality (top-1 agreement 0.55–0.85) exists for this pair; "
                   "notebook 11's mixture drafts draw on the target and are shown as readings, not as a diagnosis")


def reading(text: str, verdict: str = "", *, tried: bool = True, where: str = "", **extra: Any) -> dict[str, Any]:
    """One factor's reading: `text` in words, the claim's `verdict` under it ("" where it gives none), `tried`
    (False: the factor was not run, and `text` says why) and `where` (the setting in which it holds, for the
    diagnosis's opening: "m = 8")."""
    return {"text": text, "verdict": verdict, "tried": bool(tried), "where": where, **extra}


def as_reading(value: Any) -> dict[str, Any]:
    """A reading from a summary: a dict as `reading` writes it; plain text (an older summary) is a tried reading
    without a verdict, so it never opens a diagnosis."""
    if isinstance(value, Mapping):
        return reading(str(value.get("text", "")), str(value.get("verdict", "")), tried=bool(value.get("tried", True)),
                       where=str(value.get("where", "")),
                       **{k: v for k, v in value.items() if k not in ("text", "verdict", "tried", "where")})
    return reading(str(value or ""))


def flips(readings: Mapping[str, Any], off_point: bool = False) -> list[str]:
    """The factors whose tried reading makes the claim hold (the more-prompts projection apart): those at the
    paper's point, or with `off_point` those read at a setting the paper does not read."""
    out = []
    for factor, value in readings.items():
        r = as_reading(value)
        if factor != PROMPTS and r["tried"] and r["verdict"] == HOLDS and bool(r.get("off_point")) == off_point:
            out.append(f"{factor} ({r['where']})" if r["where"] else factor)
    return out


def diagnose(readings: Mapping[str, Any], *, at_paper_point: bool = True, point: str = "") -> str:
    """The diagnosis from a claim's readings ({factor: reading}), its opening supported by them (module doc), then
    every reading; `at_paper_point` False (the tallied reading is not at the paper's operating point, `point` says
    what differs) adds that to what was not tried. '' when there is nothing to say."""
    parts = {k: as_reading(v) for k, v in readings.items() if as_reading(v)["text"]}
    if not parts and at_paper_point:
        return ""
    untried = [k for k, r in parts.items() if not r["tried"]]
    if QUALITY not in parts:
        parts[QUALITY] = reading(NO_BETTER_DRAFT, tried=False)
        untried.append(QUALITY)
    if not at_paper_point:
        untried.insert(0, f"the paper's operating point ({point})" if point else "the paper's operating point")
    flipped, elsewhere = flips(parts), flips(parts, off_point=True)
    prompts = parts.get(PROMPTS, {})
    quality = parts[QUALITY]
    tried = [k for k, r in parts.items() if r["tried"]]
    if flipped:
        head = "holds with " + " / ".join(flipped)
    elif elsewhere:
        head = "holds only off the paper's point: " + " / ".join(elsewhere)
    elif prompts.get("tried") and prompts.get("projects") == HOLDS:
        head = prompts["text"].split(":")[0] if prompts["text"].startswith("too few") else "too few prompts"
    elif at_paper_point and quality["tried"] and quality.get("papers_quality"):
        head = "a property of this pair: neither the paper's knobs nor a draft of the papers' quality flips it"
    else:
        head = ("no factor tried flips it" + (f" (tried: {', '.join(tried)})" if tried else "")
                + (f"; not tried: {', '.join(untried)}" if untried else ""))
    return head + ". " + "; ".join(f"{label(k, r)}: {r['text']}" for k, r in parts.items())


def label(factor: str, r: dict[str, Any]) -> str:
    """A factor as a diagnosis names it: the `PROMPTS` projection in its own units ("more training seeds")."""
    return f"more {r['unit']}" if factor == PROMPTS and r.get("unit") not in (None, "", "prompts") else factor


def opening(diagnosis: Optional[str]) -> str:
    """A diagnosis's opening (up to its first '. ')."""
    return (diagnosis or "").split(". ", 1)[0]
