"""Replay sweeps on a tiny logbook: score / sweep tables, unreplayable specs reported, claims (too few prompts),
per-category totals, the C2T helper and the standard spec lists."""
import pytest
from helpers import tiny_llama

from spectree.analysis import sweep_claims as S
from spectree.analysis import sweeps
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay, summarize
from spectree import figures
from spectree.figures import sweeps as plots_sweeps
from spectree.strategies import parse_strategy
from spectree.strategies.chain import Chain
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.static import Kary
from spectree.strategies.c2t import ClassifierTraining
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
    result = sweeps.score(logbook, parse_strategy("kary:b=2,d=2"))
    assert result["replayable"] and result["name"] == "kary" and result["params"] == {"b": 2, "d": 2, "offer": "draws"}
    assert result["spec"] == "kary:d=2"  # the canonical spec: non-default parameters only
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
    table = sweeps.sweep(logbook, {"a": [Chain(k=2), Kary(b=2, d=2)], "b": [Chain(k=2)]})
    assert list(table.columns) == sweeps.TABLE_COLUMNS
    assert len(table) == 3 * 3  # three listed specs × (all, mtbench, humaneval)
    assert set(table.dataset) == {"all", "mtbench", "humaneval"}
    chain = table[table.spec == "chain:k=2"]
    assert chain[chain.group == "b"].tau.tolist() == chain[chain.group == "a"].tau.tolist()
    plain = sweeps.sweep(logbook[:1], [Chain(k=2)])
    assert len(plain) == 1 and plain.group.tolist() == [""]  # one dataset: no split rows


def test_unreplayable_specs_are_reported_not_raised(logbook):
    table = sweeps.sweep(logbook, [Kary(b=8, d=2), Chain(k=9), Chain(k=2)])
    bad = table[~table.replayable.astype(bool)]
    assert bad.spec.tolist() == ["kary:b=8,d=2", "chain:k=9"]
    assert bad.reason.str.contains("log with larger").all() and bad.tau.isna().all()
    assert table[table.spec == "chain:k=2"].replayable.all()


def test_standard_claims_on_a_sweep(logbook):
    specs = sweeps.standard_sweeps(K=4, d_max=4, depth=3, Ns=(3, 6), budgets=(4, 6), widths=(1, 2))
    table = sweeps.sweep(logbook, specs)
    claims = S.collect_claims(table)
    assert len(claims) == 12 and {c["verdict"] for c in claims} == {"inconclusive"}  # 4 prompts: too few to tell
    assert [c["n"] for c in claims[:3]] == [0, 0, 0]  # no classifier: no C2T rows, so nothing to compare
    assert {c["n"] for c in claims[3:]} <= {0, len(PROMPTS)} and claims[3]["n"] == len(PROMPTS)  # DyJoint, DyMax
    assert all(c["key"] for c in claims)  # every claim names its scorecard key
    assert all(c["rule"] for c in claims)
    row = sweeps.scored(table, "chain_table3", "chain", stop="dymax", threshold=0.3).iloc[0]
    assert set(row.by_prompt) == {p.key for p in PROMPTS}
    assert sum(s["steps"] for s in row.by_prompt.values()) == row.steps
    assert sum(s["tau"] for s in row.by_prompt.values()) == pytest.approx(row.tau * row.steps)
    dymax = sweeps.scored(table, "chain_table3", "chain", stop="dymax")
    assert len(dymax) == len(sweeps.DYMAX_THRESHOLDS) and 0.3 in [p["threshold"] for p in dymax.params]


def test_per_category_adds_up_to_the_whole_logbook(logbook):
    policy = parse_strategy("pct:ratio=0.1,k=3,d_max=4")
    cats, whole = sweeps.per_category(logbook, policy), sweeps.score(logbook, policy)
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
    policies = sweeps.c2t_sweep([0.2, 0.9], topks=(0, 2), K=4, d_max=3, classifier="tiny")
    assert len(policies) == 4 and policies[0].spec == "c2t:beta=0.2,K=4,d_max=3,topk=0,classifier=tiny"
    table = sweeps.sweep(logbook, policies)
    assert table.replayable.all() and (table.tau >= 1).all()


def test_standard_sweeps_round_trip_through_their_specs(logbook, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    sweeps.train_c2t(logbook, "tiny", ClassifierTraining(epochs=1))
    groups = sweeps.standard_sweeps(K=10, d_max=8, depth=6, classifier="tiny", acceptance=acceptance_vector(logbook, 4))
    assert set(groups) == {"c2t_fig4", "chain_table3", "edd_table2", "widths", "budgets", "gunjur"}
    assert len(sweeps.c2t_sweep([0.3, 0.5], topks=(0, 15, 20, 25, 30), classifier="tiny")) == 10
    chain = [p.spec for p in groups["chain_table3"]]  # every knob swept, the paper's values among them
    assert [p.k for p in groups["chain_table3"] if p.name == "chain" and p.stop == "none"] == list(range(1, 9))
    assert "chain:k=8,stop=dymax,threshold=0.3" in chain and "chain:k=8,stop=dyjoint,threshold=0.08" in chain
    assert sum(s.startswith("c2t:beta=0.85,K=1") for s in chain) == 1 and sum(s.startswith("c2t") for s in chain) > 5
    edd = [(p.K, p.d_max, p.N) for p in groups["edd_table2"] if p.name == "eagle2"]  # EDD's 10/6/50, the N curve
    assert edd == [(10, 6, n) for n in (10, 20, 40, 50, 60, 80)]
    budget = [p.spec for p in sweeps.budget_sweep([16, 15], K=8, d_max=8)]
    assert [s for s in budget if s.startswith("sequences")] == ["sequences:d=4", "sequences:k=3"]
    assert "dyspec_threshold:t=0.0625,d_max=8" in budget  # DySpec's threshold tree at t = 1/m beside each budget
    assert {"dyspec:m=16,K=16,d_max=8", "dyspec:m=16,d_max=8"} <= set(budget)  # Alg. 1 uncapped and capped at 8
    assert sum(p.spec.startswith("dyspec:m=8,") for p in sweeps.budget_sweep([8], K=8, d_max=8)) == 1  # m ≤ 8: one
    assert "dyspec:K=64,d_max=12" in [p.spec for p in sweeps.budget_sweep([64], d_max=8, dyspec_d_max=12)]
    pct = {p.ratio for p in sweeps.standard_sweeps(pct_ratio_machine=0.2)["edd_table2"] if p.name == "pct"}
    assert pct == {sweeps.PCT_RATIO_PAPER, 0.2} and sweeps.PCT_RATIO_PAPER == 0.037  # EDD l.1388, and this machine's
    assert {p.ratio for p in groups["widths"] if p.name == "pct"} == {0.037}  # Fig. 6 at the paper's
    for policy in (p for group in groups.values() for p in group):  # every policy prints the spec that rebuilds it
        assert parse_strategy(policy.spec) == policy, policy.spec


def test_sweep_figures_and_csv(logbook, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    table = sweeps.sweep(logbook, {"g": [Eagle2(K=3, d_max=3, N=3), Eagle2(K=3, d_max=3, N=6), Chain(k=3)]})
    assert plots_sweeps.series(table[table.dataset == "all"]).tolist() == ["EAGLE-2", "EAGLE-2", "chain"]
    assert plots_sweeps.plot_tau_gamma(table).get_xlabel().startswith("τ")
    assert len(plots_sweeps.plotly_tau_gamma(table).data) == 2
    cats = sweeps.per_category(logbook, Chain(k=3))
    assert len(plots_sweeps.plot_per_category(cats).axes) == 2
    assert figures.save_csv(table.drop(columns="params"), "sweep", "nb").read_text().startswith("group,spec")
