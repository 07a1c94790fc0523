"""RESULTS.md, rendered from the notebooks' `figures/<notebook>/summary.json`: each notebook's headline numbers and
every claim it judged (paper, ours, verdict, rule), stamped with the profile, commit, date, device and pairs.

Measured numbers are never typed into docs by hand: the runner writes `figures/RESULTS.md` after every run, and
the default profile (the embedded reference run) also writes the repository's `RESULTS.md`; quick and paper runs
never touch that one. A checkout that reran only some notebooks (its figures/ holds no summary of the others)
carries the others' sections over from the file it replaces, marked as such (`render`'s `previous`). The helpers that read a summary (`load_summary`, `headline`, `claims_of`; verdicts as `analysis.claims` words them)
are shared with `figures/index.html` (`reports.runner.write_index`), so both show the same numbers.
"""
from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from spectree.analysis.claims import tally, verdict_text
from spectree.core.paths import atomic_write_text, figures_dir, home
from spectree.reports.gpu_check import STEM as GPU, UNTESTED

REFERENCE_PROFILE = "default"  # the only profile whose run is written to the repository's RESULTS.md
EARLIER = "from an earlier run"  # the runner's status of a notebook not run in this invocation
RUN_FILE = ".run.json"  # figures/<notebook>/.run.json: profile, commit and date of its last successful run
MAX_SHOWN = 120  # longer scalar entries stay in the report, as lists and tables do


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
        if key == "claims" or isinstance(value, (dict, list)) or len(str(value)) > MAX_SHOWN:
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


def device_name() -> str:
    """The accelerator the notebooks' models go to: the CUDA device's name, or "CPU, N threads"."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU, {torch.get_num_threads()} threads"


def stamp(profile: str) -> dict[str, str]:
    """Profile, commit, date (UTC) and device of this run: the header of RESULTS.md and of each `.run.json`."""
    return {"profile": profile, "commit": git_commit() or "unknown (not a git checkout)",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device_name()}


def pairs_of(summaries: list[dict[str, Any]]) -> list[str]:
    """The distinct pairs of the summaries (a `pair` entry, or the list `pairs` of a notebook that scores
    several), in order of first appearance."""
    named = []
    for s in summaries:
        several = s.get("pairs") if isinstance(s.get("pairs"), list) else []
        named += [s.get("pair"), *several]
    return list(dict.fromkeys(str(p) for p in named if p not in (None, "")))


# --- rendering --------------------------------------------------------------------------------------------

def _status(row: dict[str, Any]) -> str:
    """How this notebook's numbers came about, in words (its earlier run's profile, commit and date if known)."""
    run = load_run(Path(row["notebook"]).stem)
    origin = ", ".join(f"{k} {run[k]}" for k in ("profile", "commit", "date") if run.get(k))
    if row["status"] == "ran":
        return f"ran in this invocation ({row['seconds']:.0f} s)"
    if row["status"] == "current":
        return "current: inputs unchanged since its last run" + (f" ({origin})" if origin else "")
    if row["status"] == EARLIER:
        return f"**not run in this invocation**: numbers {EARLIER} ({origin or 'profile unknown'})"
    return str(row["status"])


def tables_of(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The summary's named tables (`tables`: title → rows, each a dict of one row's cells), e.g. notebook 11's
    claims by draft quality; shown on the index page and in RESULTS.md."""
    tables = summary.get("tables")
    return {str(t): [r for r in rows if isinstance(r, dict)] for t, rows in tables.items()
            if isinstance(rows, list)} if isinstance(tables, dict) else {}


def _markdown_table(title: str, rows: list[dict[str, Any]]) -> list[str]:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return ([f"**{title}**", "", "| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows] + [""])


def _claims_table(claims: list[dict[str, Any]]) -> list[str]:
    lines = ["| claim | paper | ours | verdict | rule |", "|---|---|---|---|---|"]
    for c in claims:
        lines.append(f"| {cell(c.get('name'))} | {cell(c.get('paper'))} | {cell(c.get('ours'))} "
                     f"| **{cell(verdict_text(c))}** | {cell(c.get('rule', ''))} |")
    return lines


def sections(text: str) -> dict[str, list[str]]:
    """The '## NAME' sections of a rendered RESULTS.md: NAME → its lines (heading included)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            out[name] = []
        if name is not None:
            out[name].append(line)
    return out


CARRIED = ("*Carried over from the previous RESULTS.md: this checkout has no summary.json of this notebook (run it "
           "to refresh the section).*")


def _carried(lines: list[str]) -> tuple[list[dict[str, str]], list[str]]:
    """The verdicts (as claim dicts) and pairs a carried-over section shows, for the page's tally and pair list."""
    verdicts = [{"verdict": v} for line in lines for v in re.findall(r"\| \*\*(holds|does not hold|inconclusive)"
                                                                   r"[^*|]*\*\* \|", line)]
    pairs = [line.split(": ", 1)[1] for line in lines if line.startswith("- pair: ")]
    return verdicts, pairs


def render(rows: list[dict[str, Any]], run: dict[str, str], links: str = "", previous: str = "") -> str:
    """RESULTS.md for the runner's rows ({"notebook", "status", "seconds"}) under the stamp `run`; `links` is the
    path from the file's folder to figures/ ("" for figures/RESULTS.md, "figures/" for the repository's). A notebook
    without a summary.json (a fresh checkout that reran only some notebooks) keeps its section of `previous` (the
    file being replaced), marked as carried over, with its own status line saying which run made it."""
    summaries = {row["notebook"]: load_summary(Path(row["notebook"]).stem) for row in rows}
    gpu = load_summary(GPU)
    old = sections(previous)
    carried = {row["notebook"]: old[Path(row["notebook"]).stem] for row in rows
               if not summaries[row["notebook"]] and Path(row["notebook"]).stem in old}
    kept = [_carried(lines) for lines in carried.values()]
    head = dict(line[2:].split(": ", 1) for line in previous.split("\n## ", 1)[0].splitlines()
                if line.startswith("- ") and ": " in line)
    then = f"{head.get('profile', '?')} run of commit {head.get('commit', '?')}, {head.get('date', 'date unknown')}"
    everything = [c for s in [*summaries.values(), gpu] for c in claims_of(s)] + [c for v, _ in kept for c in v]
    pairs = list(dict.fromkeys(pairs_of(list(summaries.values())) + [p for _, ps in kept for p in ps]))
    out = ["# Results", "",
           "Generated by `./run_all.sh` (`spectree.reports.results`) from each notebook's `summary.json`; "
           "do not edit by hand.", "",
           f"- profile: {run['profile']}", f"- commit: {run['commit']}", f"- date: {run['date']}",
           f"- device: {run['device']}", f"- pairs: {', '.join(pairs) if pairs else 'none recorded'}",
           f"- claims: {tally(everything)}", ""]
    for row in rows:
        stem = Path(row["notebook"]).stem
        summary = summaries[row["notebook"]]
        if row["notebook"] in carried:
            heading, *body = carried[row["notebook"]]
            body = [line.replace("— ran in this invocation (", f"— ran in the {then} (") for line in body
                    if line != CARRIED]
            while body and not body[0]:
                body.pop(0)
            out += [heading, "", CARRIED, "", *body]
            continue
        if not summary and row["status"] == EARLIER and not load_run(stem):
            continue  # never run here and not in the previous file: nothing to say
        out += [f"## {stem}", "", f"[report]({links}{stem}/report.html) — {_status(row)}", ""]
        if not summary:
            out += ["No summary.json.", ""]
            continue
        facts = headline(summary)
        out += [f"- {key}: {value}" for key, value in facts] + ([""] if facts else [])
        claims = claims_of(summary)
        out += (_claims_table(claims) if claims else ["No claims."]) + [""]
        for title, table in tables_of(summary).items():
            out += _markdown_table(title, table)
    out += ["## GPU checklist", ""]
    if not gpu:
        return "\n".join(out + [UNTESTED, ""])
    run = load_run(GPU)
    out += [f"`scripts/gpu_check.sh` on {run.get('device', 'a CUDA device')}, commit {run.get('commit', '?')}, "
            f"{run.get('date', 'date unknown')}", ""] + [f"- {key}: {value}" for key, value in headline(gpu)]
    return "\n".join(out + [""] + _claims_table(claims_of(gpu)) + [""])


def write_results(rows: list[dict[str, Any]], profile: str, run: Optional[dict[str, str]] = None) -> list[Path]:
    """Write figures/RESULTS.md for every profile and, for the default profile only, the repository's
    RESULTS.md (atomically). Returns the paths written."""
    run = run or stamp(profile)
    written = [figures_dir() / "RESULTS.md"]
    if profile == REFERENCE_PROFILE:
        written.append(home() / "RESULTS.md")
    root_before = written[-1].read_text() if profile == REFERENCE_PROFILE and written[-1].exists() else ""
    for path, links in zip(written, ("", "figures/")):
        before = root_before.replace("](figures/", "](") if links == "" and root_before else \
            path.read_text() if path.exists() else ""
        atomic_write_text(path, render(rows, run, links=links, previous=before))
    return written


def record_run(stem: str, run: dict[str, str], seconds: float) -> Path:
    """figures/<stem>/.run.json after a successful run, so that later RESULTS.md files can say where its numbers
    came from when the notebook is not rerun."""
    path = figures_dir() / stem / RUN_FILE
    atomic_write_text(path, json.dumps({**run, "seconds": round(seconds, 1)}, indent=1) + "\n")
    return path
