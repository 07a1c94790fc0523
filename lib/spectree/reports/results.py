"""RESULTS.md, rendered from the notebooks' `figures/<notebook>/summary.json`: the scorecard first (each paper claim
once, read at the paper's operating point: `reports.scorecard_text`), then each notebook's headline numbers and every
claim reading it made (paper, ours, verdict, rule; the papers' claims with their diagnosis, our own bars apart), under
one header: profile, commit, date, host (CPU model, ISA, threads; the GPU on CUDA), the run's total time, pairs, the
scorecard's tally (each paper claim once), how many decisive verdicts repeat on both halves, and our bars' tally. The
repository's file links the summaries it was rendered from, copied beside it (`write_summaries`).

Measured numbers are never typed into docs by hand: the runner writes `figures/RESULTS.md` after every run. The
repository's `RESULTS.md` is written only by a default-profile run (the embedded reference run: no `--pair` or
`--set`) in which every notebook's numbers come from this commit on this host: each notebook ran in this
invocation, or is current (its inputs unchanged) with a recorded run (`.run.json`) of the same profile, commit and
host, as after a resumed run. Otherwise (`from_another_run` says which notebooks and why) only figures/RESULTS.md
is written; quick and paper runs never touch the root file. Nothing is carried over from an earlier RESULTS.md.
Each notebook's section shows the paper figures it reproduces with a caption, the paper's reading beside ours
(`reports.result_figures`): the root file shows the compact copies its own run writes into the tracked
figures/results/ and links nothing the repository does not hold; figures/RESULTS.md shows the notebooks' files
and links each report.html that exists.
The helpers that read a summary (`load_summary`, `headline`, `claims_of`; verdicts as `claims.claims` words
them) are shared with `figures/index.html` (`runs.runner.write_index`), so both show the same numbers.
"""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from spectree.claims.text import count, verdict_text
from spectree.claims.verdicts import BAR
from spectree.core.machine import host_name
from spectree.core.paths import atomic_write_text, figures_dir, home
from spectree.reports.result_figures import RESULTS_DIR, copies_text, figure_lines, write_copies
from spectree.reports.scorecard_text import render_scorecard, repeat_line, rows_of, tally_line

REFERENCE_PROFILE = "default"  # the only profile whose run is written to the repository's RESULTS.md
EARLIER = "from an earlier run"  # the runner's status of a notebook not run in this invocation
RUN_FILE = ".run.json"  # figures/<notebook>/.run.json: the stamp (`stamp`) and seconds of its last successful run
SAME_RUN = ("profile", "overrides", "commit", "host")  # what a recorded run shares with this one for the root file
GPU_STEM = "gpu_check"  # figures/gpu_check/: the GPU checklist's JSON files and summary.json (`gpu.gpu_check`)
UNTESTED = ("The GPU path is untested: no run of `scripts/gpu_check.sh` on a CUDA machine is recorded here "
            "(figures/gpu_check/summary.json).")
MAX_SHOWN = 120  # longer scalar entries stay in the report, as lists and tables do
# shown otherwise: a summary's own tallies (RESULTS.md counts each claim once, by the scorecard) and its error
APART = ("paper_claims", "our_bars", "claims_tally", "error")
SUMMARIES = "summaries"  # figures/results/summaries/<notebook>.json: the summaries the repository's file was made from


# --- reading summaries ------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; {} when the file is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def load_summary(stem: str) -> dict[str, Any]:
    """figures/<stem>/summary.json as a dict ({} when the notebook has written none)."""
    return _read_json(figures_dir() / stem / "summary.json")


def load_run(stem: str) -> dict[str, Any]:
    """figures/<stem>/.run.json: what the runner recorded about the notebook's last successful run ({} if none)."""
    return _read_json(figures_dir() / stem / RUN_FILE)


def headline(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The scalar entries of a summary as (key, shown value): numbers and short texts. Claims, tables and lists
    stay in the notebook's report."""
    facts = []
    for key, value in summary.items():
        if key == "claims" or key in APART or isinstance(value, (dict, list)) or len(str(value)) > MAX_SHOWN:
            continue
        facts.append((str(key), f"{value:.4g}" if isinstance(value, float) else str(value)))
    return facts


def claims_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's claim dicts (at least name, paper, ours, verdict; `rule` and `n` when the notebook gave them)."""
    claims = summary.get("claims")
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


def shown(value: Any) -> str:
    """A claim's value as text: floats to 4 significant digits, containers as compact JSON."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "), default=str)
    return "" if value is None else str(value)


def cell(value: Any) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    return " ".join(shown(value).split()).replace("|", "\\|")


# --- the stamp --------------------------------------------------------------------------------------------

def git_commit() -> Optional[str]:
    """`git rev-parse --short HEAD` of the workbook (marked when the work tree has uncommitted changes); None
    outside a git checkout or without git."""
    def git(*args: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", *args], cwd=home(), capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    return commit or None


def stamp(profile: str, overrides: str = "") -> dict[str, str]:
    """Profile, commit, date (UTC) and host of this run: the header of RESULTS.md and of each `.run.json`; with
    `overrides` (the runner's `--pair` / `--set` options as typed) also those: such a run is not the profile's own."""
    return {"profile": profile, **({"overrides": overrides} if overrides else {}),
            "commit": git_commit() or "unknown (not a git checkout)",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": host_name()}


def duration(seconds: float) -> str:
    """A run's length in hours and minutes: "2 h 05 min", "14 min", "40 s" under a minute."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def pairs_of(summaries: list[dict[str, Any]]) -> list[str]:
    """The distinct pairs of the summaries (a `pair` entry, or the list `pairs` of a notebook that scores
    several), in order of first appearance."""
    named = []
    for s in summaries:
        several = s.get("pairs") if isinstance(s.get("pairs"), list) else []
        named += [s.get("pair"), *several]
    return list(dict.fromkeys(str(p) for p in named if p not in (None, "")))


# --- rendering --------------------------------------------------------------------------------------------

def seconds_of(row: dict[str, Any]) -> Optional[float]:
    """How long the run that made this notebook's numbers took: this invocation's for a notebook that ran now, else
    the seconds its `.run.json` recorded (None when there is no record)."""
    if row["status"] == "ran":
        return float(row["seconds"])
    seconds = load_run(Path(row["notebook"]).stem).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def from_another_run(rows: list[dict[str, Any]], run: dict[str, str]) -> list[str]:
    """The notebooks whose numbers do not come from this run's commit on this host, each with why ([] when every
    one does): a notebook qualifies when it ran in this invocation, or is current (inputs unchanged) and its
    `.run.json` records the same profile, commit and host (`SAME_RUN`) as `run`."""
    out = []
    for row in rows:
        stem = Path(row["notebook"]).stem
        if row["status"] == "ran":
            continue
        if row["status"] != "current":
            out.append(f"{stem} (not run in this invocation)")
            continue
        recorded = load_run(stem)
        if not recorded:
            out.append(f"{stem} (no recorded run)")
            continue
        differ = [f"{k} {recorded.get(k) or 'not recorded'}" for k in SAME_RUN if recorded.get(k) != run.get(k)]
        if differ:
            out.append(f"{stem} ({', '.join(differ)})")
    return out


def _status(row: dict[str, Any], run: dict[str, str]) -> str:
    """How this notebook's numbers came about, in words: ran now, or the date and seconds of the earlier run that
    made them and whatever of its profile, commit and host differs from this run's header."""
    recorded = load_run(Path(row["notebook"]).stem)
    seconds = seconds_of(row)
    when = [recorded["date"]] if recorded.get("date") else []
    took = [f"{seconds:.0f} s"] if seconds is not None else []
    differ = [f"{k} {recorded[k]}" for k in SAME_RUN if recorded.get(k) and recorded.get(k) != run.get(k)]
    origin = "; ".join(x for x in (", ".join(when + took), ", ".join(differ)) if x)
    if row["status"] == "ran":
        return f"ran in this invocation ({seconds:.0f} s)"
    if row["status"] == "current":
        return "current: inputs unchanged since its run" + (f" ({origin})" if origin else "")
    if row["status"] == EARLIER:
        return f"**not run in this invocation**: numbers {EARLIER} ({origin or 'no record of that run'})"
    return str(row["status"])


def errors_of(summary: dict[str, Any]) -> list[str]:
    """The line saying a notebook recorded an error (its summary's `error`, e.g. a replay the explorer could not
    make), so that a section never reads as a clean run when a cell caught one; [] without."""
    error = summary.get("error")
    return [f"**This notebook recorded an error**: {' '.join(str(error).split())}", ""] if error else []


def tables_of(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The summary's named tables (`tables`: title → rows, each a dict of one row's cells), e.g. notebook 11's
    claims by draft quality; shown on the index page and in RESULTS.md."""
    tables = summary.get("tables")
    return {str(t): [r for r in rows if isinstance(r, dict)] for t, rows in tables.items()
            if isinstance(rows, list)} if isinstance(tables, dict) else {}


def _empty(value: Any) -> bool:
    """A cell with nothing to show: missing, None, NaN (as JSON writes it: NaN, or the text 'nan') or ''."""
    return value is None or value != value or (isinstance(value, str) and value.strip().lower() in ("", "nan"))


def _markdown_table(title: str, rows: list[dict[str, Any]]) -> list[str]:
    """A summary's table as markdown; a column empty in every row (e.g. a projection no step model priced) is left
    out."""
    columns = [k for k in dict.fromkeys(k for r in rows for k in r) if not all(_empty(r.get(k)) for r in rows)]
    return ([f"**{title}**", "", "| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows] + [""])


def tallies(claims: list[dict[str, Any]]) -> list[str]:
    """The two tallies of a list of claim readings, the papers' apart from our own bars (the GPU checklist's
    section; RESULTS.md's header counts each paper claim once, by the scorecard)."""
    bars = [c for c in claims if c.get("kind") == BAR]
    return [f"paper claims: {count([c for c in claims if c.get('kind') != BAR])}", f"our bars: {count(bars)}"]


def _claims_table(claims: list[dict[str, Any]]) -> list[str]:
    """The paper claims' readings (with the `diagnosis` column) and our bars, as two tables."""
    papers = [c for c in claims if c.get("kind") != BAR]
    bars = [c for c in claims if c.get("kind") == BAR]
    lines = []
    if papers:
        lines += ["**paper claims (readings; the scorecard tallies each claim once)**", "",
                  "| claim | paper | our bar | ours | verdict | rule | diagnosis |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {cell(c.get('name'))} | {cell(c.get('paper'))} | {cell(c.get('goal', ''))} | {cell(c.get('ours'))} "
                  f"| **{cell(verdict_text(c))}** | {cell(c.get('rule', ''))} | {cell(c.get('diagnosis', ''))} |"
                  for c in papers] + [""]
    if bars:
        lines += ["**our bars**", "", "| claim | paper | our bar | ours | verdict | rule |", "|---|---|---|---|---|---|"]
        lines += [f"| {cell(c.get('name'))} | {cell(c.get('paper'))} | {cell(c.get('goal', ''))} | {cell(c.get('ours'))} "
                  f"| **{cell(verdict_text(c))}** | {cell(c.get('rule', ''))} |" for c in bars] + [""]
    return lines


def render(rows: list[dict[str, Any]], run: dict[str, str], root: bool = False) -> str:
    """RESULTS.md for the runner's rows ({"notebook", "status", "seconds"}) under the stamp `run`: figures/RESULTS.md,
    or with `root` the repository's, whose links are only to files the repository holds (the figures' copies in
    figures/results/, `result_figures.write_copies`; never a notebook's report.html, which stays local). Each
    section shows its paper figures with their captions (`result_figures.figure_lines`). Only this checkout's
    summaries are shown: a notebook with none says so (or is left out when it never ran here)."""
    summaries = {row["notebook"]: load_summary(Path(row["notebook"]).stem) for row in rows}
    everything = [c for s in summaries.values() for c in claims_of(s)]  # the GPU checklist tallies its own
    card = rows_of({Path(k).stem: v for k, v in summaries.items()})
    pairs = pairs_of(list(summaries.values()))
    timed = [t for t in map(seconds_of, rows) if t is not None]
    untimed = len(rows) - len(timed)
    total = duration(sum(timed)) + f" (the sum of {len(timed)} notebooks' recorded run times" + \
        (f"; {untimed} without one)" if untimed else ")")
    out = ["# Results", "",
           "Generated by `./run_all.sh` (`spectree.reports.results`) from each notebook's `summary.json`; "
           "do not edit by hand.", "",
           f"- profile: {run['profile']}", *([f"- overrides: `{run['overrides']}`"] if run.get("overrides") else []),
           f"- commit: {run['commit']}", f"- date: {run['date']}",
           f"- host: {run.get('host', 'not recorded')}", f"- wall time: {total}",
           f"- pairs: {', '.join(pairs) if pairs else 'none recorded'}",
           f"- {tally_line(card)}", f"- {repeat_line(card)}",
           f"- our bars: {count([c for c in everything if c.get('kind') == BAR])}", *_figures_note(root),
           *_summaries_note(summaries, root), ""]
    out += render_scorecard(card, {Path(k).stem: v for k, v in summaries.items()})
    for row in rows:
        stem = Path(row["notebook"]).stem
        summary = summaries[row["notebook"]]
        if not summary and row["status"] == EARLIER and not load_run(stem):
            continue  # never run here: nothing to say
        report = figures_dir() / stem / "report.html"
        link = f"[report]({stem}/report.html) — " if report.is_file() and not root else ""
        out += [f"## {stem}", "", f"{link}{_status(row, run)}", ""]
        out += figure_lines(stem, summary, root)
        if not summary:
            out += ["No summary.json.", ""]
            continue
        out += errors_of(summary)
        facts = headline(summary)
        out += [f"- {key}: {value}" for key, value in facts] + ([""] if facts else [])
        claims = claims_of(summary)
        out += (_claims_table(claims) if claims else ["No claims.", ""])
        for title, table in tables_of(summary).items():
            out += _markdown_table(title, table)
    return "\n".join(out + gpu_section())


def _summaries_note(summaries: dict[str, dict[str, Any]], root: bool) -> list[str]:
    """The header's line on the summaries behind every number: in the repository's file, links to the copies
    `write_summaries` made beside it; elsewhere each notebook's own file."""
    stems = [Path(k).stem for k, v in summaries.items() if v]
    where = f"figures/{RESULTS_DIR}/{SUMMARIES}"
    links = ", ".join(f"[{stem}]({where}/{stem}.json)" if root else f"[{stem}]({stem}/summary.json)" for stem in stems)
    return [f"- summaries (every number and diagnosis here, as JSON): {links}"] if stems else []


def write_summaries(stems: list[str]) -> Path:
    """Copy each notebook's summary.json into figures/results/summaries/<stem>.json (atomically, stale copies of
    notebooks not in `stems` removed): tracked beside the repository's RESULTS.md, so a reader can trace every
    number and diagnosis to the run that made it."""
    folder = figures_dir() / RESULTS_DIR / SUMMARIES
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {f"{stem}.json" for stem in stems if (figures_dir() / stem / "summary.json").is_file()}
    for old in folder.glob("*.json"):
        if old.name not in wanted:
            old.unlink()
    for name in wanted:
        atomic_write_text(folder / name, (figures_dir() / name[:-5] / "summary.json").read_text())
    return folder


def _figures_note(root: bool) -> list[str]:
    """The header's line on figures: in the repository's file, how many copies figures/results/ holds and that each
    notebook's full report exists only where the workbook ran."""
    if not root:
        return []
    return [f"- figures: {copies_text()} from this run, each under its notebook with the paper's reading and "
            "ours; every figure and table of a notebook is in its report, "
            "figures/<notebook>/report.html, written where the workbook runs (`./run_all.sh`)"]


GPU_HEADING = "## GPU checklist"


def gpu_section() -> list[str]:
    """The GPU checklist's section, from figures/gpu_check/summary.json under its own stamp (its machine, commit and
    date, which are not the notebooks'), or the line saying the GPU path is untested."""
    gpu = load_summary(GPU_STEM)
    out = [GPU_HEADING, ""]
    if not gpu:
        return out + [UNTESTED, ""]
    made = gpu.get("run") if isinstance(gpu.get("run"), dict) else {}
    where = made.get("host") or gpu.get("device") or "a CUDA device"
    out += [f"`scripts/gpu_check.sh` on {where}, commit {made.get('commit', '?')}, "
            f"{made.get('date', 'date unknown')}; {'; '.join(tallies(claims_of(gpu)))}", ""]
    out += [f"- {key}: {value}" for key, value in headline(gpu)]
    out += [""] + _claims_table(claims_of(gpu))
    for title, table in tables_of(gpu).items():
        out += _markdown_table(title, table)
    return out


def refresh_gpu_section(path: Path) -> Path:
    """Replace the GPU checklist's section of a rendered RESULTS.md (after a checklist run's files are committed)
    and leave the notebooks' sections, made by their own run, as they are."""
    text = path.read_text()
    head = text.split(f"\n{GPU_HEADING}\n", 1)[0] if f"\n{GPU_HEADING}\n" in text else text.rstrip("\n") + "\n"
    atomic_write_text(path, head.rstrip("\n") + "\n\n" + "\n".join(gpu_section()))
    return path


def write_results(rows: list[dict[str, Any]], profile: str,
                  run: Optional[dict[str, str]] = None) -> tuple[list[Path], list[str]]:
    """Write figures/RESULTS.md for every profile and the repository's RESULTS.md for a default-profile run with the
    profile's own parameters (no `--pair` / `--set`: `stamp`'s overrides) whose every notebook's numbers come from
    this commit on this host (`from_another_run`), both atomically. Returns the paths written and, for a default run
    that left the root file alone, what kept it from being written ([] otherwise)."""
    run = run or stamp(profile)
    written = [figures_dir() / "RESULTS.md"]
    atomic_write_text(written[0], render(rows, run))
    others = []
    if profile == REFERENCE_PROFILE:
        others = [f"this invocation's overrides ({run['overrides']})"] if run.get("overrides") else \
            from_another_run(rows, run)
    if profile == REFERENCE_PROFILE and not others:
        written.append(home() / "RESULTS.md")
        write_copies([Path(row["notebook"]).stem for row in rows])  # first: the root file shows what it wrote
        write_summaries([Path(row["notebook"]).stem for row in rows])
        atomic_write_text(written[1], render(rows, run, root=True))
    return written, others


def record_run(stem: str, run: dict[str, str], seconds: float) -> Path:
    """figures/<stem>/.run.json after a successful run (`run`: the stamp; the seconds it took), so that later
    RESULTS.md files can say where its numbers came from when the notebook is not rerun, and whether they come from
    the same commit and host (`from_another_run`)."""
    path = figures_dir() / stem / RUN_FILE
    atomic_write_text(path, json.dumps({**run, "seconds": round(seconds, 1)}, indent=1) + "\n")
    return path
