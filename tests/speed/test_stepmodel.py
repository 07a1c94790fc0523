"""The step model (`speed.stepmodel`): every term of a live step is timed where it happens, the fit recovers the
terms it is made of, projections read it, and `bench` rows carry the projection beside the measurement."""
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers import byte_tokenizer, tiny_llama

from spectree.core.decode import StepStats, speculative_generate
from spectree.speed.costmodel import CostModel
from spectree.speed.load import REUSE_BUSY
from spectree.speed.stepmodel import (StepFit, fit_steps, from_json, plain_seconds, predict_live, predict_steps,
                                      step_arrays, to_json)
from spectree.strategies import parse_strategy

CURVE = CostModel("m", 256, [1, 8, 64], target_s=[0.050, 0.060, 0.120], draft_s=[0.010, 0.011, 0.020])
TRUE = {"draft": [0.002, 0.003, 1.2, 0.004], "verify": [0.010, 0.015, 1.1, 0.008], "tree": [0.0001, 0.001, 2e-5, 5e-5],
        "keep": [0.0003, 0.0002], "rest": [0.001, 0.0001]}


def synthetic_steps(n: int, seed: int = 0) -> list[StepStats]:
    """Steps whose every term is exactly TRUE's function of its sizes (the draft forwards' widths, the tree)."""
    rng = np.random.default_rng(seed)

    def lin(term, *x):
        return float(np.dot(TRUE[term], [1, *x]))
    steps = []
    for _ in range(n):
        gamma, L = int(rng.integers(0, 60)), int(rng.integers(20, 900))
        tau = int(rng.integers(1, min(gamma, 6) + 2))
        widths = [] if gamma == 0 else [*map(int, rng.integers(1, 9, int(rng.integers(1, 6)))), tau]
        offered = 0 if gamma == 0 else int(rng.integers(gamma, 5 * gamma + 2))
        forwards = [(w, lin("draft", w > 1, CURVE.t_draft(w), w * L / 1000)) for w in widths]
        verify = lin("verify", gamma > 0, CURVE.t_target(gamma + 1), (gamma + 1) * L / 1000)
        tree, keep = lin("tree", float(gamma > 0), offered, gamma), lin("keep", tau)
        rest = lin("rest", gamma + 1)
        steps.append(StepStats(tau, gamma, 0.0, 0.0, tree, draft_forwards=forwards, verify_forward_s=verify,
                               keep_s=keep, offered=offered, prefix=L,
                               step_s=sum(s for _, s in forwards) + verify + tree + keep + rest))
    return steps


def test_the_fit_recovers_the_terms_a_step_is_made_of():
    steps = synthetic_steps(400)
    fit = fit_steps(steps, CURVE)
    for term, coef in TRUE.items():
        assert fit.coef[term] == pytest.approx(coef, rel=1e-4, abs=1e-7), term
    assert fit.residuals["step"]["p90"] < 1e-6 and abs(fit.residuals["step"]["total"]) < 1e-6
    held = synthetic_steps(50, seed=1)
    assert predict_live(fit, CURVE, held) == pytest.approx([s.step_s for s in held], rel=1e-5)
    # a replayed step described by its widths (catch-up first) is priced the same as the live step it stands for
    one = held[next(i for i, s in enumerate(held) if s.gamma > 0)]
    widths = [[one.draft_forwards[-1][0], *(w for w, _ in one.draft_forwards[:-1])]]
    assert predict_steps(fit, CURVE, widths, [one.tau], [one.gamma], [one.offered], [one.prefix])[0] == \
        pytest.approx(one.step_s, rel=1e-5)
    L = np.array([100, 800])  # a plain step: the verify forward over one token, its root, keep and the rest
    assert plain_seconds(fit, CURVE, L) == pytest.approx(
        [TRUE["verify"][0] + 1.1 * 0.05 + 0.008 * x / 1000 + 0.0001 + 0.0005 + 0.0011 for x in L])


def test_a_plain_step_is_not_priced_as_a_tree_step():
    """A forward over more than one token pays the tree path's price in the loop (m·[n > 1]). A line through
    t_target(n) alone, fitted on such steps, prices the one-token forward of a plain step high, which overstates
    every tree's speedup over plain decoding; the fit with m prices it exactly (`plain_seconds`, the first test).
    A fit of the first form (three coefficients per forward, as a GPU checklist committed them) reads as m = 0."""
    a = step_arrays(synthetic_steps(400))
    line = np.column_stack([np.ones(len(a["n"])), np.interp(a["n"], CURVE.sizes, CURVE.target_s), a["n"] * a["L"] / 1000])
    c = np.linalg.lstsq(line, a["verify_s"], rcond=None)[0]
    one_token = TRUE["verify"][0] + TRUE["verify"][2] * CURVE.t_target(1)  # at L = 0
    assert c[0] + c[1] * CURVE.t_target(1) > one_token + 0.004  # m = 15 ms spread over the line
    fit = fit_steps(synthetic_steps(400), CURVE)
    assert fit.term("verify", CURVE, n=[1], L=[0])[0] == pytest.approx(one_token, rel=1e-5)
    first_form = StepFit("m", {**TRUE, "draft": [0.002, 1.2, 0.004], "verify": [0.010, 1.1, 0.008]})
    assert first_form.coef["verify"] == [0.010, 0.0, 1.1, 0.008] and first_form.coef["draft"] == [0.002, 0.0, 1.2, 0.004]
    assert from_json(to_json(first_form)).coef == first_form.coef


def test_without_a_step_model_a_step_is_its_forwards_as_before():
    tau, layers, gamma = 2, [1, 4, 8], 12
    assert CURVE.step_seconds([tau, *layers], gamma + 1) == pytest.approx(
        sum(CURVE.t_draft(n) for n in [tau, *layers]) + CURVE.t_target(gamma + 1))
    assert CURVE.plain_seconds([10, 500]) == pytest.approx([0.05, 0.05])
    fitted = CostModel(**{**CURVE.__dict__, "step": fit_steps(synthetic_steps(100), CURVE).__dict__})  # from JSON
    assert fitted.step_seconds([tau, *layers], gamma + 1, tau, offered=40, prefix=300) > \
        CURVE.step_seconds([tau, *layers], gamma + 1)


@pytest.mark.parametrize("spec", ["ar", "chain:k=3", "eagle2:K=4,d_max=3,N=8", "kary:b=2,d=2"])
def test_a_live_step_is_timed_term_by_term(spec):
    target, draft = tiny_llama(0, layers=3), tiny_llama(1, layers=1)
    policy = parse_strategy(spec)
    g = speculative_generate(target, draft, [3, 4, 5, 6], policy, 12, generator=torch.Generator().manual_seed(0))
    assert g.prefill_s > 0 and g.steps
    a = step_arrays(g.steps)
    for i, s in enumerate(g.steps):
        assert s.prefix == 4 + sum(x.tau for x in g.steps[:i])
        parts = a["draft_s"][i] + s.verify_forward_s + s.tree_s + s.keep_s
        assert 0 < parts <= s.step_s and s.verify_forward_s > 0 and s.keep_s > 0
        if policy.d_max == 0:
            assert s.draft_forwards == [] and s.offered == 0
            continue
        assert s.offered >= s.gamma and s.offered >= policy.K
        widths = [n for n, _ in s.draft_forwards]
        if i < len(g.steps) - 1:  # the catch-up over the committed tokens comes last (not after the final step)
            assert widths[-1] == s.tau
    assert sum(s.step_s for s in g.steps) + g.prefill_s <= g.wall_s


def test_bench_rows_carry_the_projection_beside_the_measurement():
    from helpers import ToyChat

    from spectree.prompts import Prompt
    from spectree.speed.bench import run_strategies, summarize_runs
    from spectree.speed.references import HF, HF_PACKED

    target, draft = tiny_llama(0, layers=3), tiny_llama(1, layers=1)
    prompts = [Prompt("toy", "a", "c", "x"), Prompt("toy", "b", "c", "y")]
    cost = CostModel("m", 8, [1, 4, 16, 64], [0.001, 0.0012, 0.0015, 0.003], [0.0005, 0.0006, 0.0007, 0.001])
    policies = {"chain": parse_strategy("chain:k=2"), "eagle2": parse_strategy("eagle2:K=4,d_max=3,N=8")}
    bare = summarize_runs(run_strategies((target, draft, ToyChat()), prompts, policies, 8))
    assert bare.projected.isna().all()  # no cost model: nothing projected
    g = speculative_generate(target, draft, [3, 4, 5], policies["eagle2"], 8)
    cost.step = fit_steps(g.steps + speculative_generate(target, draft, [3, 4, 5], None, 8).steps, cost)
    runs = run_strategies((target, draft, ToyChat()), prompts, policies, 8, cost=cost)
    table = summarize_runs(runs).set_index("strategy")
    assert math.isnan(table.projected[HF]) and table.projected[["chain", "eagle2"]].gt(0).all()
    assert table.projected_error["chain"] == pytest.approx(table.projected["chain"] / table.speedup["chain"] - 1)
    for r in runs:
        assert (r.strategy == HF) == math.isnan(r.projected_s) == math.isnan(r.plain_s)
    # a machine twice as slow as at the fit: every predicted second doubles, the projection does not move
    slower = [replace(r, projected_s=2 * r.projected_s, plain_s=2 * r.plain_s) for r in runs]
    assert summarize_runs(slower).projected.tolist() == pytest.approx(table.projected.tolist(), nan_ok=True)
    ar = summarize_runs(run_strategies((target, draft, ToyChat()), prompts, {"ar": parse_strategy("ar")}, 8,
                                       cost=cost)).set_index("strategy")  # plain decoding is the anchor's speed
    assert ar.projected["ar"] == pytest.approx(ar.speedup[HF_PACKED if HF_PACKED in ar.index else HF], rel=0.05)


def test_the_plain_seconds_of_a_run_are_a_plain_step_per_committed_token():
    from spectree.speed.bench import plain_projected_seconds, projected_seconds

    target, draft = tiny_llama(0, layers=3), tiny_llama(1, layers=1)
    cost = replace(CURVE, step=fit_steps(synthetic_steps(100), CURVE))
    g = speculative_generate(target, draft, [3, 4, 5], parse_strategy("chain:k=2"), 8)
    prefixes = [s.prefix + j for s in g.steps for j in range(s.tau)]
    assert len(prefixes) == sum(s.tau for s in g.steps) >= len(g.tokens)
    assert plain_projected_seconds(g, cost) == pytest.approx(g.prefill_s + plain_seconds(cost.step, cost, prefixes).sum())
    plain = speculative_generate(target, draft, [3, 4, 5], None, 8)  # plain decoding: the two agree
    assert plain_projected_seconds(plain, cost) == pytest.approx(projected_seconds(plain, cost), rel=1e-6)
    assert math.isnan(plain_projected_seconds(g, None))


def test_a_run_priced_on_another_machines_cost_model_is_its_own_steps_there():
    """`run_strategies(priced_on=)` (the GPU checklist's cost model, notebook 03's GPU reading): each policy's run
    carries its own decoding steps priced on that model, the prefill left out; the reference rows none. The steps are
    priced, not the run's wall time: a model twice as dear prices every run twice as high."""
    from helpers import ToyChat

    from spectree.prompts import Prompt
    from spectree.speed.bench import priced, run_strategies
    from spectree.speed.references import HF

    target, draft = tiny_llama(0, layers=3), tiny_llama(1, layers=1)
    gpu = replace(CURVE, step=fit_steps(synthetic_steps(100), CURVE))
    policies = {"chain": parse_strategy("chain:k=2"), "kary": parse_strategy("kary:b=2,d=3")}
    runs = run_strategies((target, draft, ToyChat()), [Prompt("toy", "a", "c", "x")], policies, 8, priced_on=gpu)
    for r in runs:
        assert math.isnan(r.priced_s) == (r.strategy == HF)
    g = speculative_generate(target, draft, [3, 4, 5], policies["kary"], 8)

    def steps_priced(g, cost):
        return priced(g, cost)["priced_s"]
    assert steps_priced(g, gpu) == pytest.approx(predict_live(gpu.step, gpu, g.steps).sum())
    dear = replace(gpu, step=replace(gpu.step, coef={k: [2 * c for c in v] for k, v in gpu.step.coef.items()}))
    assert steps_priced(g, dear) == pytest.approx(2 * steps_priced(g, gpu)) and math.isnan(steps_priced(g, None))
    by = {r.strategy: r for r in runs}
    assert by["kary"].tokens == g.tokens and by["kary"].priced_s == pytest.approx(steps_priced(g, gpu), rel=1e-9)
    # its draft, verify and tree terms are parts of it (keep and rest the remainder)
    terms = priced(g, gpu)
    parts = terms["priced_draft_s"] + terms["priced_verify_s"] + terms["priced_tree_s"]
    assert 0 < parts <= terms["priced_s"] * (1 + 1e-9) and by["kary"].priced_verify_s == pytest.approx(terms["priced_verify_s"])


def test_the_step_model_is_fitted_once_and_cached_beside_the_cost_model(tmp_path, monkeypatch):
    from spectree.speed import costmodel, stepmodel

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.delenv(REUSE_BUSY, raising=False)  # the test command sets it
    monkeypatch.setattr(stepmodel, "FIT_TOKENS", 6)
    monkeypatch.setattr(stepmodel, "MAX_MEDIAN_ERROR", math.inf)  # a tiny model's 1 ms steps are all noise
    monkeypatch.setattr("spectree.speed.load.BUSY_CORES", math.inf)
    tok = byte_tokenizer()
    target, draft = tiny_llama(0, layers=3, vocab=len(tok), context=8192), tiny_llama(1, 1, len(tok), 8192)
    first = costmodel.pair_cost_model("tiny", (target, draft, tok))
    assert first.step is not None and first.step.n_steps > 0 and "sharegpt" in first.step.source
    path = costmodel.steps_path(costmodel.cache_path("tiny", kernels="stock"))
    assert path.exists()
    monkeypatch.setattr(stepmodel, "live_steps", lambda *a, **k: pytest.fail("fitted again"))
    again, origin = costmodel.cached_cost_model("tiny", measure=False)
    assert again.step == first.step and "no step model" not in origin
    monkeypatch.setattr("spectree.speed.load.BUSY_CORES", 0.5)  # a fit timed beside 0.9 busy cores is not trusted
    path.write_text(stepmodel.to_json(replace(first.step, other_cores=0.9)))
    bare, origin = costmodel.cached_cost_model("tiny", measure=False)
    assert bare.step is None and "no step model" in origin
    monkeypatch.setenv(REUSE_BUSY, "1")  # as the test command runs: the busy fit is reused, its mark kept
    busy = costmodel.cached_cost_model("tiny", measure=False)[0].step
    assert busy is not None and busy.other_cores == 0.9 and not busy.plausible
    monkeypatch.delenv(REUSE_BUSY)
    path.unlink()
    assert costmodel.cached_cost_model("tiny", measure=False)[0].step is None


def test_smoke_timing_measures_briefly_and_is_cached_apart_from_a_full_runs(tmp_path, monkeypatch):
    """$SPECTREE_TIMING=smoke (the quick profile): each forward timed once, the fit on SMOKE_FIT, under "-smoke" file
    names; a full run then finds nothing cached (it measures its own), and a bad value is one clear error."""
    from spectree.core.errors import SpectreeError
    from spectree.core import machine
    from spectree.speed import costmodel, stepmodel

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.setattr(stepmodel, "MAX_MEDIAN_ERROR", math.inf)
    monkeypatch.setattr("spectree.speed.load.BUSY_CORES", math.inf)
    timed = []
    real = costmodel.time_forwards
    monkeypatch.setattr(costmodel, "time_forwards", lambda *a: timed.append(a[3]) or real(*a))
    monkeypatch.setenv(machine.TIMING_ENV, "smoke")
    assert stepmodel.fit_plan() == stepmodel.SMOKE_FIT and costmodel.cost_key("tiny").endswith("-smoke")
    tok = byte_tokenizer()
    target, draft = tiny_llama(0, layers=3, vocab=len(tok), context=8192), tiny_llama(1, 1, len(tok), 8192)
    smoke = costmodel.pair_cost_model("tiny", (target, draft, tok))
    assert timed == [1, 1] and smoke.step is not None and smoke.step.prompts == ["sharegpt/QWJhYvA_0"]
    assert costmodel.cached_cost_model("tiny", measure=False)[0].step == smoke.step
    from spectree.core import kernels

    kernels.crossovers(target)  # the kernel crossovers too, under a name of their own
    assert [p.name.endswith("-smoke.json") for p in (tmp_path / "data" / "cache" / "kernels").iterdir()] == [True]
    monkeypatch.setenv(machine.TIMING_ENV, "full")
    assert stepmodel.fit_plan() == (stepmodel.FIT_PROMPTS, stepmodel.FIT_TOKENS)
    with pytest.raises(SpectreeError, match="no cost model"):
        costmodel.cached_cost_model("tiny", measure=False)
    monkeypatch.setenv(machine.TIMING_ENV, "fast")
    with pytest.raises(SpectreeError, match="SPECTREE_TIMING must be"):
        stepmodel.fit_plan()


def test_a_fit_that_does_not_explain_its_steps_is_not_plausible():
    fit = fit_steps(synthetic_steps(60), CURVE, other_cores=0.0)
    assert fit.plausible
    assert not replace(fit, other_cores=1.2).plausible
    assert not replace(fit, residuals={**fit.residuals, "step": {"median": 1.49, "p90": 1.9, "total": 0.0}}).plausible


# --- s_d/s_t as EDD measures it: the mean forwards of PCT construction ---------------------------------------

def _pct_steps(layer_s: float, tree_s: float, catch_up_s: float = 0.5, n: int = 4) -> list[StepStats]:
    """One generation's steps: two tree layers a step, the catch-up last (none in the last step)."""
    return [StepStats(2, 6, 0.0, 0.0, draft_forwards=[(1, layer_s), (3, layer_s)] + ([(2, catch_up_s)] if i < n - 1
                                                                                     else []),
                      verify_forward_s=tree_s) for i in range(n)]


def test_edds_ratio_averages_the_forwards_of_pct_construction_not_one_tokens():
    """EDD l.817–821: "the average time required for one forward pass of both target models and draft models for PCT
    construction": the draft's forwards over the tree's layers (not its catch-up over committed tokens, not a step's
    last, which makes none) over the target's forwards over the tree."""
    from spectree.speed.stepmodel import construction_forwards

    layers, trees = construction_forwards([_pct_steps(0.002, 0.010), _pct_steps(0.004, 0.030, n=2)])
    assert layers == [0.002] * 6 + [0.004] * 2 and trees == [0.010] * 3 + [0.030]
    assert np.mean(layers) / np.mean(trees) == pytest.approx(0.0025 / 0.015)


def test_the_ratio_reruns_pct_at_the_ratio_it_measured_and_is_cached_beside_the_cost_model(tmp_path, monkeypatch):
    """PCT's trees depend on s_d/s_t: it is run from the one-token ratio, then at each measured ratio until the
    ratio settles; the result is cached beside the pair's cost model, read back without decoding, and measured again
    when the cost model is."""
    from spectree.speed import costmodel, stepmodel

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.delenv(REUSE_BUSY, raising=False)
    monkeypatch.setattr("spectree.speed.load.BUSY_CORES", math.inf)
    specs = []

    def live(models, prompts, policies, max_new_tokens, seed=0, load=None):
        specs.append(policies[0])
        return _pct_steps(0.003, 0.010)  # s_d / s_t = 0.3 at any ratio
    monkeypatch.setattr(stepmodel, "live_steps", live)
    tok = byte_tokenizer()
    models = (tiny_llama(0, layers=2, vocab=len(tok)), tiny_llama(1, 1, len(tok)), tok)
    one_token = replace(CURVE, machine="tiny-host")  # t_draft(1) / t_target(1) = 0.010 / 0.050 = 0.2
    found = costmodel.construction_ratio("tiny", models, one_token)
    assert found.ratio == pytest.approx(0.3) and found.rounds == pytest.approx([0.2, 0.3])  # run at 0.2, then 0.3
    prompts = len(found.prompts)
    assert specs == [stepmodel.RATIO_PCT.format(0.2)] * prompts + [stepmodel.RATIO_PCT.format(0.3)] * prompts
    assert found.prompts and all(k.startswith("sharegpt/") for k in found.prompts)  # FIT_PROMPTS, scored nowhere
    assert (found.draft_s, found.target_s) == pytest.approx((0.003, 0.010))
    assert (found.layers, found.trees) == (6 * prompts, 3 * prompts)
    monkeypatch.setattr(stepmodel, "live_steps", lambda *a, **k: pytest.fail("measured again"))
    assert costmodel.construction_ratio("tiny", models, one_token) == found  # read from the cache
    remeasured = replace(one_token, target_s=[0.04, 0.07, 0.13])  # the cost model measured again: so is the ratio
    monkeypatch.setattr(stepmodel, "live_steps", live)
    assert costmodel.construction_ratio("tiny", models, remeasured).rounds[0] == pytest.approx(0.25)
