"""RESULTS.md is rendered from the notebooks' summary.json files: every claim of every notebook with its verdict,
under one header (profile, commit, date, host, total time, pairs, tally); quick and paper runs write only
figures/RESULTS.md, a default run also the repository's RESULTS.md when every notebook's numbers come from this
commit on this host, and nothing is ever carried over from an earlier RESULTS.md. Fixed summaries in a temporary
SPECTREE_HOME, no notebook runs."""
import json
import re
from pathlib import Path

import pytest

from spectree.claims.text import verdict_text
from spectree.core.paths import figures_dir
from spectree.runs import profiles, runner
from spectree.reports import results

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
RUN = {"profile": "quick", "commit": "abc1234", "date": "2000-01-01 00:00 UTC", "host": "Test CPU, AVX2, 2 threads"}
HOST = "Test CPU, AVX2, 2 threads"  # what `results.host_name` says in the runner tests (`no_papermill`)


@pytest.fixture
def workbook(tmp_path, monkeypatch) -> Path:
    """A SPECTREE_HOME with three notebooks' summaries, empty profiles and a hand-written root RESULTS.md."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    (tmp_path / "params").mkdir()
    for profile in profiles.PROFILES:
        (tmp_path / "params" / f"{profile}.yaml").write_text("{}\n")
    for stem, summary in SUMMARIES.items():
        (tmp_path / "figures" / stem).mkdir(parents=True)
        (tmp_path / "figures" / stem / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "RESULTS.md").write_text("from the last default run\n")
    return tmp_path


@pytest.fixture
def no_papermill(monkeypatch):
    """runner.run_notebook without papermill: a notebook with a recorded run (.run.json) of this profile is 'current'
    (as if its inputs were unchanged), any other 'ran' in 3 s and records its run like the real one; `--force`
    reruns."""
    def fake(name, profile, params, force, run=None, kernel=None):
        if not force and results.load_run(Path(name).stem).get("profile") == profile:
            return "current", 0.0
        results.record_run(Path(name).stem, run, 3.0)
        (figures_dir() / Path(name).stem / "report.html").write_text("<html></html>")  # as the export does
        return "ran", 3.0
    monkeypatch.setattr(runner, "run_notebook", fake)
    monkeypatch.setattr(results, "host_name", lambda: HOST)


def recorded(stem: str, seconds: float = 3.0, **differ) -> None:
    """A .run.json of `stem` as a default run of this checkout on this host (`results.stamp`) two days ago would have
    written, with `differ` (commit, host, profile) changed."""
    run = {**results.stamp("default"), "date": "2000-01-01 00:00 UTC", **differ}
    results.record_run(stem, run, seconds)


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


def test_results_are_stamped_once_with_profile_commit_date_host_time_and_pairs(workbook):
    text = results.render(rows(), RUN)
    header = text.split("\n## ")[0].splitlines()
    for line in ("- profile: quick", "- commit: abc1234", "- date: 2000-01-01 00:00 UTC",
                 "- host: Test CPU, AVX2, 2 threads", "- wall time: 9 s (the sum of 3 notebooks' recorded run times)",
                 "- pairs: pair-one, pair-two",
                 # no summary here names a scorecard key: every registered claim reads "not read in this run"
                 "- paper claims (each once, the scorecard): 0 holds, 0 does not hold, 38 inconclusive (38 of them not "
                 "read at the paper's operating point), 0 not testable",
                 "- decisive paper verdicts that repeat on both halves of their units (prompts; seeds where training "
                 "enters): 0 of 0",
                 "- our bars: 0 holds, 0 does not hold, 0 inconclusive, 0 not testable"):
        assert line in header, line
    assert text.count("abc1234") == 1 and text.count("Test CPU") == 1  # said once, not per notebook
    assert "ran in this invocation (3 s)" in text.split("## 02_beta")[1]  # each section keeps its own seconds


def test_the_total_time_is_the_sum_of_the_notebooks_recorded_seconds(workbook):
    """Notebooks current from earlier runs count with the seconds their .run.json recorded, shown in h and min."""
    for stem, seconds in zip(SUMMARIES, (1800.0, 2400.0, 3600.0)):
        recorded(stem, seconds)
    run = results.stamp("default")
    text = results.render(rows("current"), run)
    assert "- wall time: 2 h 10 min (the sum of 3 notebooks' recorded run times)" in text.splitlines()
    assert "current: inputs unchanged since its run (2000-01-01 00:00 UTC, 2400 s)\n" in text.split("## 02_beta")[1]
    recorded("02_beta", 2400.0, commit="0000000", host="Other CPU")  # what differs from the header is said
    assert "current: inputs unchanged since its run (2000-01-01 00:00 UTC, 2400 s; commit 0000000, host Other CPU)" \
        in results.render(rows("current"), run)
    (workbook / "figures" / "04_gamma" / results.RUN_FILE).unlink()
    assert "- wall time: 1 h 10 min (the sum of 2 notebooks' recorded run times; 1 without one)" in \
        results.render(rows("current"), run)
    assert [results.duration(s) for s in (40, 59.4, 90, 3599, 7500)] == ["40 s", "59 s", "2 min", "1 h 00 min",
                                                                       "2 h 05 min"]


def test_the_stamp_names_the_host(workbook):
    """CPU model (`machine.cpu_model`), torch's ISA level and threads."""
    import torch

    from spectree.core import machine

    run = results.stamp("paper")
    assert run["profile"] == "paper" and run["commit"].startswith("unknown")  # a folder without git
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", run["date"])
    assert "device" not in run
    cpu, isa, threads = run["host"].split("; GPU ")[0].rsplit(", ", 2)
    assert cpu == machine.cpu_model() and cpu and "\n" not in cpu
    assert isa == torch.backends.cpu.get_cpu_capability() and threads == f"{torch.get_num_threads()} threads"
    assert ("; GPU " in run["host"]) == torch.cuda.is_available()


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


def test_default_writes_both_results(workbook, no_papermill, capsys):
    """The same page twice: figures/RESULTS.md links each notebook's report, the repository's links no report (the
    reports are ignored by git: a clone would hold none) and says in its header where they are."""
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])
    figures_copy = (workbook / "figures" / "RESULTS.md").read_text()
    root = (workbook / "RESULTS.md").read_text()
    assert "- profile: default" in root and "[report](00_alpha/report.html) — ran" in figures_copy
    assert "report.html)" not in root and "figures/<notebook>/report.html" in root.split("\n## ")[0]
    unlinked = [line.replace("[report](00_alpha/report.html) — ", "").replace("[report](02_beta/report.html) — ", "")
                .replace("[report](04_gamma/report.html) — ", "") for line in figures_copy.splitlines()]
    assert [line for line in root.splitlines() if not line.startswith(("- figures: ", "- summaries "))] == \
        [line for line in unlinked if not line.startswith("- summaries ")]
    # the root file links the summaries' tracked copies, each the summary it was rendered from
    assert "[02_beta](figures/results/summaries/02_beta.json)" in root
    assert json.loads((workbook / "figures" / "results" / "summaries" / "02_beta.json").read_text()) == \
        SUMMARIES["02_beta"]
    assert "chain beats AR" in root and "ran in this invocation (3 s)" in root
    out = capsys.readouterr().out
    assert f"- host: {HOST}" in root.splitlines() and "not updated" not in out
    assert re.search(r"^RESULTS.md's figures: 0 in figures/results/ \(0.0 MB\); README's gallery from this run: "
                     r"python -m spectree.reports.gallery$", out, re.M), out


def test_a_report_is_linked_only_where_it_exists(workbook, no_papermill):
    """figures/RESULTS.md and index.html link a notebook's report.html only while the file is there."""
    runner.main(["--profile", "quick", "--notebooks", *NOTEBOOKS])
    (workbook / "figures" / "02_beta" / "report.html").unlink()
    runner.main(["--profile", "quick", "--notebooks", *NOTEBOOKS])
    text = (workbook / "figures" / "RESULTS.md").read_text()
    assert "[report](00_alpha/report.html)" in text and "02_beta/report.html" not in text
    index = (workbook / "figures" / "index.html").read_text()
    assert 'href="00_alpha/report.html"' in index and "02_beta/report.html" not in index and "<h2>02_beta</h2>" in index


def test_notebooks_not_run_now_are_included_and_marked(workbook, no_papermill):
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])  # every notebook's run is recorded
    runner.main(["--profile", "quick", "--only", "00_alpha", "--notebooks", *NOTEBOOKS])
    text = (workbook / "figures" / "RESULTS.md").read_text()
    sections = dict(zip(re.findall(r"^## (\S+)", text, re.M), re.split(r"^## \S+", text, flags=re.M)[1:]))
    # the scorecard, the notebooks, then the GPU checklist (untested here)
    assert set(sections) == set(SUMMARIES) | {"GPU", "Scorecard:"}
    assert "ran in this invocation" in sections["00_alpha"]
    for stem in ("02_beta", "04_gamma"):
        # its run's date and seconds, and of profile, commit and host what differs from the header: the profile
        assert re.search(r"\*\*not run in this invocation\*\*: numbers from an earlier run "
                         r"\(\d{4}-\d\d-\d\d \d\d:\d\d UTC, 3 s; profile default\)$", sections[stem], re.M), sections[stem]
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


def test_a_resumed_default_run_of_this_commit_on_this_host_writes_the_root_results(workbook, no_papermill, capsys):
    """An interrupted default run that is resumed: the notebooks that finished are current, recorded by this commit
    on this host, and count as this run's; the root file shows every notebook, none marked as from elsewhere."""
    recorded("00_alpha", 1200.0)
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])
    root = (workbook / "RESULTS.md").read_text()
    assert "current: inputs unchanged since its run (2000-01-01 00:00 UTC, 1200 s)" in root.split("## 00_alpha")[1]
    assert "- wall time: 20 min (the sum of 3 notebooks' recorded run times)" in root.splitlines()
    assert "not updated" not in capsys.readouterr().out


@pytest.mark.parametrize("differ, why", [
    ({"commit": "0000000"}, "00_alpha (commit 0000000)"),
    ({"host": "Other CPU, AVX512, 64 threads"}, "00_alpha (host Other CPU, AVX512, 64 threads)"),
    ({"commit": "0000000", "host": "Other CPU, AVX512, 64 threads"},
     "00_alpha (commit 0000000, host Other CPU, AVX512, 64 threads)"),
    ({"host": None}, "00_alpha (host not recorded)"),  # a .run.json from before hosts were recorded
])
def test_a_notebook_from_another_commit_or_host_keeps_the_root_results(workbook, no_papermill, capsys, differ, why):
    """The root RESULTS.md never mixes commits or machines: one current notebook recorded by another commit or on
    another host, and the run writes figures/RESULTS.md only and says in one line which notebook and why."""
    recorded("00_alpha", **differ)
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])
    assert (workbook / "RESULTS.md").read_text() == "from the last default run\n"
    assert "- profile: default" in (workbook / "figures" / "RESULTS.md").read_text()
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if "RESULTS.md not updated" in line]
    assert len(said) == 1 and said[0].endswith(f": {why}"), out
    assert "02_beta" not in said[0] and "04_gamma" not in said[0]  # those ran now
    runner.main(["--profile", "default", "--force", "--notebooks", *NOTEBOOKS])  # all rerun here: written
    assert "- profile: default" in (workbook / "RESULTS.md").read_text()


def test_a_partial_or_unrecorded_default_run_keeps_the_root_results(workbook, no_papermill, capsys):
    """A default run of some notebooks (`--only`) and one whose current notebook has no record of its run leave the
    root file alone, saying so."""
    runner.main(["--profile", "default", "--only", "00_alpha", "--notebooks", *NOTEBOOKS])
    out = capsys.readouterr().out
    assert (workbook / "RESULTS.md").read_text() == "from the last default run\n"
    assert "02_beta (not run in this invocation); 04_gamma (not run in this invocation)" in out
    (workbook / "figures" / "00_alpha" / results.RUN_FILE).unlink()
    assert results.from_another_run([{"notebook": "00_alpha.ipynb", "status": "current", "seconds": 0.0}],
                                    results.stamp("default")) == ["00_alpha (no recorded run)"]
    recorded("00_alpha", profile="quick")
    assert results.from_another_run([{"notebook": "00_alpha.ipynb", "status": "current", "seconds": 0.0}],
                                    results.stamp("default")) == ["00_alpha (profile quick)"]
    runner.main(["--profile", "quick", "--notebooks", *NOTEBOOKS])  # other profiles never say it: no root file
    assert "not updated" not in capsys.readouterr().out


def test_nothing_is_carried_over_from_an_earlier_results_file(workbook, no_papermill):
    """Sections of notebooks this checkout has no numbers of are never copied from the file being replaced: the
    root RESULTS.md shows this run's notebooks only, figures/RESULTS.md leaves out notebooks never run here."""
    old = ("# Results\n\n- profile: default\n- commit: f3cfe36\n\n## 00_alpha\n\nold alpha numbers\n\n"
           "## 99_gone\n\n*Carried over from the previous RESULTS.md*\n\n| old claim | x | y | **holds** | r |\n")
    (workbook / "RESULTS.md").write_text(old)
    (workbook / "figures").joinpath("RESULTS.md").write_text(old.replace("](figures/", "]("))
    notebooks = [*NOTEBOOKS, "99_gone.ipynb"]
    for stem in ("02_beta", "04_gamma"):
        for f in (workbook / "figures" / stem).iterdir():
            f.unlink()
    runner.main(["--profile", "default", "--only", "00_alpha", "--notebooks", *notebooks])
    assert (workbook / "RESULTS.md").read_text() == old  # not this commit's numbers throughout: left alone
    figures_copy = (workbook / "figures" / "RESULTS.md").read_text()
    assert re.findall(r"^## (.+)$", figures_copy, re.M) == ["Scorecard: each paper claim once", "00_alpha",
                                                            "GPU checklist"]
    assert not re.search("carried|old claim|old alpha|f3cfe36", figures_copy, re.I)
    # 00_alpha's claim has no scorecard key: not tallied, listed apart
    assert "- paper claims (each once, the scorecard): 0 holds, 0 does not hold, 38 inconclusive" in figures_copy
    assert "Readings without a scorecard key (not tallied): chain beats AR (00_alpha): does not hold" in figures_copy
    runner.main(["--profile", "default", "--notebooks", *NOTEBOOKS])  # 02, 04 now run without a summary
    root = (workbook / "RESULTS.md").read_text()
    assert re.findall(r"^## (.+)$", root, re.M) == ["Scorecard: each paper claim once", "00_alpha", "02_beta",
                                                    "04_gamma", "GPU checklist"]
    assert not re.search("carried|old claim|old alpha|f3cfe36|99_gone", root, re.I)
    assert root.split("## 02_beta")[1].split("##")[0].count("No summary.json.") == 1
    for gone in ("CARRIED", "sections", "_carried"):
        assert not hasattr(results, gone)


def test_a_default_run_with_overrides_keeps_the_root_results_and_says_them(workbook, no_papermill, capsys):
    """`--set` (or `--pair`) makes a default run someone's own, not the reference: its header names the overrides,
    only figures/RESULTS.md is written, and the one line says why; the same run without them writes the root file."""
    (workbook / "notebooks").mkdir()
    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["max_new_tokens: int = 64\n"],
            "outputs": [], "execution_count": None}
    (workbook / "notebooks" / "00_alpha.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {},
                                                                       "nbformat": 4, "nbformat_minor": 5}))
    runner.main(["--profile", "default", "--force", "--set", "max_new_tokens=8", "--notebooks", *NOTEBOOKS])
    assert (workbook / "RESULTS.md").read_text() == "from the last default run\n"
    header = (workbook / "figures" / "RESULTS.md").read_text().split("\n## ")[0].splitlines()
    assert "- overrides: `--set max_new_tokens=8`" in header and "- profile: default" in header
    said = [line for line in capsys.readouterr().out.splitlines() if "RESULTS.md not updated" in line]
    assert len(said) == 1 and said[0].endswith(": this invocation's overrides (--set max_new_tokens=8)"), said
    assert results.load_run("00_alpha")["overrides"] == "--set max_new_tokens=8"
    runner.main(["--profile", "default", "--force", "--notebooks", *NOTEBOOKS])
    root = (workbook / "RESULTS.md").read_text()
    assert "- profile: default" in root and "overrides" not in root


def test_a_notebook_that_recorded_an_error_says_so_in_its_section(workbook):
    """A summary's `error` (a cell that caught one, as the explorer's replay once did) is shown at the top of its
    section, never as a clean run."""
    (workbook / "figures" / "04_gamma" / "summary.json").write_text(json.dumps(
        {**SUMMARIES["04_gamma"], "error": "replay: a node at depth 2 was not expanded in the logbook"}))
    text = results.render(rows(), RUN)
    section = text.split("## 04_gamma", 1)[1].split("\n## ", 1)[0]
    assert "**This notebook recorded an error**: replay: a node at depth 2 was not expanded in the logbook" in section
    assert "recorded an error" not in text.split("## 02_beta", 1)[1].split("\n## ", 1)[0]


def test_a_summary_table_renders_no_column_empty_in_every_row():
    """Notebook 03's `projected` was NaN in every row of an unpriced run: RESULTS.md leaves such a column out."""
    from spectree.reports.results import _markdown_table

    rows = [{"method": "HF generate", "speedup": 1.0, "projected": float("nan"), "gone": None},
            {"method": "chain-2", "speedup": 1.6, "projected": "nan", "gone": None}]
    head = _markdown_table("t", rows)[2]
    assert head == "| method | speedup |"
