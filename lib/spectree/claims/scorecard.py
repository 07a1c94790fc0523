"""The scorecard: each paper claim once, its verdict read at the paper's operating point.

`PAPER_CLAIMS` lists the claims the four papers make that the notebooks read, each with a key. Every notebook
reading of a claim (`claims.claims.claim(..., key=...)`) names that key, the paper's settings it covers (`cell`:
"T = 0.6 (live)") and, where its setting is not the paper's, how it differs (`off_point`). `score` folds the
readings of one claim into one row:

- the **tallied** readings are those at the paper's operating point (no `off_point`); readings of one cell that
  disagree make that cell inconclusive, and the row says which readings disagree; the cells (the paper's settings,
  e.g. its two temperatures) combine as the claim states them — over all of them: it holds where every cell holds,
  does not hold where any does not;
- a claim the paper states over several cells (`PaperClaim.cells`) counts a cell with no reading at the paper's point
  as unknown: the row can still not hold (one cell that does not hold decides), but it cannot hold — a claim the
  paper makes at T = 0 and 0.6 read at 0.6 only is inconclusive, and the row says which cells were not read there;
- with no reading at the paper's point the row is inconclusive, n = 0, and says what differs — unless every reading
  it has is not testable, then it is not testable (an untestable reading off the point cannot become testable on it);
- the bar a reading is scored against where the paper gives none (its `goal`: "ECE ≤ 0.05 (our bar)") travels with
  the row (`goal`), so a verdict such as "would hold from ≈ 51 prompts" shows its target;
- every other reading (another notebook, this machine's knobs, another budget, a mixture draft's) is listed under the
  row as a labelled reading, never tallied.

A decisive row repeats when every tallied reading's verdict repeats on both halves of its units
(`claims.repeated`). Notebook 11's readings by draft quality are labelled readings only: a mixture draft draws on the
target, so it cannot diagnose a claim about the draft's own confidence, and its protocol (budget, positions) is not
the home notebook's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from spectree.claims.diagnosis import diagnose
from spectree.claims.verdicts import (BAR, FAILS, HOLDS, INCONCLUSIVE, NOT_SPLIT, NOT_TESTABLE, REPEATS, UNSTABLE,
                                        VERDICTS)


@dataclass(frozen=True)
class PaperClaim:
    """One claim a paper makes: its key, the paper, where in it (table, figure, section), the claim in a line and the
    operating point the paper reads it at. `confidence`: the claim is about the draft's own confidence (a mixture
    draft moves it by construction). `cells`: the paper's settings the claim spans, each named as its readings name
    their `cell` ("T = 0", "T = 0.6"); a cell without a reading at the paper's point keeps the row from holding."""

    key: str
    paper: str
    where: str
    claim: str
    point: str
    confidence: bool = False
    cells: tuple[str, ...] = ()


C2T, GUNJUR, DYSPEC, EDD = "C2T", "Gunjur et al.", "DySpec", "EDD + PCT"
PAPERS = (C2T, GUNJUR, DYSPEC, EDD)
# Fig. 9/10's point: the paper's classifier; ours has its shape and features, not App. B.2's data (docs/fidelity.md)
C2T_CLASSIFIER = "C2T's 2-layer classifier over (P, H, d), trained on this draft's trees (App. B.2's data differ)"
PAPER_CLAIMS = (
    PaperClaim("c2t-fig2c-high", C2T, "Fig. 2c", "high entropy: the top-1 draft probability under-estimates acceptance",
               "the draft's first layer, entropy bins of the paper", confidence=True),
    PaperClaim("c2t-fig2c-low", C2T, "Fig. 2c", "low entropy: the top-1 draft probability over-estimates acceptance",
               "the draft's first layer, entropy bins of the paper", confidence=True),
    PaperClaim("c2t-table2", C2T, "Table 2", "C2T (no second TopK) keeps EAGLE-2's τ with 75–80% of its γ",
               "TopK 15, d_max 10, β matched to EAGLE-2's τ"),
    PaperClaim("c2t-table4", C2T, "Table 4", "at TopK 10, d_max 6 C2T reaches EAGLE-2's τ with 85% of its γ",
               "TopK 10, d_max 6, β matched to EAGLE-2's τ"),
    PaperClaim("c2t-fig4", C2T, "Fig. 4", "C2T (every second TopK) needs fewer candidates than EAGLE-2 at every τ",
               "TopK 15, d_max 10, β and N swept"),
    PaperClaim("c2t-table3-dyjoint", C2T, "Table 3", "chain mode: at DyMax's γ, DyJoint reaches a higher τ",
               "chains of at most 10 tokens, DyMax 0.3, DyJoint 0.08"),
    PaperClaim("c2t-table3-c2t", C2T, "Table 3", "chain mode: C2T reaches DyJoint's τ with fewer candidates",
               "chains of at most 10 tokens, C2T β 0.85, DyJoint 0.08"),
    PaperClaim("c2t-table3-fixed", C2T, "Table 3", "chain mode: C2T beats fixed chains of the same γ",
               "chains of at most 10 tokens"),
    PaperClaim("c2t-fig10-p", C2T, "Fig. 9/10", "the joint probability P dominates the classifier",
               C2T_CLASSIFIER),
    PaperClaim("c2t-fig10-entropy", C2T, "Fig. 10", "at low P a high entropy raises the classifier's confidence",
               C2T_CLASSIFIER),
    PaperClaim("c2t-fig10-depth", C2T, "Fig. 10", "at low P a shallower depth raises the classifier's confidence",
               C2T_CLASSIFIER),
    PaperClaim("c2t-fig10-depth-high-p", C2T, "Fig. 10", "the depth gap shrinks at high P (surfaces coincide)",
               C2T_CLASSIFIER),
    PaperClaim("gunjur-fig1-grows", GUNJUR, "Fig. 1", "mismatches grow likelier as the draft's entropy grows",
               "draft tokens sampled at T = 0.4", confidence=True),
    PaperClaim("gunjur-fig1-crossover", GUNJUR, "Fig. 1", "mismatch likelier than match above entropy ≈ 1",
               "draft tokens sampled at T = 0.4 (the crossover is GPT-2's / GPT-2-large's)", confidence=True),
    PaperClaim("gunjur-fig2", GUNJUR, "Fig. 2", "dyn width only saves the most time against chain-4",
               "B(H) trees to depth 4, T = 0.4, every row against chain-4"),
    PaperClaim("dyspec-fig2-acceptance", DYSPEC, "Fig. 2 (left)", "acceptance rises with the draft probability",
               "sampled draft tokens (draft at T = 0.6)", confidence=True),
    PaperClaim("dyspec-fig2-correlated", DYSPEC, "Fig. 2 (right)",
               "draft and target probabilities are strongly correlated", "sampled draft tokens (draft at T = 0.6)",
               confidence=True),
    PaperClaim("dyspec-tables12-specinfer", DYSPEC, "Tables 1–2",
               "DySpec accepts more per step than SpecInfer-style trees",
               "budget 64, Alg. 1 uncapped, draft sampled at 0.6, target T = 0 and 0.6", cells=("T = 0", "T = 0.6")),
    PaperClaim("dyspec-tables12-sequoia", DYSPEC, "Tables 1–2",
               "DySpec accepts about as much per step as Sequoia or more",
               "budget 64, Alg. 1 uncapped, draft sampled at 0.6, target T = 0 and 0.6, Sequoia fitted",
               cells=("T = 0", "T = 0.6")),
    PaperClaim("dyspec-table5-fewer", DYSPEC, "Table 5", "DFS order needs fewer non-zero mask blocks",
               "random trees of 256–2048 nodes, blocks of 32"),
    PaperClaim("dyspec-table5-grows", DYSPEC, "Table 5", "the saving grows with tree size",
               "random trees of 256–2048 nodes, blocks of 32"),
    PaperClaim("dyspec-fig9-real", DYSPEC, "Fig. 9", "DFS order needs fewer blocks on real draft trees",
               "real trees after prefixes, blocks of 32"),
    PaperClaim("dyspec-appc-prefix", DYSPEC, "App. C", "a long prefix dilutes the saving",
               "real trees after prefixes, blocks of 32"),
    PaperClaim("dyspec-table5-faster", DYSPEC, "Table 5",
               "attention that skips empty blocks runs faster in DFS order, faster than dense attention",
               "a block-sparse kernel against a dense one, trees of 256–2048 nodes"),
    PaperClaim("dyspec-table5-dense", DYSPEC, "Table 5", "dense attention gains nothing from the order",
               "dense attention kernels, trees of 256–2048 nodes"),
    PaperClaim("edd-table1-tau", EDD, "Table 1", "EDD's chain-5 τ above VDM's",
               "equal training budget, chains of 5, greedy"),
    PaperClaim("edd-agreement", EDD, "§4.3.2", "the encoding makes EDD's draft tokens more accurate than VDM's",
               "equal training budget, every draft position"),
    PaperClaim("edd-table2-alpha", EDD, "Table 2", "PCT's acceptance rate α exceeds EAGLE-2's",
               "s_d/s_t (paper, 7B) 0.037, PCT width 5 depth 10, EAGLE-2 at PCT's τ (Table 2: both τ 3.99)"),
    PaperClaim("edd-half-nodes", EDD, "§4.3.1, Fig. 6", "PCT keeps EAGLE-2's τ with about half its nodes",
               "s_d/s_t (paper, 7B) 0.037, PCT width 5 depth 10, EAGLE-2 at PCT's τ"),
    PaperClaim("edd-table2-tau", EDD, "Table 2", "PCT's τ beats VCT's and CAPE's",
               "s_d/s_t (paper, 7B) 0.037, PCT width 5 depth 10, VCT 3 / 5, CAPE depth 5"),
    PaperClaim("edd-table3-leaf", EDD, "Table 3", "w/o removing leaf nodes keeps τ (PCT's leaf removal costs no τ)",
               "s_d/s_t (paper, 7B) 0.037"),
    PaperClaim("edd-table3-time-gain", EDD, "Table 3", "w/o expected time gain lowers α and τ",
               "s_d/s_t (paper, 7B) 0.037"),
    PaperClaim("edd-table3-encoding", EDD, "Table 3", "w/o the encoding result lowers τ",
               "draft arms trained alike, the base arm as good as the shipped EDD"),
    PaperClaim("edd-table3-kl", EDD, "Table 3", "w/o the KL divergence lowers τ",
               "draft arms trained alike, the base arm as good as the shipped EDD"),
    PaperClaim("edd-table3-random-length", EDD, "Table 3", "w/o the random division length lowers τ",
               "draft arms trained alike, the base arm as good as the shipped EDD"),
    PaperClaim("edd-fig5-layer", EDD, "Fig. 5", "EDD reads its best hidden states at the 4th-to-last layer",
               "draft arms trained alike, the base arm as good as the shipped EDD"),
    PaperClaim("edd-fig3b-calibrated", EDD, "Fig. 3b", "the draft's confidence is calibrated with acceptance",
               "tokens up to the first rejection, 10 bins", confidence=True),
    PaperClaim("edd-pct-path", EDD, "§3.2", "a path's acceptance ≈ the product of its confidences",
               "tokens along the draft's paths", confidence=True),
)
BY_KEY = {c.key: c for c in PAPER_CLAIMS}


def verdict_over(cells: Mapping[str, str]) -> str:
    """A claim over several of the paper's settings (cells), each with its verdict: holds where every cell holds,
    does not hold where any does not, not testable where none can be tested, else inconclusive."""
    verdicts = set(cells.values())
    if not verdicts:
        return INCONCLUSIVE
    return (FAILS if FAILS in verdicts else HOLDS if verdicts == {HOLDS} else
            NOT_TESTABLE if verdicts == {NOT_TESTABLE} else INCONCLUSIVE)


def _label(reading: Mapping[str, Any]) -> str:
    where = [str(reading.get("notebook") or ""), str(reading.get("cell") or ""), str(reading.get("off_point") or "")]
    return ", ".join(w for w in where if w)


def _once(texts: Iterable[str]) -> list[str]:
    """Each text once, in the order first seen, blanks left out."""
    return list(dict.fromkeys(t for t in (str(x).strip() for x in texts) if t))


def _where(readings: Iterable[Mapping[str, Any]]) -> str:
    """What differs from the paper's point in these readings, each phrase once: an `off_point` may join several
    phrases with "; ", and two readings often share some of them, so they are split before they are de-duplicated."""
    return "; ".join(_once(part for r in readings for part in str(r.get("off_point") or "").split("; ")))


def _goal(readings: Iterable[Mapping[str, Any]]) -> str:
    """The bars of ours these readings are scored against (their `goal`), each once; a goal that another one
    extends ("… tables" beside "… tables (98.3%)") is left out."""
    goals = _once(r.get("goal") or "" for r in readings)
    return "; ".join(g for g in goals if not any(o != g and o.startswith(g) for o in goals))


def score(claim: PaperClaim, readings: list[dict[str, Any]], quality: Optional[Mapping[str, Any]] = None
          ) -> dict[str, Any]:
    """One scorecard row from every reading of `claim` (claim dicts, each with the `notebook` it came from) and
    notebook 11's reading by draft quality (`quality`: {"text", "verdict"}; a labelled reading only).

    A cell of `claim.cells` with no reading at the paper's point counts as inconclusive when the cells combine (it
    is listed in `unread_cells`): the row can still not hold, never hold. A row with no reading at the paper's point
    is inconclusive, or not testable where every reading it has is not testable. `goal`: the bar of ours the
    readings the row rests on are scored against (those at the paper's point; with none, every reading's)."""
    tallied = [r for r in readings if not r.get("off_point")]
    cells: dict[str, list[dict[str, Any]]] = {}
    for r in tallied:
        cells.setdefault(str(r.get("cell") or ""), []).append(r)
    verdicts, notes = {}, []
    for cell, group in cells.items():
        seen = {r["verdict"] for r in group}
        verdicts[cell] = next(iter(seen)) if len(seen) == 1 else INCONCLUSIVE
        if len(seen) > 1:
            notes.append("readings disagree at " + (cell or "the paper's point") + ": " + "; ".join(
                f"{r['verdict']} ({_label(r)})" for r in group))
    unread_cells = [c for c in claim.cells if c not in verdicts] if tallied else []
    if tallied:
        verdict = verdict_over({**verdicts, **{c: INCONCLUSIVE for c in unread_cells}})
    else:
        verdict = (NOT_TESTABLE if readings and all(r.get("verdict") == NOT_TESTABLE for r in readings)
                   else INCONCLUSIVE)
    deciding = [r for r in tallied if r["verdict"] == verdict] or tallied  # n of the readings the verdict rests on
    n = min((int(r.get("n") or 0) for r in deciding), default=0)
    repeats = [r.get("repeat") or "" for r in tallied if r.get("verdict") in (HOLDS, FAILS)]
    repeat = ("" if verdict not in (HOLDS, FAILS) else REPEATS if repeats and all(x == REPEATS for x in repeats)
              else UNSTABLE if UNSTABLE in repeats else NOT_SPLIT)
    others = [{"label": _label(r), "verdict": r["verdict"], "n": r.get("n"), "ours": r.get("ours")}
              for r in readings if r.get("off_point")]
    if quality:
        caveat = ("; a mixture draft draws on the target, so this claim about the draft's own confidence moves "
                  "partly by construction" if claim.confidence else "")
        others.append({"label": "draft quality (notebook 11, mixture drafts (1 − λ)·q + λ·p, its own protocol: "
                                f"not a diagnosis{caveat})", "verdict": str(quality.get("verdict") or ""),
                       "n": None, "ours": str(quality.get("text") or "")})
    diagnosis = _diagnosis(claim, verdict, tallied, readings, notes, verdicts, unread_cells)
    first = (tallied or readings or [{}])[0]
    return {"key": claim.key, "paper": claim.paper, "where": claim.where, "claim": claim.claim, "point": claim.point,
            "read": bool(tallied),
            "words": first.get("paper", ""), "ours": "; ".join((f"{r['cell']}: " if r.get("cell") else "")
                                                              + str(r.get("ours")) for r in tallied),
            "goal": _goal(tallied if tallied else readings),
            "verdict": verdict, "n": n, "repeat": repeat, "cells": verdicts, "unread_cells": unread_cells,
            "diagnosis": diagnosis, "readings": others, "sources": sorted({str(r.get("notebook")) for r in readings})}


_PAPERS_POINT = "the paper's point"


def _unread_cells(claim: PaperClaim, readings: list[dict[str, Any]], verdicts: Mapping[str, str],
                  unread: list[str]) -> str:
    """'not read at the paper's operating point at T = 0 (read there only at …); at T = 0.6: holds — …'."""
    where = _where(r for r in readings if str(r.get("cell") or "") in unread)
    read = "; ".join(f"at {c or _PAPERS_POINT}: {v}" for c, v in verdicts.items())
    return (f"not read at the paper's operating point at {', '.join(unread)} ("
            + (f"read there only at {where}" if where else "no reading of it in this run") + ")"
            + (f"; {read}" if read else "")
            + f" — the claim spans {', '.join(claim.cells)}, so a cell not read there cannot count as holding")


def _diagnosis(claim: PaperClaim, verdict: str, tallied: list[dict[str, Any]], readings: list[dict[str, Any]],
               notes: list[str], verdicts: Optional[Mapping[str, str]] = None, unread: Optional[list[str]] = None
               ) -> str:
    """The row's diagnosis: the claim's cells not read at the paper's point, and a disagreement between tallied
    readings, first; with no tallied reading, what differs in every reading (and, where every reading is not
    testable, why); else the tallied readings' own diagnoses (`diagnosis.diagnose` over their readings). Parts are
    joined by " | "."""
    if not tallied:
        where = _where(readings)
        if verdict == NOT_TESTABLE:
            why = "; ".join(_once(str(r.get("rule") or "").split(": ")[0] for r in readings))
            return (f"not read at the paper's operating point ({claim.point}): read only at {where}, where it is not "
                    "testable" + (f": {why}" if why else ""))
        return (f"not read at the paper's operating point ({claim.point}): read only at " + where
                if where else f"not read in this run (the paper's point: {claim.point})")
    if verdict not in (FAILS, INCONCLUSIVE):
        return ""
    parts = [_unread_cells(claim, readings, verdicts or {}, unread)] if unread else []
    if notes:
        return " | ".join(parts + [". ".join(notes)])
    texts = []
    for r in tallied:
        if r.get("verdict") not in (FAILS, INCONCLUSIVE):
            continue
        factors = r.get("readings") if isinstance(r.get("readings"), dict) else {}
        text = diagnose(factors) if factors else (r.get("diagnosis") or "")
        if text:
            texts.append((f"{r.get('cell')}: " if len(tallied) > 1 and r.get("cell") else "") + text)
    return " | ".join(parts + texts)


def scorecard(claims: Iterable[dict[str, Any]], quality: Optional[Mapping[str, Any]] = None
              ) -> list[dict[str, Any]]:
    """Every registered paper claim once, in paper order, from the notebooks' paper-claim readings (each dict with
    its `notebook`) and notebook 11's draft-quality readings by key (`quality`). A reading without a registered key
    is left out here (`unregistered` lists it)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for c in claims:
        if c.get("kind") != BAR and c.get("key") in BY_KEY:
            by_key.setdefault(c["key"], []).append(c)
    return [score(pc, by_key.get(pc.key, []), (quality or {}).get(pc.key)) for pc in PAPER_CLAIMS]


def unregistered(claims: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper-claim readings whose key names no registered claim (an older summary, a claim not yet on the
    scorecard): shown apart, never tallied."""
    return [c for c in claims if c.get("kind") != BAR and c.get("key") not in BY_KEY]


def tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    """{verdict: rows with it}: the scorecard's tally, each claim once."""
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


def unread_count(rows: list[dict[str, Any]]) -> int:
    """Inconclusive rows with no reading at the paper's operating point (n = 0: what differs is in the row); a row
    whose every reading is not testable counts under not testable, not here."""
    return sum(not r["read"] and r["verdict"] == INCONCLUSIVE for r in rows)


def repeat_count(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(decisive rows whose verdict repeats on both halves, decisive rows)."""
    decisive = [r for r in rows if r["verdict"] in (HOLDS, FAILS)]
    return sum(r["repeat"] == REPEATS for r in decisive), len(decisive)
