"""`./run_all.sh --set [NOTEBOOK.]KEY=VALUE`: the value (read as YAML) is checked against the parameter's literal type
in the notebook's tagged parameters cell, lists, dicts and strings included, and a wrong type is refused in one line
before any kernel starts (`runner.check_sets`)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from spectree.core.errors import SpectreeError
from spectree.runs import runner

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))

FITS = ["02_tree_strategies.K=3", "02_tree_strategies.budgets=[8, 16]", "03_speed_benchmark.temperatures=[0, 0.6]",
        "03_speed_benchmark.temperatures=[0.0]", "max_new_tokens=4", "pair='123'", "pair=smollm2-vdm",
        "01_train_drafts.ablations={a: 'smollm2-135m-instruct+vdm:abl-vdm'}", "12_retrieval.trees=['chain:k=3']"]
REFUSED = {  # --set → what the refusal says
    "02_tree_strategies.K=abc": "02_tree_strategies declares K: int, got str",
    "02_tree_strategies.K=2.5": "declares K: int, got float",
    "02_tree_strategies.K=true": "declares K: int, got bool",
    "max_new_tokens=[4]": "declares max_new_tokens: int, got list",
    "pair=123": "declares pair: str, got int (the value is read as YAML: quote a string, pair='\"123\"')",
    "03_speed_benchmark.temperatures=0.6": "declares temperatures: list, got float",
    "02_tree_strategies.budgets=[8, x]": "holds int items, got 'x' (str)",
    "03_speed_benchmark.temperatures=[0.6, yes]": "holds float items, got True (bool)",
    "01_train_drafts.ablations=[a]": "declares ablations: dict, got list",
    "01_train_drafts.ablations={a: 3}": "holds str items, got 3 (int)",
}


@pytest.mark.parametrize("item", FITS)
def test_a_value_of_the_parameters_type_is_taken(item):
    runner.check_sets(runner.parse_sets([item]), NOTEBOOKS)


@pytest.mark.parametrize("item", REFUSED)
def test_a_value_of_another_type_is_refused_in_one_line(item):
    with pytest.raises(SpectreeError) as err:
        runner.check_sets(runner.parse_sets([item]), NOTEBOOKS)
    assert REFUSED[item] in str(err.value) and "\n" not in str(err.value)


def test_run_all_refuses_a_wrong_type_before_any_kernel_starts(monkeypatch, capsys):
    def ran(*args, **kwargs):
        raise AssertionError("a notebook ran")

    monkeypatch.setattr(runner, "run_notebook", ran)
    code = runner.cli(["--notebooks", *NOTEBOOKS, "--profile", "quick", "--set", "02_tree_strategies.K=abc"])
    err = capsys.readouterr().err
    assert code == 2 and err == ("run_all.sh: error: --set 02_tree_strategies.K='abc': 02_tree_strategies declares "
                                 "K: int, got str\n"), err


def test_the_script_itself_refuses_it(tmp_path):
    """`./run_all.sh --set 02_tree_strategies.K=abc` as a user types it: exit 2, one line, no kernel."""
    done = subprocess.run(["./run_all.sh", "--set", "02_tree_strategies.K=abc"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "run_all.sh: error: --set 02_tree_strategies.K='abc': 02_tree_strategies declares K: int, got str"], done.stderr
