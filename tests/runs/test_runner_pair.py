"""`./run_all.sh --pair PAIR` (runner `--pair`, `--set`): every notebook runs on the given pair or says in its
summary why it cannot; the override is part of each notebook's skip-stamp inputs; a bad pair is refused in one line
before any notebook runs. The end-to-end run uses two tiny random Llamas in folders (`helpers.own_pair_folders`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import own_pair_folders

from spectree.core.errors import SpectreeError
from spectree.models.applies import applies
from spectree.runs import runner
from spectree.runs.profiles import profile_params

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
EAGLE_NOTEBOOKS = [n for n in NOTEBOOKS if n[:2] in ("00", "02")]  # a live decode, a logbook


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-pair")
    target, draft = own_pair_folders(root, context=4096)  # byte-level prompts of the built-in sets are long
    return target, draft


def test_pair_overrides_pair_and_pairs_and_is_in_the_skip_stamp(folders):
    pair = f"{folders[0]}+hf:{folders[1]}"
    quick = profile_params("quick")
    p01 = runner.notebook_params("01_train_drafts.ipynb", quick["01_train_drafts"], pair)
    p02 = runner.notebook_params("02_tree_strategies.ipynb", quick["02_tree_strategies"], pair)
    p00 = runner.notebook_params("00_quickstart.ipynb", quick["00_quickstart"], pair)
    assert p01["pairs"] == [pair] and "pair" not in p01
    assert p02["pair"] == pair and p00["pair"] == pair
    assert runner.notebook_params("02_tree_strategies.ipynb", quick["02_tree_strategies"]) == quick["02_tree_strategies"]
    for speed in ("03_speed_benchmark", "11_draft_quality"):  # no reference rows of the shipped pair
        assert quick[speed]["reference_pair"] == "smollm2-edd"
        assert runner.notebook_params(f"{speed}.ipynb", quick[speed], pair)["reference_pair"] == ""
        mine = runner.notebook_params(f"{speed}.ipynb", quick[speed], pair, runner.parse_sets([f"reference_pair={pair}"]))
        assert mine["reference_pair"] == pair
    nb = ROOT / "notebooks" / "02_tree_strategies.ipynb"
    assert runner.run_inputs(nb, "quick", p02) != runner.run_inputs(nb, "quick", quick["02_tree_strategies"])


def test_set_overrides_one_notebook_or_every_notebook_that_has_the_parameter():
    sets = runner.parse_sets(["max_new_tokens=4", "02_tree_strategies.K=3", "03_speed_benchmark.temperatures=[0.0]"])
    assert sets == [(None, "max_new_tokens", 4), ("02_tree_strategies", "K", 3),
                    ("03_speed_benchmark", "temperatures", [0.0])]
    p02 = runner.notebook_params("02_tree_strategies.ipynb", {"K": 5}, None, sets)
    assert p02["K"] == 3 and p02["max_new_tokens"] == 4
    assert runner.notebook_params("03_speed_benchmark.ipynb", {}, None, sets) == {"max_new_tokens": 4,
                                                                                  "temperatures": [0.0]}
    runner.check_sets(sets, NOTEBOOKS)
    for bad, message in [(["02_tree_strategies.nope=1"], "no notebook of this run has a parameter 'nope'"),
                         (["99_none.K=1"], "no notebook 99_none in this run"), (["K"], "expected")]:
        with pytest.raises(SpectreeError, match=message):
            runner.check_sets(runner.parse_sets(bad), NOTEBOOKS)


def test_a_bad_pair_is_refused_in_one_line_before_any_notebook_runs(tmp_path, monkeypatch, capsys):
    def ran(*args, **kwargs):
        raise AssertionError("a notebook ran")

    monkeypatch.setattr(runner, "run_notebook", ran)
    for pair in (f"{tmp_path}/nothing+hf:{tmp_path}/nothing", "smollm2-135m-instruct+nope:1"):
        code = runner.cli(["--notebooks", *NOTEBOOKS, "--profile", "quick", "--pair", pair])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("run_all.sh: error: ") and err.count("\n") == 1, err


def test_applies_and_the_draft_plan_of_a_foreign_pair(folders):
    from spectree.analysis.acceptance import draft_plan

    pair = f"{folders[0]}+hf:{folders[1]}"
    assert applies("smollm2-edd", ("smollm2", "trained", "edd"))
    verdict = applies(pair, "edd")
    assert not verdict and "needs an EDD draft" in verdict.why and pair in verdict.why
    plan = draft_plan([pair], {"x": "smollm2-135m-instruct+edd:abl-edd-ce"}, "smollm2-135m-instruct+edd:abl-edd-base",
                      {"EDD": "smollm2-135m-instruct+edd:abl-edd-self", "VDM": "smollm2-vdm"}, train_steps=2)
    assert plan.scored == [pair] and plan.runs == [] and not plan.train and not plan.edd_claims
    assert not plan.ablations and not plan.ablation_base and not plan.equal_budget and len(plan.notes) == 3
    shipped = draft_plan(["smollm2-edd", "smollm2-vdm"], {"x": "smollm2-135m-instruct+edd:abl-edd-ce"}, "", {}, 2)
    assert shipped.train and shipped.edd_claims and shipped.runs == ["smollm2-edd", "smollm2-vdm"]
    assert shipped.ablations == {"x": "smollm2-135m-instruct+edd:abl-edd-ce"}  # an arm read from its card, not scored


def test_a_classifier_of_another_pair_is_not_used(tmp_path, folders):
    import pandas as pd

    from spectree.analysis.surfaces import made_for_another_pair
    from spectree.analysis.token_tables import c2t_classifier_confidence
    from spectree.strategies.c2t import C2TClassifier, save_classifier

    pair = f"{folders[0]}+hf:{folders[1]}"
    assert made_for_another_pair(ROOT / "data/c2t/smollm2-edd.safetensors", pair) == "smollm2-edd"
    assert made_for_another_pair(ROOT / "data/c2t/smollm2-edd.safetensors", "smollm2-edd") is None
    rows = pd.DataFrame({"joint": [0.5], "entropy": [1.0], "entropy_topm": [1.0], "depth": [1]})
    save_classifier(C2TClassifier(), tmp_path / "smollm2-edd.safetensors", card={"pair": "smollm2-edd"})
    conf, why = c2t_classifier_confidence(rows, pair, tmp_path)
    assert conf is None and f"no C2T classifier for pair {pair}" in why
    save_classifier(C2TClassifier(), tmp_path / "target-log-abc.safetensors", card={"pair": pair})
    assert c2t_classifier_confidence(rows, pair, tmp_path)[1] == "target-log-abc"


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("draft, notebooks", [("hf", NOTEBOOKS), ("eagle", EAGLE_NOTEBOOKS)], ids=["hf", "eagle"])
def test_quick_profile_of_every_notebook_on_a_pair_of_folders(folders, draft, notebooks, tmp_path, monkeypatch):
    """The must-show: `./run_all.sh --profile quick --pair TARGET_DIR+hf:DRAFT_DIR` through the runner, in an empty
    SPECTREE_HOME (no shipped classifier or draft to reuse): every notebook writes a summary.json — results, or
    applies=false with why — and RESULTS.md lists the pair. `+eagle:HEAD_DIR` (a head in EAGLE's format) runs
    00 and 02, the two ways a notebook drives a draft (a live lossless decode, as the timed benchmarks do, and a
    logbook); every CLI command, `bench` included, meets every draft kind in tests/test_commands.py."""
    from helpers import eagle_config, eagle_weights, write_head
    from transformers import AutoModelForCausalLM

    from spectree.reports.results import pairs_of

    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    for part in ("notebooks", "params", "lib"):
        (home / part).symlink_to(ROOT / part)
    monkeypatch.setenv("SPECTREE_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "lib"), os.environ.get("PYTHONPATH", "")]))
    if draft == "hf":
        pair = f"{folders[0]}+hf:{folders[1]}"
    else:
        target = AutoModelForCausalLM.from_pretrained(folders[0])
        pair = f"{folders[0]}+eagle:{write_head(tmp_path / 'head', eagle_config(target), eagle_weights(target))}"
    assert runner.main(["--notebooks", *notebooks, "--profile", "quick", "--pair", pair]) == 0
    summaries = {}
    for name in notebooks:
        summary = json.loads((home / "figures" / Path(name).stem / "summary.json").read_text())
        assert summary.get("pair") == pair or summary.get("pairs") == [pair] or summary.get("applies") is False, name
        if summary.get("applies") is False:
            assert summary["why"], name
        summaries[name] = summary
    assert pairs_of(list(summaries.values())) == [pair]
    results = (home / "figures" / "RESULTS.md").read_text()
    assert f"- pairs: {pair}" in results.splitlines()
    assert summaries["00_quickstart.ipynb"]["lossless"] is True
    if "08_classifier_surfaces.ipynb" in summaries:  # no classifier of this pair shipped: 08 trains its own
        assert "trained now" in summaries["08_classifier_surfaces.ipynb"]["source"]
    again = runner.main(["--notebooks", "00_quickstart.ipynb", "--profile", "quick", "--pair", pair])
    assert again == 0 and (home / "figures/00_quickstart/.inputs.json").exists()
