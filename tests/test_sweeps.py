"""Replay sweeps on a tiny logbook: score / sweep tables, unreplayable specs reported, claims and verdicts,
per-category totals, the C2T helper and the standard spec lists."""
import pandas as pd
import pytest
from helpers import tiny_llama

from spectree.analysis import claims as claims_mod
from spectree.analysis import sweeps
from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay, summarize
from spectree.reports import figures
from spectree.reports.figures import sweeps as plots_sweeps
from spectree.strategies import parse_strategy
from spectree.strategies.c2t_classifier import ClassifierTraining
from spectree.strategies.sequoia import acceptance_vector

PROMPTS = [Prompt("mtbench", "81", "writing", "a"), Prompt("mtbench", "82", "math", "b"),
           Prompt("humaneval", "HumanEval/0", "code", "c"), Prompt("humaneval", "HumanEval/1", "code", "d")]


class TextTemplate:
    """Stands in for a chat template: a few fixed ids that depend on the message text."""

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3, 14, 15, 20 + ord(messages[0]["content"][0]) % 60, 65]


@pytest.fixture(scope="module")
def logbook(tiny_target):
    draft = tiny_llama(seed=1, layers=1)
    cfg = LogConfig(max_new_tokens=12, K=4, d_max=4, beam=16)
    return [log_prompt(tiny_target, draft, TextTemplate(), p, cfg, eos_ids=()) for p in PROMPTS]


def test_score_matches_replay_and_splits_by_dataset(logbook):
    result = sweeps.score(logbook, "kary:b=2,d=2")
    assert result["replayable"] and result["name"] == "kary" and result["params"] == {"b": 2, "d": 2}
    reference = summarize(replay(logbook, parse_strategy("kary:b=2,d=2")))
    assert {k: result[k] for k in reference} == pytest.approx(reference)
    assert result["gamma"] == 6 and result["tau_per_gamma"] == pytest.approx(result["tau"] / 6)
    assert result["alpha"] == pytest.approx(result["tau"] / 2)  # every tree has depth 2
    assert set(result["by_dataset"]) == {"mtbench", "humaneval"}
    assert sum(d["steps"] for d in result["by_dataset"].values()) == result["steps"]


def test_replay_steps_follow_replay_exactly(logbook):
    policy = parse_strategy("eagle2:K=3,d_max=3,N=6")
    steps, reference = sweeps.replay_steps(logbook, policy), replay(logbook, policy)
    assert steps.tau.tolist() == reference.tau.tolist() and steps.gamma.tolist() == reference.gamma.tolist()
    assert (steps.depth <= 3).all() and (steps.depth[steps.gamma > 0] >= 1).all()


def test_sweep_has_one_row_per_spec_and_scope(logbook):
    table = sweeps.sweep(logbook, {"a": ["chain:k=2", "kary:b=2,d=2"], "b": ["chain:k=2"]})
    assert list(table.columns) == sweeps.TABLE_COLUMNS
    assert len(table) == 3 * 3  # three listed specs × (all, mtbench, humaneval)
    assert set(table.dataset) == {"all", "mtbench", "humaneval"}
    chain = table[table.spec == "chain:k=2"]
    assert chain[chain.group == "b"].tau.tolist() == chain[chain.group == "a"].tau.tolist()
    plain = sweeps.sweep(logbook[:1], ["chain:k=2"])
    assert len(plain) == 1 and plain.group.tolist() == [""]  # one dataset: no split rows


def test_unreplayable_specs_are_reported_not_raised(logbook):
    table = sweeps.sweep(logbook, ["kary:b=8,d=2", "chain:k=9", "chain:k=2"])
    bad = table[~table.replayable.astype(bool)]
    assert bad.spec.tolist() == ["kary:b=8,d=2", "chain:k=9"]
    assert bad.reason.str.contains("log with larger").all() and bad.tau.isna().all()
    assert table[table.spec == "chain:k=2"].replayable.all()
    with pytest.raises(SpectreeError):  # a malformed spec is a mistake, not a property of the logbook
        sweeps.score(logbook, "chain:k=abc")


def test_claim_verdicts_and_summary():
    assert [claims_mod.claim("x", "p", 1.0, h)["verdict"] for h in (True, False, None)] == list(claims_mod.VERDICTS)
    assert set(claims_mod.claim("x", "p", 1.0, True)) == {"name", "paper", "ours", "verdict"}
    summary = claims_mod.claims_summary([claims_mod.claim("x", "p", 1, True), claims_mod.claim("y", "p", 2, None)])
    assert summary["claims_tally"] == "1 holds, 0 does not hold, 1 inconclusive" and len(summary["claims"]) == 2


def test_standard_claims_on_a_sweep(logbook):
    specs = sweeps.standard_sweeps(K=4, d_max=4, depth=3, Ns=(3, 6), budgets=(4, 6), widths=(1, 2))
    table = sweeps.sweep(logbook, specs)
    claims = claims_mod.collect_claims(table)
    assert len(claims) == 7 and all(c["verdict"] in claims_mod.VERDICTS for c in claims)
    c2t = claims[0]  # no classifier: no C2T rows, so nothing to compare
    assert c2t["verdict"] == "inconclusive"
    dymax = sweeps.scored(table, "chain_table3", "chain", stop="dymax")
    assert len(dymax) == 1 and dymax.params.iloc[0]["threshold"] == 0.3


def test_per_category_adds_up_to_the_whole_logbook(logbook):
    spec = "pct:ratio=0.1,k=3,d_max=4"
    cats, whole = sweeps.per_category(logbook, spec), sweeps.score(logbook, spec)
    assert set(zip(cats.dataset, cats.category)) == {("mtbench", "writing"), ("mtbench", "math"), ("humaneval", "code")}
    assert cats.steps.sum() == whole["steps"] and cats.tokens.sum() == whole["tokens"]
    assert cats.candidates.sum() == whole["candidates"] and cats.prompts.sum() == len(PROMPTS)
    assert (cats.tau * cats.steps).sum() / cats.steps.sum() == pytest.approx(whole["tau"])


def test_split_logbook_by_dataset(logbook):
    train, held = sweeps.split_logbook(logbook, 0.5)
    assert [lp.prompt.id for lp in train] == ["81", "HumanEval/0"]
    assert [lp.prompt.id for lp in held] == ["82", "HumanEval/1"]
    one, same = sweeps.split_logbook(logbook[:1], 0.5)
    assert one is same  # too few prompts to split: in-sample


def test_train_c2t_saves_a_classifier_the_c2t_spec_loads(logbook, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    path, history = sweeps.train_c2t(logbook, "tiny", ClassifierTraining(epochs=2))
    assert path == tmp_path / "data" / "c2t" / "tiny.safetensors" and path.exists() and len(history) == 2
    specs = sweeps.c2t_specs([0.2, 0.9], topks=(0, 2), K=4, d_max=3, classifier="tiny")
    assert len(specs) == 4
    table = sweeps.sweep(logbook, specs)
    assert table.replayable.all() and (table.tau >= 1).all()


def test_standard_spec_lists_parse(logbook):
    specs = sweeps.standard_sweeps(K=10, d_max=8, depth=6, classifier="tiny", acceptance=acceptance_vector(logbook, 4))
    assert set(specs) == {"c2t_fig4", "chain_table3", "edd_table2", "widths", "budgets", "gunjur"}
    assert len(sweeps.c2t_specs([0.3, 0.5], topks=(0, 15, 20, 25, 30))) == 10
    assert sweeps.budget_specs([16, 15], K=8, d_max=8)[1::2] == ["sequences:k=4,d=4", "sequences:k=3,d=5"]
    for spec in (s for group in specs.values() for s in group if not s.startswith("c2t")):
        parse_strategy(spec)
    assert sweeps.spec_params("c2t:beta=0.5,topk=20,classifier=x-1") == ("c2t", {"beta": 0.5, "topk": 20,
                                                                                 "classifier": "x-1"})


def test_sweep_figures_and_csv(logbook, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    table = sweeps.sweep(logbook, {"g": ["eagle2:K=3,d_max=3,N=3", "eagle2:K=3,d_max=3,N=6", "chain:k=3"]})
    assert plots_sweeps.series(table[table.dataset == "all"]).tolist() == ["EAGLE-2", "EAGLE-2", "chain"]
    assert plots_sweeps.plot_tau_gamma(table).get_xlabel().startswith("τ")
    assert len(plots_sweeps.plotly_tau_gamma(table).data) == 2
    cats = sweeps.per_category(logbook, "chain:k=3")
    assert len(plots_sweeps.plot_per_category(cats).axes) == 2
    assert figures.save_csv(table.drop(columns="params"), "sweep", "nb").read_text().startswith("group,spec")


def test_speed_claims_judge_tree_construction_at_every_temperature():
    from spectree.speed.tables import speed_claims

    greedy = pd.DataFrame({"method": ["HF generate", "AR (our loop)", "chain-5", "VCT"], "speedup": [1.0, 0.9, 0.4, 0.1],
                           "tree_frac": [0.0, 0.001, 0.03, 0.02], "tau": [1.0, 1.0, 1.2, 1.4],
                           "gamma": [0.0, 0.0, 5.0, 363.0], "ms_per_token": [70.0, 75.0, 180.0, 900.0],
                           "tokens_per_s": [14.0, 13.0, 5.5, 1.1]})
    sampled = greedy.assign(tree_frac=[0.0, 0.001, 0.03, 0.061])
    tree = {c["name"]: c for c in speed_claims({0.0: greedy})}["tree construction ≤ 5% of decoding time for every policy"]
    assert tree["verdict"] == "holds"
    tree = {c["name"]: c for c in speed_claims({0.0: greedy, 0.6: sampled})}[tree["name"]]
    assert tree["verdict"] == "does not hold" and tree["ours"] == "max 6.1% (VCT, T = 0.6)"



def test_speed_claims_separate_the_kernels_gain_from_speculation():
    from spectree.speed.tables import speed_claims

    t = pd.DataFrame({"method": ["HF generate", "HF generate, packed kernels", "AR (our loop)", "chain-2"],
                      "speedup": [1.0, 1.18, 1.13, 1.31], "speedup_same_kernels": [0.85, 1.0, 0.96, 1.11],
                      "tree_frac": [0.0, 0.0, 0.001, 0.02], "tau": [1.0, 1.0, 1.0, 1.5], "gamma": [0.0, 0.0, 0.0, 2.0],
                      "ms_per_token": [55.0, 46.5, 48.8, 42.0], "tokens_per_s": [18.1, 21.5, 20.5, 23.8]})
    claims = {c["name"]: c for c in speed_claims({0.0: t})}
    assert claims["best strategy ≥ 1.3× HF generate (issue goal; paper speedups 2–3× on GPUs)"]["verdict"] == "holds"
    alone = claims["best strategy ≥ 1.3× HF generate on the same packed kernels (speculation alone)"]
    assert alone["verdict"] == "does not hold" and alone["ours"] == "chain-2: 1.11×"
