"""Notebooks stay thin papermill notebooks, every one is run by run_all.sh, profiles name real parameters,
and the quick profile runs end to end."""
import ast
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from spectree.runs import profiles

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ANALYSIS_NOTEBOOKS = ("04_entropy_rank", "05_calibration", "06_acceptance_vs_probability", "07_entropy_match")


def code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def parameter_names(path: Path) -> set[str]:
    cell = next(c for c in code_cells(path) if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}


def run_all_notebooks() -> list[str]:
    """The notebooks run_all.sh passes to the runner (its NOTEBOOKS=( ... ) array)."""
    found = re.search(r"^NOTEBOOKS=\((.*?)^\)", (ROOT / "run_all.sh").read_text(), re.S | re.M)
    assert found, "run_all.sh has no NOTEBOOKS=( ... ) array"
    return found.group(1).split()


def test_run_all_runs_exactly_the_notebooks_in_notebooks_folder():
    listed, present = run_all_notebooks(), {p.name for p in NOTEBOOKS}
    assert listed, "run_all.sh lists no notebook"
    assert len(listed) == len(set(listed)), "run_all.sh lists a notebook twice"
    assert not present - set(listed), f"in notebooks/ but not run by run_all.sh: {sorted(present - set(listed))}"
    assert not set(listed) - present, f"run by run_all.sh but missing from notebooks/: {sorted(set(listed) - present)}"


def test_readme_maps_every_notebook_to_what_it_regenerates():
    table = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    for path in NOTEBOOKS:
        assert any(line.startswith(f"| `{path.stem}` |") for line in table), f"README's notebook table lacks {path.stem}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_thin_tagged_and_clean(path):
    cells = code_cells(path)
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in cells), "no tagged parameters cell"
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in cells), "committed with outputs"
    assert sum(len("".join(c["source"]).splitlines()) for c in cells) <= 150
    assert path.name in run_all_notebooks(), "not listed in run_all.sh"
    assert parameter_names(path), "the parameters cell holds no typed literals"


@pytest.mark.parametrize("profile", ["quick", "default", "paper"])
def test_profiles_set_only_existing_parameters(profile):
    params = yaml.safe_load((ROOT / "params" / f"{profile}.yaml").read_text()) or {}
    stems = {p.stem: p for p in NOTEBOOKS}
    for stem, values in params.items():
        if stem == profiles.RUN_KEY:  # the run's own settings
            profiles.run_settings(profile)
            continue
        assert stem in stems, f"{profile}.yaml names a missing notebook {stem}"
        assert set(values) <= parameter_names(stems[stem]), f"{profile}.yaml: unknown parameters for {stem}"


def parameter_defaults(path: Path) -> dict:
    cell = next(c for c in code_cells(path) if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {node.target.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.AnnAssign)}


# notebooks that read one logbook: (the notebook that logs it, its readers, the parameters that key it)
SHARED_LOGBOOKS = [
    ("02_tree_strategies", ("08_classifier_surfaces", "09_block_sparsity", "10_explorer"),
     ("pair", "prompts", "max_new_tokens", "K", "d_max", "beam", "b_env", "d_env")),
    ("04_entropy_rank", ("05_calibration", "06_acceptance_vs_probability", "07_entropy_match"),
     ("pair", "dataset", "n_prompts", "max_new_tokens")),
    ("11_draft_quality", ("13_engine_settings",),  # one mix logbook per λ (each costs a target forward per layer)
     ("pair", "prompts", "max_new_tokens", "K", "d_max", "beam", "b_env", "d_env", "agreements")),
]


@pytest.mark.parametrize("profile", ["quick", "default", "paper"])
@pytest.mark.parametrize("writer, readers, keys", SHARED_LOGBOOKS)
def test_notebooks_reading_one_logbook_share_it(profile, writer, readers, keys):
    """Readers must name the writer's logbook in every profile, or each logs its own (in the default
    profile that cost 10 minutes of a one-sitting run for 09, and 17 for 06)."""
    params = yaml.safe_load((ROOT / "params" / f"{profile}.yaml").read_text()) or {}
    stems = {p.stem: p for p in NOTEBOOKS}

    def logbook_of(stem):
        values = {**parameter_defaults(stems[stem]), **params.get(stem, {})}
        return {k: values.get(k, parameter_defaults(stems[writer])[k]) for k in keys}
    for stem in readers:
        assert logbook_of(stem) == logbook_of(writer), f"{profile}: {stem}"


@pytest.mark.slow
@pytest.mark.e2e
def test_run_all_quick_profile_produces_every_report():
    from spectree.reports.results import cell

    root_results = ROOT / "RESULTS.md"
    before = root_results.read_bytes() if root_results.exists() else None
    subprocess.run(["./run_all.sh", "--profile", "quick", "--force"], cwd=ROOT, check=True)
    index = (ROOT / "figures" / "index.html").read_text()
    results = (ROOT / "figures" / "RESULTS.md").read_text()
    assert "- profile: quick" in results.splitlines()
    for path in NOTEBOOKS:
        out = ROOT / "figures" / path.stem
        assert (out / "report.html").stat().st_size > 1000
        summary = json.loads((out / "summary.json").read_text())
        assert summary
        assert f"{path.stem}/report.html" in index
        assert f"## {path.stem}" in results
        for claim in summary.get("claims", []):  # RESULTS.md lists every claim of every notebook
            assert f"| {cell(claim['name'])} |" in results, (path.stem, claim["name"])
    assert (root_results.read_bytes() if root_results.exists() else None) == before, "quick overwrote RESULTS.md"
    for stem in ("02_tree_strategies", "03_speed_benchmark", "04_entropy_rank", "05_calibration",
                 "06_acceptance_vs_probability", "07_entropy_match", "08_classifier_surfaces", "09_block_sparsity"):
        summary = json.loads((ROOT / "figures" / stem / "summary.json").read_text())
        claims = summary["claims"]
        assert claims and all(c["verdict"] in ("holds", "does not hold", "inconclusive", "not testable") and c["ours"] is not None
                              for c in claims), stem
        assert all({"name", "paper", "ours", "verdict"} <= set(c) for c in claims), stem
        if stem in ANALYSIS_NOTEBOOKS:  # the analysis figures count the logbook tokens they read
            assert summary["tokens"] > 0, stem
    quick = json.loads((ROOT / "figures" / "00_quickstart" / "summary.json").read_text())
    assert quick["lossless"] is True and quick["tokens"] > 0
    for name in ("tree.png", "tree_mask.png"):
        assert (ROOT / "figures" / "00_quickstart" / name).stat().st_size > 1000
