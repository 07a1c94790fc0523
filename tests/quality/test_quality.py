"""The draft-quality sweep's logic (`quality.quality`, `projection`, notebook 11) on fixed inputs whose answers
are known: the pair of a λ, where each claim starts to hold and its reading by draft quality, the agreement a speedup
needs, the projection check over several runs, the tables at T of every λ from one walk, and one λ's whole
measurement on a tiny logbook (every claim of notebooks 02 and 04–07, C2T trained apart from what it scores); the mix
draft itself is tested in tests/drafts/test_mix.py and on SmolLM2 in tests/test_real_model.py."""
import math
from dataclasses import replace

import pandas as pd
import pytest

from spectree.claims.verdicts import FAILS, HOLDS, INCONCLUSIVE
from spectree.core.errors import SpectreeError
from spectree import projection
from spectree.quality import quality, quality_readings


def test_the_pair_of_each_weight():
    assert quality.mix_pair("smollm2-edd", 0.0) == "smollm2-edd"  # λ = 0 is the real draft: its own logbooks
    assert quality.mix_pair("smollm2-edd", 0.6) == "smollm2-135m-instruct+mix:0.6:edd:smollm2-edd"
    with pytest.raises(SpectreeError, match="0 <= λ <= 1"):
        quality.mix_pair("smollm2-edd", 1.2)
    with pytest.raises(SpectreeError, match="already has a mix draft"):
        quality.mix_pair("smollm2-135m-instruct+mix:0.5:edd:smollm2-edd", 0.6)


def q(weight, agreement, verdicts) -> quality.Quality:
    """One λ's readings: each claim named and keyed by its name (the scorecard key of a real claim)."""
    return quality.Quality(weight, f"log{weight}", {"agreement": agreement}, [
        {"name": name, "key": name, "verdict": v} for name, v in verdicts.items()], {}, pd.DataFrame())


def test_flips_say_from_which_agreement_a_claim_holds():
    results = [q(0.6, 0.7, {"a": HOLDS, "b": HOLDS, "c": FAILS, "d": HOLDS}),
               q(0.0, 0.4, {"a": FAILS, "b": HOLDS, "c": FAILS, "d": HOLDS}),
               q(0.3, 0.5, {"a": INCONCLUSIVE, "b": HOLDS, "c": HOLDS, "d": FAILS, "e": HOLDS})]
    table = quality_readings.flips(results).set_index("claim")
    assert list(table.columns[:3]) == ["agreement 0.40 (λ 0)", "agreement 0.50 (λ 0.3)", "agreement 0.70 (λ 0.6)"]
    assert table.loc["a", "holds from"] == "0.70 (λ 0.6)"  # holds only at the best draft
    assert table.loc["b", "holds from"] == "everywhere"
    assert table.loc["c", "holds from"] == "never in range"  # held at 0.5, not at the best draft
    assert table.loc["d", "holds from"] == "0.70 (λ 0.6)"  # must hold at every higher agreement
    assert table.loc["a", "agreement 0.50 (λ 0.3)"] == INCONCLUSIVE
    assert table.loc["e", "holds from"] == "undecided at the best draft"  # not judged at 0.4 and 0.7
    assert table.loc["e", "agreement 0.70 (λ 0.6)"] == "—"


def test_each_claim_reads_by_draft_quality_by_its_scorecard_key_with_its_verdict_at_the_papers_agreements():
    verdicts = {"from": [INCONCLUSIVE, HOLDS, HOLDS], "never": [FAILS] * 3, "open": [INCONCLUSIVE] * 3,
                "mixed": [INCONCLUSIVE, HOLDS, FAILS], "weak only": [HOLDS, FAILS, FAILS], "always": [HOLDS] * 3,
                "unread": ["—", INCONCLUSIVE, FAILS]}
    results = [q(w, a, {name: vs[i] for name, vs in verdicts.items() if vs[i] != "—"})
               for i, (w, a) in enumerate([(0.0, 0.381), (0.213, 0.602), (0.409, 0.805)])]
    readings = quality_readings.draft_quality(results[::-1])  # any order: read by agreement
    texts = {key: r["text"].split(": ", 1)[1] for key, r in readings.items()}
    assert texts == {
        "from": "holds from agreement 0.60 (λ 0.213) up to 0.81; inconclusive at 0.38",
        "never": "does not hold at any agreement up to 0.81",
        "open": "inconclusive at every agreement up to 0.81",
        "mixed": "holds at 0.60; does not hold at 0.81; inconclusive at 0.38",
        "weak only": "does not hold at 0.60 and 0.81; holds at 0.38",  # the real draft's hold is not the papers'
        "always": "holds at every agreement from 0.38 (λ 0) up to 0.81",
        "unread": "inconclusive at 0.60; does not hold at 0.81"}
    # the verdict at the best draft within the papers' agreements (0.55–0.85): 0.81's
    assert {k: r["verdict"] for k, r in readings.items()} == {
        "from": HOLDS, "never": FAILS, "open": INCONCLUSIVE, "mixed": FAILS, "weak only": FAILS, "always": HOLDS,
        "unread": FAILS}
    low = quality_readings.draft_quality(results[:1])  # λ 0 alone: nothing at the papers' agreements
    assert low["always"] == {"text": "always: not read at the papers' draft quality (agreement 0.55–0.85): holds "
                                     "at 0.38", "verdict": ""}
    table = quality_readings.flips(results).set_index("claim")
    assert table.loc["mixed", "draft quality"] == texts["mixed"]
    assert table.loc["from", "holds from"] == "0.60 (λ 0.213)"
    for r in results:  # a claim these logbooks read off the paper's point says so first
        r.claims.append({"name": "budget", "key": "budget", "verdict": HOLDS, "off_point": "m = 8 (the paper's 64)"})
    assert quality_readings.draft_quality(results)["budget"]["text"] == (
        "budget: at m = 8 (the paper's 64): holds at every agreement from 0.38 (λ 0) up to 0.81")


def test_the_scorecard_shows_the_draft_quality_reading_under_the_claim_and_never_as_its_diagnosis():
    from spectree.claims.scorecard import BY_KEY, score

    results = [q(0.0, 0.38, {"x": INCONCLUSIVE}), q(0.2, 0.6, {"x": HOLDS}), q(0.4, 0.8, {"x": HOLDS})]
    quality_reading = quality_readings.draft_quality(results)["x"]
    mine = {"name": "x", "kind": "paper", "key": "dyspec-fig2-correlated", "verdict": INCONCLUSIVE, "n": 16,
            "notebook": "06", "readings": {"more prompts": {"text": "would hardly decide it", "verdict": INCONCLUSIVE,
                                                             "tried": True}}}
    row = score(BY_KEY["dyspec-fig2-correlated"], [mine], quality_reading)
    assert row["verdict"] == INCONCLUSIVE and not row["diagnosis"].startswith("holds")
    assert "not tried: draft quality" in row["diagnosis"]  # no real draft of the papers' quality here
    shown = row["readings"][-1]
    assert shown["verdict"] == HOLDS and "mixture drafts" in shown["label"] and "by construction" in shown["label"]


def test_the_agreement_a_speedup_needs_is_interpolated_or_out_of_range():
    best = pd.DataFrame({"agreement": [0.4, 0.4, 0.6, 0.8], "speedup": [1.1, 1.2, 1.6, 2.4],
                         "family": ["chain", "EAGLE-2", "chain", "chain"]})
    assert projection.agreement_needed(best, 2.0)["agreement"] == pytest.approx(0.7)  # 1.6 → 2.4 between 0.6 and 0.8
    assert projection.agreement_needed(best, 1.2)["text"].startswith("≤ 0.40")
    out = projection.agreement_needed(best, 3.0)
    assert out["agreement"] is None and "best 2.40× vs our AR loop at agreement 0.80" in out["text"]
    # read vs HF generate with our AR loop's live ratio: 2.0 / 1.25 = 1.6 vs our AR loop, reached at 0.6
    vs_hf = projection.agreement_needed(best, 2.0, ar_over_hf=1.25)
    assert vs_hf["agreement"] == pytest.approx(0.6) and vs_hf["baseline"] == "vs HF generate"


def test_the_projection_check_reads_each_live_run_over_our_ar_loop_and_reports_the_worst():
    # the live rates of the decoding steps, each run's prefill left out: AR 20 → 25 tokens/s, chain-2 24 → 30, PCT 37.5
    one = pd.DataFrame({"strategy": ["hf-generate", "AR (our loop)", "chain-2", "PCT"],
                        "tokens_per_s": [10.0, 20.0, 24.0, 30.0], "prefill_frac": [math.nan, 0.2, 0.2, 0.2]})
    live = pd.concat([one.assign(run=k) for k in range(3)], ignore_index=True)
    projected = pd.DataFrame({"spec": ["chain:k=2", "pct:ratio=0.1"], "speedup": [1.26, 1.8]})
    labels = {"chain-2": "chain:k=2", "PCT": "pct:ratio=0.1"}
    table, claim = projection.projection_check(live, projected, labels, 16)
    assert table.live.round(12).tolist() == [1.2, 1.5] * 3 and table.error.round(3).tolist() == [0.05, 0.2] * 3
    skewed = projection.projection_check(one.assign(prefill_frac=[math.nan, 0.5, 0.2, 0.2]), projected,
                                         {"chain-2": "chain:k=2"}, 16)[0]  # a slow prefill of AR's is not its steps'
    assert skewed.live.round(12).tolist() == [0.75]
    assert claim["verdict"] == FAILS and math.isclose(claim["estimate"], 0.2)  # PCT is 20% off
    assert claim["paper"] == "—" and "≤ 0.1" in claim["goal"] and claim["kind"] == "bar"  # the issues' bar
    good_runs = projected.assign(speedup=[1.2, 1.55])
    _, good = projection.projection_check(live, good_runs, labels, 16)
    assert good["verdict"] == HOLDS and good["details"]["runs"] == 3
    # one noisy run of three: chain-2 live 1.2 → 1.0 there, +20% off; the claim reads the worst run, not the pool
    noisy = live.assign(tokens_per_s=live.tokens_per_s.where((live.run != 1) | (live.strategy != "chain-2"), 20.0))
    worst_table, worst = projection.projection_check(noisy, good_runs, labels, 16)
    assert worst["verdict"] == FAILS and math.isclose(worst["estimate"], 0.2)
    assert worst["ours"].startswith("worst +20% (chain-2, run 2 of 3)")
    assert projection.projection_check(live[live.run < 2], good_runs, labels, 16)[1]["verdict"] == INCONCLUSIVE
    assert projection.projection_check(live, good_runs, labels, 6)[1]["verdict"] == INCONCLUSIVE  # 6 prompts


def test_no_component_is_scored_on_the_prompts_it_was_trained_on():
    projection.check_disjoint(["mtbench/85", "mtbench/86"], ["mtbench/81", "sharegpt/x"], "C2T's classifier")
    with pytest.raises(SpectreeError, match="C2T's classifier would be scored on 1 of its own training prompts "
                                            r"\(mtbench/81\)"):
        projection.check_disjoint(["mtbench/81", "mtbench/86"], ["mtbench/81"], "C2T's classifier")
    from types import SimpleNamespace

    from spectree.prompts import Prompt

    logbook = [SimpleNamespace(prompt=Prompt(d, str(i), "c", "x")) for d in ("mtbench", "humaneval") for i in range(4)]
    train, held = quality.split(logbook, quality.SweepSettings(train_fraction=0.5))
    assert quality.prompt_ids(train) == ["mtbench/0", "mtbench/1", "humaneval/0", "humaneval/1"]
    assert quality.prompt_ids(held) == ["mtbench/2", "mtbench/3", "humaneval/2", "humaneval/3"]


def test_agreement_counts_the_top_child_of_each_root_only():
    tokens = pd.DataFrame({"depth": [1, 1, 1, 2, 1, 1], "rank": [0, 1, 0, 0, 0, 2],
                           "accept": [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]})  # three roots' top children: 1, 0, 1
    out = quality.agreement(tokens)
    assert out["positions"] == 3 and out["agreement"] == pytest.approx(2 / 3)
    assert out["low"] < 2 / 3 < out["high"]


def test_the_gpu_projection_prices_the_same_trees_with_each_shapes_measured_costs(tmp_path, tiny_target):
    """The checklist's costmodel.json → one cost model per shape; the projection replays the same trees (same τ) and
    prices them: where a draft layer costs a hundredth of a target forward, chains project faster than where it costs
    as much as one."""
    import json


    from spectree.prompts import Prompt
    from spectree.replay.logbook import LogConfig, log_prompt

    class Template:
        eos_token_id = 1

        def apply_chat_template(self, messages, add_generation_prompt=True):
            return [3, 4, 5, 6]

    cfg = LogConfig(pair="toy", max_new_tokens=12, K=3, d_max=4, beam=4, b_env=1, d_env=1)
    logbook = [log_prompt(tiny_target, tiny_target, Template(), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
               for i in range(2)]  # the target as its own draft: every chain accepted, τ grows with k
    sizes, target = [1, 4, 16], [0.010, 0.012, 0.020]
    path = tmp_path / "costmodel.json"
    path.write_text(json.dumps({"machine": "gpu-host", "device": "NVIDIA H100 80GB HBM3", "sizes": sizes,
                                "prefixes": [256, 2048], "shapes": {
                                    "cheap-draft": {"target_s": {"256": target, "2048": [2 * t for t in target]},
                                                    "draft_s": [t / 100 for t in target]},
                                    "dear-draft": {"target_s": {"256": target, "2048": target}, "draft_s": target}}}))
    costs, device = projection.gpu_cost_models(path)
    assert device == "NVIDIA H100 80GB HBM3" and list(costs) == [("cheap-draft", "eager"), ("dear-draft", "eager")]
    assert costs["cheap-draft", "eager"].target_s == target and costs["cheap-draft", "eager"].ratio == pytest.approx(0.01)
    assert projection.gpu_cost_models(tmp_path / "absent.json") == ({}, "")
    cpu = pd.DataFrame({"family": ["chain"], "spec": ["chain:k=1"], "speedup": [1.05]})
    results = [quality.Quality(0.0, "smollm2-edd", {"agreement": 1.0}, [], {}, cpu)]  # its name: its C2T classifier's
    table = projection.gpu_projection(results, {0.0: logbook}, 3, 4, costs)
    chain = table[table.family == "chain"].set_index("shape")
    assert chain.loc["cheap-draft", "speedup"] > 1.5 * chain.loc["dear-draft", "speedup"]
    assert chain.loc["cheap-draft", "tau"] > 2  # the twin draft's chains pass: cheap drafting pays for long ones
    assert chain.loc["cheap-draft", "tau"] >= chain.loc["dear-draft", "tau"]
    assert (chain.cpu_speedup == 1.05).all() and table[table.family != "chain"].cpu_speedup.isna().all()
    assert {"chain", "DySpec", "PCT", "C2T"} <= set(table.family)
    line, = [x for x in projection.gpu_lines(table, device) if "cheap-draft" in x]
    assert line.startswith("on NVIDIA H100 80GB HBM3 with a cheap-draft-shaped target (eager PyTorch), at top-1 "
                           "agreement 1.00, ")


@pytest.fixture(scope="module")
def narrow_logbook(tiny_target):
    """One prompt logged with K 10 and a beam of 2: a logbook that holds little beyond each node's top 10."""
    from helpers import tiny_llama

    from spectree.prompts import Prompt
    from spectree.replay.logbook import LogConfig, log_prompt

    class Template:
        def apply_chat_template(self, messages, add_generation_prompt=True):
            return [3, 14, 15, 92, 65]

    cfg = LogConfig(max_new_tokens=12, K=10, d_max=4, beam=2, b_env=1, d_env=1)
    return [log_prompt(tiny_target, tiny_llama(seed=1, layers=1), Template(), Prompt("toy", "0", "c", "x"), cfg,
                       eos_ids=())]


def test_every_eagle2_tree_notebook_11_projects_replays_on_a_narrow_logbook(narrow_logbook):
    """EAGLE-2 is projected at the logbook's own K, whose top-K expansion every logbook holds (`replay.logtree`):
    it replays however narrow the beam (at a smaller K its expansion need not lie in the beam, and notebook 11
    lost the EAGLE-2 family and its live check on a 32-token logbook that way)."""
    from spectree.replay.replay import replay

    eagle2 = projection.projection_policies(10, 4, None, 0.1)["EAGLE-2"]
    assert {p.K for p in eagle2} == {10}
    for policy in eagle2:
        assert len(replay(narrow_logbook, policy)), policy.spec
    with pytest.raises(SpectreeError, match="not expanded in the logbook"):  # K = 8, as notebook 11 had it
        replay(narrow_logbook, replace(eagle2[2], K=8))


def test_the_live_check_decodes_the_c2t_setting_the_projection_ranks_best(narrow_logbook):
    """Notebook 11 checks C2T live at the setting its projection ranks best at λ 0, which replays by construction;
    the fixed β 0.5, topk 8 it used before can keep nodes by its classifier that a narrow logbook never expanded (so
    the default run's check lost C2T; whether it does on this toy logbook depends on the shipped classifier)."""
    from spectree.replay.replay import replay
    from spectree.speed.costmodel import CostModel

    cost = CostModel("m", 0, [1, 16, 64], target_s=[0.044, 0.099, 0.240], draft_s=[0.004, 0.006, 0.012])
    families = projection.projection_policies(10, 4, "smollm2-edd", cost.ratio)
    rows = projection.projected(narrow_logbook, {"C2T": families["C2T"]}, cost)
    best = projection.best_by_family([quality.Quality(0.0, "smollm2-edd", {"agreement": 0.4}, [], {}, rows)])
    live = projection.live_check_policies(best, 10, 4, 4, cost.ratio, "smollm2-edd")
    assert live["C2T"].spec == best.spec.iloc[0] and len(replay(narrow_logbook, live["C2T"]))
    assert live["EAGLE-2"].K == 10 and {"chain-2", "PCT", "DySpec threshold", "SGLang"} < set(live)
    assert live["PCT"].ratio == round(cost.ratio, 3)  # the live check's PCT: this machine's s_d/s_t
    fixed = projection.live_check_policies(pd.DataFrame(), 10, 4, 4, cost.ratio, "smollm2-edd")["C2T"]
    assert (fixed.beta, fixed.topk) == (0.5, 8)
    assert "C2T" not in projection.live_check_policies(pd.DataFrame(), 10, 4, 4, cost.ratio, None)


class _Template:
    eos_token_id = 1

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3, 4, 5, 6, 7 + len(messages[0]["content"])]  # a prompt's text changes its last token


@pytest.fixture(scope="module")
def mixed_logbook(tiny_target):
    """Four prompts of one set logged with a one-layer draft of another seed (its own draft, not the target's)."""
    from helpers import tiny_llama

    from spectree.prompts import Prompt
    from spectree.replay.logbook import LogConfig, log_prompt

    draft = tiny_llama(seed=2, layers=1)
    cfg = LogConfig(pair="toy", max_new_tokens=10, K=4, d_max=4, beam=6, b_env=2, d_env=3)
    logbook = [log_prompt(tiny_target, draft, _Template(), Prompt("toy", str(i), "c", "x" * i), cfg, eos_ids=())
               for i in range(4)]
    return (tiny_target, draft, _Template()), logbook


def test_every_weights_tables_at_t_come_from_one_walk_and_equal_the_mix_drafts_own(mixed_logbook):
    """mix:λ's root distribution is (1 − λ)·q + λ·p with p the teacher-forced target's row: the tables at T read from
    one walk of the real pair equal those of the mix draft run itself (`token_tables.temperature_tokens`)."""
    from spectree.analysis.token_tables import temperature_tokens

    models, logbook = mixed_logbook
    tables = quality.temperature_tables(models, logbook, [0.0, 0.5], [0.6, 0.4], top=8)
    assert set(tables) == {(0.0, 0.6), (0.0, 0.4), (0.5, 0.6), (0.5, 0.4)}
    for (w, t), table in tables.items():
        own = temperature_tokens(logbook, "toy", t, 8, models=quality.mix_models(models, w))
        assert list(table.columns) == list(own.columns) and len(table) == len(own) > 0
        assert (table.token.to_numpy() == own.token.to_numpy()).all()
        for column in ("p", "accept", "target_prob", "entropy", "entropy_raw", "entropy_topm", "confidence"):
            assert table[column].to_numpy() == pytest.approx(own[column].to_numpy(), abs=2e-5), (w, t, column)
    assert not tables[0.5, 0.6].p.equals(tables[0.0, 0.6].p)  # the weight moves the draft


def test_one_weights_measure_reads_every_claim_of_02_and_04_to_07_and_scores_c2t_apart(mixed_logbook, tmp_path,
                                                                                      monkeypatch):
    """One λ's `measure` on a tiny logbook: every claim notebook 02's `collect_claims` makes, and those of 04–07 (DySpec
    at T too), by name; C2T's classifier trained on the first prompts, every tree claim and projection on the others."""
    from spectree.analysis import stats
    from spectree.analysis.sweep_claims import collect_claims
    from spectree.analysis.sweeps import TABLE_COLUMNS
    from spectree.speed.costmodel import CostModel

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))  # the classifier's file
    models, logbook = mixed_logbook
    cost = CostModel("m", 0, [1, 16, 64], target_s=[0.044, 0.099, 0.240], draft_s=[0.004, 0.006, 0.012])
    s = quality.SweepSettings(K=4, d_max=4, depth=3, eagle2_N=(4, 8), c2t_betas=(0.3, 0.6), c2t_topks=(0, 2),
                              budgets=(4, 8), widths=(1, 2), classifier_epochs=2)
    a = quality.AnalysisSettings(n_resamples=50)
    hot = {t: table for (w, t), table in quality.temperature_tables(models, logbook, [0.0], [0.6, 0.4]).items()}
    q0 = quality.measure(logbook, "toy-c2t", "toy", 0.0, s, cost, hot, a)
    names = [c["name"] for c in q0.claims]
    assert len(names) == len(set(names))
    assert {c["name"] for c in collect_claims(pd.DataFrame(columns=TABLE_COLUMNS))} <= set(names)
    assert {c["name"] for c in stats.acceptance_report({"greedy": hot[0.6], "T = 0.6": hot[0.6]})[0]} <= set(names)
    assert {"EDD Fig. 3b: draft confidence is calibrated with acceptance",
            "PCT: path acceptance ≈ product of confidences"} <= set(names)
    assert q0.trained == ["toy/0", "toy/1"] and q0.scored == ["toy/2", "toy/3"]
    assert all(c["kind"] == "paper" for c in q0.claims) and len(q0.projected)
    pct = q0.projected[q0.projected.family == "PCT"].spec  # projected speeds: PCT at this machine's s_d/s_t
    assert len(pct) and all(f"ratio={round(cost.ratio, 3):g}," in spec for spec in pct)
    readings = quality_readings.draft_quality([q0])
    assert all(c.get("key") for c in q0.claims)  # every paper claim names its scorecard key
    assert set(readings) == {c["key"] for c in q0.claims}


def test_the_flip_weights_are_computed_once_for_notebooks_11_and_13(mixed_logbook, tmp_path, monkeypatch):
    """Notebook 13 finds the flip weights notebook 11 computed (`quality.cached_flips`); other positions (or
    prompts, or weights) are computed again."""
    class Short(_Template):
        def apply_chat_template(self, messages, add_generation_prompt=True):
            return [3, 4, 5, 6, 7 + len(messages[0]["content"]) % 50]  # MT-bench's texts, in the tiny vocabulary

    (target, draft, _), _ = mixed_logbook
    models = (target, draft, Short())
    monkeypatch.setattr("spectree.core.paths.cache_dir", lambda: tmp_path)
    computed, real = [], quality.flip_weights
    monkeypatch.setattr(quality, "flip_weights", lambda *a: computed.append(a[2]) or real(*a))
    pair = "smollm2-135m-instruct+layerskip:2"  # names the cache (a registry target, a draft of no weights)
    first = quality.mix_weights(models, pair, "mtbench:2", 6, [0.6, 0.8])
    assert quality.mix_weights(models, pair, "mtbench:2", 6, [0.6, 0.8]) == first and computed == [6]
    assert first[0][0] == 0.0 and set(first[1]) == {0.6, 0.8}
    quality.mix_weights(models, pair, "mtbench:2", 5, [0.6])
    assert computed == [6, 5] and len(list(tmp_path.glob("mix/*.npy"))) == 2
