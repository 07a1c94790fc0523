"""The draft-quality sweep's logic (`reports.quality`, notebook 11) on fixed inputs whose answers are known: the
pair of a λ, where each claim starts to hold, the agreement a speedup needs, and the projection check; the mix
draft itself is tested in tests/drafts/test_mix.py and on SmolLM2 in tests/test_real_model.py."""
import math
from dataclasses import replace

import pandas as pd
import pytest

from spectree.analysis.claims import FAILS, HOLDS, INCONCLUSIVE
from spectree.core.errors import SpectreeError
from spectree.reports import quality


def test_the_pair_of_each_weight():
    assert quality.mix_pair("smollm2-edd", 0.0) == "smollm2-edd"  # λ = 0 is the real draft: its own logbooks
    assert quality.mix_pair("smollm2-edd", 0.6) == "smollm2-135m-instruct+mix:0.6:edd:smollm2-edd"
    with pytest.raises(SpectreeError, match="0 <= λ <= 1"):
        quality.mix_pair("smollm2-edd", 1.2)
    with pytest.raises(SpectreeError, match="already has a mix draft"):
        quality.mix_pair("smollm2-135m-instruct+mix:0.5:edd:smollm2-edd", 0.6)


def q(weight, agreement, verdicts) -> quality.Quality:
    return quality.Quality(weight, f"log{weight}", {"agreement": agreement}, [
        {"name": name, "verdict": v} for name, v in verdicts.items()], {}, pd.DataFrame())


def test_flips_say_from_which_agreement_a_claim_holds():
    results = [q(0.6, 0.7, {"a": HOLDS, "b": HOLDS, "c": FAILS, "d": HOLDS}),
               q(0.0, 0.4, {"a": FAILS, "b": HOLDS, "c": FAILS, "d": HOLDS}),
               q(0.3, 0.5, {"a": INCONCLUSIVE, "b": HOLDS, "c": HOLDS, "d": FAILS, "e": HOLDS})]
    table = quality.flips(results).set_index("claim")
    assert list(table.columns[:3]) == ["agreement 0.40 (λ 0)", "agreement 0.50 (λ 0.3)", "agreement 0.70 (λ 0.6)"]
    assert table.loc["a", "holds from"] == "0.70 (λ 0.6)"  # holds only at the best draft
    assert table.loc["b", "holds from"] == "everywhere"
    assert table.loc["c", "holds from"] == "never in range"  # held at 0.5, not at the best draft
    assert table.loc["d", "holds from"] == "0.70 (λ 0.6)"  # must hold at every higher agreement
    assert table.loc["a", "agreement 0.50 (λ 0.3)"] == INCONCLUSIVE
    assert table.loc["e", "holds from"] == "undecided at the best draft"  # not judged at 0.4 and 0.7
    assert table.loc["e", "agreement 0.70 (λ 0.6)"] == "—"


def test_the_agreement_a_speedup_needs_is_interpolated_or_out_of_range():
    best = pd.DataFrame({"agreement": [0.4, 0.4, 0.6, 0.8], "speedup": [1.1, 1.2, 1.6, 2.4],
                         "family": ["chain", "EAGLE-2", "chain", "chain"]})
    assert quality.agreement_needed(best, 2.0)["agreement"] == pytest.approx(0.7)  # 1.6 → 2.4 between 0.6 and 0.8
    assert quality.agreement_needed(best, 1.2)["text"].startswith("≤ 0.40")
    out = quality.agreement_needed(best, 3.0)
    assert out["agreement"] is None and "best 2.40× at agreement 0.80" in out["text"]


def test_the_projection_check_reads_live_speedups_over_our_ar_loop():
    # the live rates of the decoding steps, each run's prefill left out: AR 20 → 25 tokens/s, chain-2 24 → 30, PCT 37.5
    live = pd.DataFrame({"strategy": ["hf-generate", "AR (our loop)", "chain-2", "PCT"],
                         "tokens_per_s": [10.0, 20.0, 24.0, 30.0], "prefill_frac": [math.nan, 0.2, 0.2, 0.2]})
    projected = pd.DataFrame({"spec": ["chain:k=2", "pct:ratio=0.1"], "speedup": [1.26, 1.8]})
    table, claim = quality.projection_check(live, projected, {"chain-2": "chain:k=2", "PCT": "pct:ratio=0.1"}, 16)
    assert table.live.round(12).tolist() == [1.2, 1.5] and table.error.round(3).tolist() == [0.05, 0.2]
    skewed = quality.projection_check(live.assign(prefill_frac=[math.nan, 0.5, 0.2, 0.2]), projected,
                                      {"chain-2": "chain:k=2"}, 16)[0]  # a slow prefill of AR's is not its steps'
    assert skewed.live.round(12).tolist() == [0.75]
    assert claim["verdict"] == FAILS and math.isclose(claim["estimate"], 0.2)  # PCT is 20% off
    assert claim["paper"] == "—" and "≤ 0.1" in claim["goal"]  # the bar is the issues', not a paper's
    _, good = quality.projection_check(live, projected.assign(speedup=[1.2, 1.55]), {"chain-2": "chain:k=2",
                                                                                     "PCT": "pct:ratio=0.1"}, 16)
    assert good["verdict"] == HOLDS


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
    costs, device = quality.gpu_cost_models(path)
    assert device == "NVIDIA H100 80GB HBM3" and list(costs) == [("cheap-draft", "eager"), ("dear-draft", "eager")]
    assert costs["cheap-draft", "eager"].target_s == target and costs["cheap-draft", "eager"].ratio == pytest.approx(0.01)
    assert quality.gpu_cost_models(tmp_path / "absent.json") == ({}, "")
    settings = quality.SweepSettings(3, 4, 4, [4], [0.5], [0], [4], [1, 2], 0.1, 0.5, 1)
    cpu = pd.DataFrame({"family": ["chain"], "spec": ["chain:k=1"], "speedup": [1.05]})
    results = [quality.Quality(0.0, "smollm2-edd", {"agreement": 1.0}, [], {}, cpu)]  # its name: its C2T classifier's
    table = quality.gpu_projection(results, {0.0: logbook}, settings, costs)
    chain = table[table.family == "chain"].set_index("shape")
    assert chain.loc["cheap-draft", "speedup"] > 1.5 * chain.loc["dear-draft", "speedup"]
    assert chain.loc["cheap-draft", "tau"] > 2  # the twin draft's chains pass: cheap drafting pays for long ones
    assert chain.loc["cheap-draft", "tau"] >= chain.loc["dear-draft", "tau"]
    assert (chain.cpu_speedup == 1.05).all() and table[table.family != "chain"].cpu_speedup.isna().all()
    assert {"chain", "DySpec", "PCT", "C2T"} <= set(table.family)
    line, = [x for x in quality.gpu_lines(table, device) if "cheap-draft" in x]
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

    eagle2 = quality.projection_policies(quality.SweepSettings(K=10, d_max=4), None, 0.1)["EAGLE-2"]
    assert {p.K for p in eagle2} == {10}
    for policy in eagle2:
        assert len(replay(narrow_logbook, policy)), policy.spec
    with pytest.raises(SpectreeError, match="not expanded in the logbook"):  # K = 8, as notebook 11 had it
        replay(narrow_logbook, replace(eagle2[2], K=8))


def test_the_live_check_decodes_the_c2t_setting_the_projection_ranks_best(narrow_logbook):
    """Notebook 11 checks C2T live at the setting its projection ranks best at λ 0, which replays by construction;
    the fixed β 0.5, topk 8 it used before keeps nodes by its classifier that a narrow logbook never expanded (so
    the default run's check lost C2T)."""
    from spectree.replay.replay import replay
    from spectree.speed.costmodel import CostModel

    cost = CostModel("m", 0, [1, 16, 64], target_s=[0.044, 0.099, 0.240], draft_s=[0.004, 0.006, 0.012])
    s = quality.SweepSettings(K=10, d_max=4, depth=4)
    families = quality.projection_policies(s, "smollm2-edd", cost.ratio)
    rows = quality.projected(narrow_logbook, {"C2T": families["C2T"]}, cost)
    best = quality.best_by_family([quality.Quality(0.0, "smollm2-edd", {"agreement": 0.4}, [], {}, rows)])
    live = quality.live_check_policies(best, s, cost.ratio, "smollm2-edd")
    assert live["C2T"].spec == best.spec.iloc[0] and len(replay(narrow_logbook, live["C2T"]))
    assert live["EAGLE-2"].K == s.K and {"chain-2", "PCT", "DySpec threshold", "SGLang"} < set(live)
    fixed = quality.live_check_policies(pd.DataFrame(), s, cost.ratio, "smollm2-edd")["C2T"]
    assert (fixed.beta, fixed.topk) == (0.5, 8)
    with pytest.raises(SpectreeError, match="not expanded in the logbook"):
        replay(narrow_logbook, fixed)
    assert "C2T" not in quality.live_check_policies(pd.DataFrame(), s, cost.ratio, None)
