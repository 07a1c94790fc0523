"""Runs the workbook's notebooks with papermill for a profile, exports one HTML report per notebook and
writes figures/index.html and figures/RESULTS.md (a default-profile run whose every notebook comes from this
commit on this host also the repository's RESULTS.md, otherwise it says in one line why not; `reports.results`).
A notebook is skipped when its inputs (`run_inputs`: notebook, profile parameters, the library's source, the shipped
drafts, package versions, the content of prompt files its parameters name) are those its last successful run
recorded in figures/<notebook>/.inputs.json; otherwise it reruns, saying which inputs changed; `--force` reruns it
anyway. `--pair PAIR` runs every notebook on that pair (its `pair` parameter, or `pairs` = [PAIR]), `--set
[NOTEBOOK.]KEY=VALUE` overrides any parameter; both are part of the parameters a run's manifest records, so a run on
another pair never counts as current. Each kernel runs over IPC rather than TCP (`notebook_kernel`); a profile's
`run_all:` settings (`RunSettings`) may run every notebook in one shared kernel and set the worker processes, and
papermill's warnings about parameters the notebook declares are dropped (`DeclaredParameters`): a run prints its
progress bar, the table of notebooks, where the results are and its slowest cells (every executed cell's seconds in
figures/cell_times.csv: where a profile's time goes). Called by run_all.sh.
"""
from __future__ import annotations

import argparse
import ast
import html
import json
import logging
import time
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.manifest import file_digest, reuse_or_rebuild
from spectree.core.paths import atomic_write_text, data_dir, figures_dir, home
from spectree.claims.text import verdict_text
from spectree.claims.verdicts import BAR
from spectree.runs.notebook_kernel import SharedKernel, kernel_manager_class
from spectree.core.machine import environment
from spectree.runs.profiles import profile_params, run_settings
from spectree.runs.param_types import check_type
from spectree.reports.result_figures import copies_text
from spectree.reports.results import (EARLIER, REFERENCE_PROFILE, claims_of, headline, load_summary, record_run,
                                      shown, stamp, tables_of, write_results)

INPUTS = ".inputs.json"  # figures/<notebook>/.inputs.json: the manifest of its last successful run
PACKAGES = ("torch", "transformers", "numpy")  # the packages whose versions can change a notebook's numbers
PROMPT_PARAMS = ("prompts", "dataset")  # notebook parameters that hold a prompt spec (`dataset` with `n_prompts`)


# notebook parameters `--pair` sets: the pair, and no reference rows or HF assistant (drafts of the shipped
# target: `--set reference_pair=PAIR` or `hf_assistant=PAIR` names one of the user's own)
PAIR_PARAMS = {"pair": lambda pair: pair, "pairs": lambda pair: [pair], "reference_pair": lambda pair: "",
               "hf_assistant": lambda pair: ""}


def notebook_parameters(notebook: Path) -> dict:
    """{name: default} of a notebook's tagged parameters cell (its typed literals `name: type = value`)."""
    return {name: default for name, (_, default) in _parameter_cell(notebook).items()}


def _parameter_cell(notebook: Path) -> dict[str, tuple[ast.expr, object]]:
    """{name: (type annotation, default)} of a notebook's tagged parameters cell."""
    cells = json.loads(notebook.read_text())["cells"]
    cell = next((c for c in cells if c["cell_type"] == "code" and "parameters" in c.get("metadata", {}).get("tags", [])),
                None)
    if cell is None:
        raise SpectreeError(f"{notebook} has no cell tagged 'parameters'")
    tree = ast.parse("".join(cell["source"]))
    return {node.target.id: (node.annotation, ast.literal_eval(node.value)) for node in tree.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def parse_sets(sets: list[str]) -> list[tuple[str | None, str, object]]:
    """`--set` items `[NOTEBOOK.]KEY=VALUE` as (notebook stem or None for every notebook, key, value read as YAML)."""
    out = []
    for item in sets:
        key, eq, value = item.partition("=")
        stem, dot, name = key.rpartition(".")
        if not eq or not name.isidentifier() or (dot and not stem):
            raise SpectreeError(f"--set {item!r}: expected [NOTEBOOK.]KEY=VALUE, e.g. max_new_tokens=8 or "
                                f"02_tree_strategies.K=3")
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as err:
            raise SpectreeError(f"--set {item!r}: the value is not YAML ({str(err).splitlines()[0]})") from None
        out.append((stem or None, name, parsed))
    return out


def notebook_params(name: str, profile_values: dict, pair: str | None = None, sets: list = ()) -> dict:
    """The parameters papermill passes to notebook `name`: the profile's, then `pair` on its pair parameter
    (PAIR_PARAMS), then the `--set` overrides (`parse_sets`) that name this notebook or none. A `--set` of a
    parameter the notebook lacks is refused when it names the notebook, ignored by notebooks otherwise."""
    notebook = home() / "notebooks" / name
    known = notebook_parameters(notebook) if notebook.exists() else {}
    params = dict(profile_values)
    if pair is not None:
        params.update({k: wrap(pair) for k, wrap in PAIR_PARAMS.items() if k in known})
    for stem, key, value in sets:
        if stem is not None and stem != Path(name).stem:
            continue
        if key in known:
            params[key] = value
        elif stem is not None:
            raise SpectreeError(f"--set {stem}.{key}: {name} has no parameter '{key}' (it has {sorted(known)})")
    return params


def check_sets(sets: list, names: list[str]) -> None:
    """Every `--set` names a notebook of this run and a parameter some notebook has, and its value (read as YAML)
    is of that parameter's literal type in each notebook it reaches (`param_types.check_type`), before any notebook
    runs."""
    stems = {Path(n).stem: n for n in names}
    known = {Path(n).stem: _parameter_cell(home() / "notebooks" / n) for n in names
             if (home() / "notebooks" / n).exists()}
    for stem, key, value in sets:
        if stem is not None and stem not in stems:
            raise SpectreeError(f"--set {stem}.{key}: no notebook {stem} in this run (notebooks: {sorted(stems)})")
        where = {stem: known.get(stem, {})} if stem is not None else known
        reached = {s: cell[key] for s, cell in where.items() if key in cell}
        if not reached:
            raise SpectreeError(f"--set {(stem + '.') if stem else ''}{key}: no notebook of this run has a "
                                f"parameter '{key}'")
        for name, (annotation, default) in reached.items():
            check_type(f"--set {(stem + '.') if stem else ''}{key}", value, annotation, default, name)


def run_inputs(notebook: Path, profile: str, params: dict) -> dict:
    """What a notebook run is made from (its manifest): the notebook, the profile and its parameters, the
    library's source and the shipped drafts (a digest each), and the versions of the packages that compute.
    Logbooks, cost models and classifiers are not listed: each keeps its own manifest and is rebuilt or refused
    by the run itself."""
    drafts = sorted(p for pattern in ("*.safetensors", "*.vocab.npy") for p in (data_dir() / "drafts").glob(pattern))
    inputs = {"notebook": file_digest(notebook), "profile": profile, "params": params,
              "library": file_digest(*sorted((home() / "lib" / "spectree").rglob("*.py"))),
              "drafts": file_digest(*drafts), "packages": {name: _version(name) for name in PACKAGES}}
    files = prompt_file_inputs(params)
    return {**inputs, "prompt_files": files} if files else inputs


def prompt_file_inputs(params: dict) -> dict[str, str]:
    """{parameter: `prompts.prompt_set_identity`} for the prompt-spec parameters (PROMPT_PARAMS) that name prompt
    files, whose content the run depends on beyond the spec; {} when none does (so runs on built-in sets keep the
    manifests they had). Paths are read as the notebook reads them, from the repository root."""
    from spectree.prompts import prompt_set_identity

    return {k: prompt_set_identity(v, root=home()) for k, v in params.items()
            if k in PROMPT_PARAMS and isinstance(v, str) and "jsonl:" in v}


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def export_html(executed: Path, report: Path) -> dict:
    """The executed notebook as a self-contained report that works offline (`spectree.export`): plotly
    charts with plotly.js inlined once, widgets drawn from their saved state, no CDN scripts."""
    from spectree.reports.export import export_report

    body, info = export_report(executed)
    atomic_write_text(report, body)
    return info


class DeclaredParameters(logging.Filter):
    """Drops papermill's "Passed unknown parameter: X" for the parameters X the notebook declares. papermill reads
    the parameters cell with its own parser (`papermill.inspection._infer_parameters`), which gives up on a line
    whose string value holds a '=' (`trees: list = ["pct:k=5,d_max=10"]`) and then calls the parameter unknown,
    though it injects it correctly; the runner reads the cell itself (`notebook_parameters`). A parameter the
    notebook really lacks keeps its warning."""

    UNKNOWN = "Passed unknown parameter: "

    def __init__(self, declared: set[str]):
        super().__init__()
        self.declared = set(declared)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.UNKNOWN) and message[len(self.UNKNOWN):] in self.declared)


@contextmanager
def declared_parameters(notebook: Path):
    """`DeclaredParameters` of this notebook on papermill's logger (where it warns) for the duration of its run."""
    logger = logging.getLogger("papermill")
    quiet = DeclaredParameters(set(notebook_parameters(notebook)))
    logger.addFilter(quiet)
    try:
        yield quiet
    finally:
        logger.removeFilter(quiet)


def run_notebook(name: str, profile: str, params: dict, force: bool, run: dict | None = None,
                 kernel: SharedKernel | None = None) -> tuple[str, float]:
    """Run one notebook unless its results are current; returns ("ran" | "current", seconds). `run` (profile,
    commit, date, host: `results.stamp`) is recorded beside a successful run's outputs for later RESULTS.md files.
    `kernel`: run it in that shared kernel (reset first), else in a fresh one."""
    import papermill

    # papermill's parameter-cell parser warns "Unable to parse line" at any line with two '=' — every policy spec
    # (pct:k=5,d_max=10) — though it injects them correctly; the runner reads the cell itself (`notebook_parameters`)
    logging.getLogger("papermill.translators").setLevel(logging.ERROR)
    notebook = home() / "notebooks" / name
    if not notebook.exists():
        raise SpectreeError(f"no notebook {notebook}")
    stem = notebook.stem
    out_dir = figures_dir() / stem
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs, report = out_dir / INPUTS, out_dir / "report.html"
    if force:
        inputs.unlink(missing_ok=True)

    def execute() -> tuple[str, float]:
        start = time.perf_counter()
        executed = out_dir / f"{stem}.ipynb"
        shared = {} if kernel is None else {"km": kernel.km}
        if kernel is not None:
            kernel.reset()
        with declared_parameters(notebook):
            papermill.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name="python3",
                                       cwd=str(home()), progress_bar=False,
                                       kernel_manager_class=kernel_manager_class(), **shared)
        export_html(executed, report)
        seconds = time.perf_counter() - start
        if run is not None:
            record_run(stem, run, seconds)
        (out_dir / ".inputs.sha256").unlink(missing_ok=True)  # the stamp before manifests
        return "ran", seconds

    return reuse_or_rebuild(inputs, run_inputs(notebook, profile, params),
                            lambda: ("current", 0.0) if report.exists() else None, execute)


def cell_times(stems: list[str]) -> list[dict]:
    """Every code cell's seconds in the executed notebooks of `stems` (papermill's per-cell `duration`), slowest
    first: notebook, cell (its index), seconds, and the cell's first line. Where a run's time goes, cell by cell."""
    rows = []
    for stem in stems:
        executed = figures_dir() / stem / f"{stem}.ipynb"
        if not executed.exists():
            continue
        for i, cell in enumerate(json.loads(executed.read_text())["cells"]):
            seconds = cell.get("metadata", {}).get("papermill", {}).get("duration")
            if cell["cell_type"] == "code" and seconds is not None:
                first = next((line.strip() for line in "".join(cell["source"]).splitlines() if line.strip()), "")
                rows.append({"notebook": stem, "cell": i, "seconds": round(float(seconds), 1), "first_line": first})
    return sorted(rows, key=lambda r: -r["seconds"])


def write_cell_times(stems: list[str], top: int = 8) -> list[str]:
    """figures/cell_times.csv of the notebooks this run executed (`cell_times`), and the `top` slowest as lines."""
    import pandas as pd

    rows = cell_times(stems)
    if rows:
        atomic_write_text(figures_dir() / "cell_times.csv", pd.DataFrame(rows).to_csv(index=False))
    return [f"{r['seconds']:>8.1f} s  {r['notebook']} cell {r['cell']}: {r['first_line'][:70]}" for r in rows[:top]]


VERDICT_COLOURS = {"holds": "#1b7f3b", "does not hold": "#b00020", "inconclusive": "#8a6d00", "not testable": "#555"}
STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;font-size:13px}"
         "td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}")


def _headline(numbers: dict) -> str:
    """The scalar entries of a summary (numbers, short texts); tables and lists stay in the report."""
    facts = "".join(f"<li>{html.escape(key)}: {html.escape(value)}</li>" for key, value in headline(numbers))
    return f"<ul>{facts}</ul>"


def _tables(numbers: dict) -> str:
    """The summary's named tables (`results.tables_of`) as HTML tables under their titles."""
    out = []
    for title, rows in tables_of(numbers).items():
        columns = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(shown(r.get(c, '')))}</td>" for c in columns) + "</tr>"
                       for r in rows)
        out.append(f"<h3>{html.escape(title)}</h3><table><tr>{head}</tr>{body}</table>")
    return "".join(out)


def _claims(claims: list) -> str:
    """The claims as HTML tables, the papers' claims' readings (with their diagnosis) apart from our bars: name,
    paper, our bar, ours, verdict (coloured; "inconclusive (n = …)"), rule."""
    out = []
    for title, group, diagnosed in (("paper claims (readings)", [c for c in claims if c.get("kind") != BAR], True),
                                    ("our bars", [c for c in claims if c.get("kind") == BAR], False)):
        if not group:
            continue
        rows = []
        for c in group:
            colour = VERDICT_COLOURS.get(c.get("verdict"), "#000")
            cells = [html.escape(shown(c.get(k))) for k in ("name", "paper", "goal", "ours")]
            rows.append(f"<tr><td>{'</td><td>'.join(cells)}</td><td style='color:{colour}'>"
                        f"<b>{html.escape(verdict_text(c))}</b></td><td>{html.escape(shown(c.get('rule')))}</td>"
                        + (f"<td>{html.escape(shown(c.get('diagnosis')))}</td>" if diagnosed else "") + "</tr>")
        columns = ("claim", "paper", "our bar", "ours", "verdict", "rule") + (("diagnosis",) if diagnosed else ())
        head = "".join(f"<th>{h}</th>" for h in columns)
        out.append(f"<h3>{title}</h3><table><tr>{head}</tr>{''.join(rows)}</table>")
    return "".join(out)


def write_index(rows: list[dict], profile: str) -> Path:
    """figures/index.html: every report with the headline numbers and the claim verdicts of its summary.json."""
    items = []
    for row in rows:
        stem = Path(row["notebook"]).stem
        numbers = load_summary(stem)
        claims = claims_of(numbers)
        linked = (figures_dir() / stem / "report.html").is_file()  # a link only to a report that exists
        title = f'<a href="{stem}/report.html">{html.escape(stem)}</a>' if linked else html.escape(stem)
        items.append(f"<section><h2>{title}</h2>"
                     f"<p>{html.escape(row['status'])} ({row['seconds']:.0f} s)</p>{_headline(numbers)}"
                     f"{_claims(claims)}{_tables(numbers)}</section>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>spectree reports</title><style>{STYLE}</style>"
            f"</head><body><h1>spectree workbook — profile {html.escape(profile)}</h1>"
            f"<p>Also as markdown: <a href='RESULTS.md'>RESULTS.md</a>.</p>{''.join(items)}</body></html>")
    path = figures_dir() / "index.html"
    atomic_write_text(path, page)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_all.sh", description=__doc__)
    parser.add_argument("--notebooks", nargs="+", required=True)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--only", help="run just this notebook (stem or file name)")
    parser.add_argument("--force", action="store_true", help="rerun even if the cached results are current")
    parser.add_argument("--pair", help="run every notebook on this pair: a named pair, a preset of params/pairs.yaml "
                                       "or TARGET+DRAFT (docs/pairs.md); sets each notebook's `pair` (or `pairs`)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="[NOTEBOOK.]KEY=VALUE",
                        help="override a parameter (VALUE read as YAML) of every notebook that has it, or of one "
                             "notebook; repeatable, applied after the profile and --pair")
    args = parser.parse_args(argv)
    params = profile_params(args.profile)
    names = [n for n in args.notebooks if args.only in (None, n, Path(n).stem)]
    if not names:
        raise SpectreeError(f"--only {args.only}: no such notebook in {args.notebooks}")
    sets = parse_sets(args.sets)
    check_sets(sets, names)
    if args.pair is not None:
        from spectree.models.pairs import check_pair_name

        check_pair_name(args.pair)  # one clear error before any notebook runs
    run = stamp(args.profile, " ".join(([f"--pair {args.pair}"] if args.pair is not None else [])
                                       + [f"--set {item}" for item in args.sets]))
    settings = run_settings(args.profile)
    kernel = SharedKernel() if settings.kernel == "shared" else None
    rows = []
    with environment(settings.environment()):  # inherited by every kernel and its workers
        try:
            for name in tqdm(names, desc=f"notebooks ({args.profile})", unit="notebook"):
                values = notebook_params(name, params.get(Path(name).stem, {}), args.pair, sets)
                status, seconds = run_notebook(name, args.profile, values, args.force, run, kernel)
                rows.append({"notebook": name, "status": status, "seconds": seconds})
        finally:
            if kernel is not None:
                kernel.close()
    ran = {r["notebook"] for r in rows}
    earlier = [{"notebook": n, "status": EARLIER, "seconds": 0.0} for n in args.notebooks if n not in ran]
    shown = [r for r in earlier if any((figures_dir() / Path(r["notebook"]).stem / f).exists()
                                       for f in ("report.html", "summary.json"))]
    index = write_index(sorted(rows + shown, key=lambda r: r["notebook"]), args.profile)
    results, others = write_results(sorted(rows + earlier, key=lambda r: r["notebook"]), args.profile, run)
    width = max(len(r["notebook"]) for r in rows) + 2
    print(f"\n{'notebook':<{width}}{'status':<10}{'seconds':>8}")
    for row in rows:
        print(f"{row['notebook']:<{width}}{row['status']:<10}{row['seconds']:>8.1f}")
    print(f"total {sum(r['seconds'] for r in rows):.0f} s; index: {index}; results: {', '.join(map(str, results))}")
    slowest = write_cell_times([Path(r["notebook"]).stem for r in rows if r["status"] == "ran"])
    if slowest:
        print(f"slowest cells (all in {figures_dir() / 'cell_times.csv'}):\n" + "\n".join(slowest))
    if home() / "RESULTS.md" in results:
        print(f"RESULTS.md's figures: {copies_text()}; README's gallery from this run: "
              "python -m spectree.reports.gallery")
    if others:
        print(f"RESULTS.md not updated (a {REFERENCE_PROFILE} run writes it only with the profile's own parameters and "
              f"when every notebook's numbers come from commit {run['commit']} on this host): {'; '.join(others)}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """`main` with a refusal (a bad pair, profile, `--set`) as one line on stderr and exit status 2."""
    import sys

    try:
        return main(argv)
    except SpectreeError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(cli())
