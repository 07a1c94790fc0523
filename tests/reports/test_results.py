"""RESULTS.md is rendered from the notebooks' summary.json files: every claim of every notebook with its verdict,
stamped with profile, commit, date, device and pairs; quick and paper runs write only figures/RESULTS.md, the
default profile also the repository's RESULTS.md. Fixed summaries in a temporary SPECTREE_HOME, no notebook runs."""
import json
import re
from pathlib import Path

import pytest

from spectree.analysis.claims import verdict_text
from spectree.reports import results, runner

NOTEBOOKS = ["00_alpha.ipynb", "02_beta.ipynb", "04_gamma.ipynb"]
SUMMARIES = {
    "00_alpha": {"pair": "pair-one", "tokens": 12, "tau": 1.53125, "lossless": True, "per_step": [1, 2, 3],
                 "claims": [{"name": "chain beats AR", "paper": "1.3x", "ours": 1.1, "verdict": "does not hold"}]},
    "02_beta": {"pair": "pair-two", "prompts": "mtbench:8", "table": {"a": 1},
                "claims": [{"name": "EAGLE-2 | rerank", "paper": "τ up", "ours": {"tau": 2.1}, "verdict": "holds",
                            "rule": "95% interval of Δτ > 0", "n": 16},
                           {"name": "C2T saves γ", "paper": "75-80%", "ours": "70%", "verdict": "inconclusive",
                            "rule": "paired bootstrap over prompts, n ≥ 8 prompts", "n": 5},
                           {"name": "old-style claim", "paper": "x", "ours": None, "verdict": "inconclusive"}]},
    "04_gamma": {"pair": "pair-one", "temperature": 0.0,
                 "tables": {"claims by draft quality": [{"claim": "D claim", "agreement 0.40": "does not hold",
                                                         "agreement 0.75": "holds", "holds from": "0.75"}]}},
}
RUN = {"profile": "quick", "commit": "abc1234", "date": "2000-01-01 00:00 UTC", "device": "CPU, 2 threads"}


@pytest.fixture
def workbook(tmp_path, monkeypatch) -> Path:
    """A SPECTREE_HOME with three notebooks' summaries, empty profiles and a hand-written root RESULTS.md."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    (tmp_path / "params").mkdir()
    for profile in runner.PROFILES:
        (tmp_path / "params" / f"{profile}.yaml").write_text("{}\n")
    for stem, summary in SUMMARIES.items():
        (tmp_path / "figures" / stem).mkdir(parents=True)
        (tmp_path / "figures" / stem / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "RESULTS.md").write_text("from the last default run\n")
    return tmp_path


@pytest.fixture
def no_papermill(monkeypatch):
    """runner.run_notebook without papermill: every notebook 'ran' in 3 s and records its run like the real one."""
    def fake(name, profile, params, force, run=None):
        results.record_run(Path(name).stem, run, 3.0)
        return "ran", 3.0
    monkeypatch.setattr(runner, "run_notebook", fake)
    monkeypatch.setattr(results, "device_name", lambda: "CPU, 2 threads")


def rows(status: str = "ran") -> list[dict]:
    return [{"notebook": n, "status": status, "seconds": 3.0} for n in NOTEBOOKS]


def claim_line(text: str, claim: dict) -> str:
    """The one table row of RESULTS.md that holds this claim's name."""
    found = [line for line in text.splitlines() if line.startswith(f"| {results.cell(claim['name'])} |")]
    assert len(found) == 1, f"claim {claim['name']!r} appears {len(found)} times"
    return found[0]


def test_every_claim_of_every_notebook_appears_with_its_verdict_and_rule(workbook):
    text = results.render(rows(), RUN)
    for stem, summary in SUMMARIES.items():
        assert f"## {stem}" in text
        for claim in summary.get("claims", []):
            line = claim_line(text, claim)
            assert f"| **{verdict_text(claim)}** |" in line
            assert results.cell(claim["paper"]) in line and results.cell(claim["ours"]) in line
            assert claim.get("rule", "") in line
    assert "| **inconclusive (n = 5)** |" in text  # an inconclusive claim says the n it rests on
    assert "(n = None)" not in text  # ... and one without n says nothing of it
    assert "\\|" in claim_line(text, SUMMARIES["02_beta"]["claims"][0])  # a pipe in a name keeps the table intact


def test_headline_numbers_are_the_scalars_the_index_shows(workbook):
    text = results.render(rows(), RUN)
    assert "- tau: 1.531" in text and "- lossless: True" in text and "- prompts: mtbench:8" in text
    assert "per_step" not in text and "table" not in text.split("## 02_beta")[1].split("|")[0]
    runner.write_index(rows(), "quick")
    index = (workbook / "figures" / "index.html").read_text()
    assert "tau: 1.531" in index and "inconclusive (n = 5)" in index and "95% interval of Δτ &gt; 0" in index


def test_results_are_stamped_with_profile_commit_date_device_and_pairs(workbook):
    text = results.render(rows(), RUN)
    for line in ("- profile: quick", "- commit: abc1234", "- date: 2000-01-01 00:00 UTC", "- device: CPU, 2 threads",
                 "- pairs: pair-one, pair-two", "- claims: 1 holds, 1 does not hold, 2 inconclusive"):
        assert line in text.splitlines(), line


def test_the_stamp_tolerates_a_folder_without_git(workbook):
    run = results.stamp("paper")
    assert run["profile"] == "paper" and run["commit"].startswith("unknown")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", run["date"])
    assert run["device"]


def test_the_stamp_names_this_checkouts_commit(monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(Path(__file__).resolve().parents[2]))
    commit = results.git_commit()
    if commit is None:
        pytest.skip("not a git checkout")
    assert re.match(r"[0-9a-f]{4,}( \(with uncommitted changes\))?$", commit)


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_quick_and_paper_write_figures_results_and_leave_the_root_one(workbook, no_papermill, profile):
    runner.main(["--profile", profile, "--notebooks", *NOTEBOOKS])
    text = (workbook / "figures" / "RESULTS.md").read_text()
    assert f"- profile: {profile}" in text and "[report](00_alpha/report.html)" in text
    assert all(c["name"] in text for s in SUMMARIES.values() for c in s.get("claims", []) if "|" not in c["name"])
    assert (workbook / "RESULTS.md").read_text() == "from the last default run\n"


def test_default_writes_both_results(workbook, no_papermill):
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])
    figures_copy = (workbook / "figures" / "RESULTS.md").read_text()
    root = (workbook / "RESULTS.md").read_text()
    assert "- profile: default" in root and "[report](figures/00_alpha/report.html)" in root
    assert root.replace("](figures/", "](") == figures_copy  # the same page, links from the root
    assert "chain beats AR" in root and "ran in this invocation (3 s)" in root


def test_notebooks_not_run_now_are_included_and_marked(workbook, no_papermill):
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])  # every notebook's run is recorded
    runner.main(["--profile", "quick", "--only", "00_alpha", "--notebooks", *NOTEBOOKS])
    text = (workbook / "figures" / "RESULTS.md").read_text()
    sections = dict(zip(re.findall(r"^## (\S+)", text, re.M), re.split(r"^## \S+", text, flags=re.M)[1:]))
    assert set(sections) == set(SUMMARIES) | {"GPU"}  # the notebooks, then the GPU checklist (untested here)
    assert "ran in this invocation" in sections["00_alpha"]
    for stem in ("02_beta", "04_gamma"):
        assert "not run in this invocation" in sections[stem] and "profile default" in sections[stem]
    assert "EAGLE-2 \\| rerank" in sections["02_beta"]
    assert "from the last default run" not in (workbook / "RESULTS.md").read_text()  # written by the default run


def test_named_tables_of_a_summary_are_shown_in_results_and_on_the_index(workbook):
    """Notebook 11's claims-by-draft-quality table (a summary's `tables`) reaches RESULTS.md and index.html."""
    text = results.render(rows(), RUN).split("## 04_gamma")[1]
    assert "**claims by draft quality**" in text
    assert "| claim | agreement 0.40 | agreement 0.75 | holds from |" in text
    assert "| D claim | does not hold | holds | 0.75 |" in text
    runner.write_index(rows(), "quick")
    index = (workbook / "figures" / "index.html").read_text()
    assert "<h3>claims by draft quality</h3>" in index and "<td>0.75</td>" in index


def test_a_fresh_checkout_rerunning_one_notebook_keeps_the_other_sections(workbook, no_papermill):
    """A default run in a checkout with only some summaries (a fresh clone that reran one notebook) keeps the
    previous RESULTS.md's sections of the others, marked as carried over, their verdicts in the tally."""
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])
    before = (workbook / "RESULTS.md").read_text()
    commit, date = (re.search(rf"^- {k}: (.+)$", before, re.M).group(1) for k in ("commit", "date"))
    for stem in ("02_beta", "04_gamma"):
        for f in (workbook / "figures" / stem).iterdir():
            f.unlink()
    runner.main(["--profile", "default", "--only", "00_alpha", "--notebooks", *NOTEBOOKS])
    root = (workbook / "RESULTS.md").read_text()
    old, new = results.sections(before), results.sections(root)
    assert list(new) == list(old)
    for stem in ("02_beta", "04_gamma"):
        assert results.CARRIED in new[stem]
        then = [x.replace("ran in this invocation", f"ran in the default run of commit {commit}, {date}")
                for x in old[stem] if x]  # its status line no longer claims this invocation
        assert [x for x in new[stem] if x and x != results.CARRIED] == then
    assert "- claims: 1 holds, 1 does not hold, 2 inconclusive" in root  # 02_beta's verdicts still counted
    assert "- pairs: pair-one, pair-two" in root
    figures_copy = (workbook / "figures" / "RESULTS.md").read_text()
    assert root.replace("](figures/", "](") == figures_copy
    runner.main(["--profile", "default", "--only", "00_alpha", "--notebooks", *NOTEBOOKS])  # carried twice: once marked
    assert (workbook / "RESULTS.md").read_text().count(results.CARRIED) == 2
