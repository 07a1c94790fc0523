"""Repeated timing passes in the speed benchmark: interleaving, identical outputs, and the speedup spread."""
from __future__ import annotations

import statistics

import pytest
from helpers import ToyChat, tiny_llama

from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.speed.bench import Run, find_mismatches, run_strategies, summarize_runs, unsteady_outputs
from spectree.speed.references import HF
from spectree.speed.tables import prompt_rows, by_category, per_prompt, speed_table
from spectree.strategies import parse_strategy

OLD_COLUMNS = ["strategy", "tokens_per_s", "speedup", "speedup_same_kernels", "tau", "gamma", "tokens", "forwards",
               "seconds", "ms_per_token", "draft_frac", "verify_frac", "tree_frac", "other_cores", "exact"]
PROMPTS = [Prompt("toy", "0", "a", "x"), Prompt("toy", "1", "b", "y")]


@pytest.fixture(scope="module")
def models():
    return tiny_llama(0, layers=2), tiny_llama(1, layers=1), ToyChat()


def _policies():
    return {"ar": parse_strategy("ar"), "chain": parse_strategy("chain:k=2")}


def test_every_method_is_timed_repeats_times_interleaved_with_the_same_tokens(models):
    runs = run_strategies(models, PROMPTS, _policies(), 5, warmup=False, repeats=3)
    order = [(r.prompt, r.repeat, r.strategy) for r in runs]
    assert order == [(p.key, k, m) for p in PROMPTS for k in range(3) for m in (HF, "ar", "chain")]
    for p in PROMPTS:
        for m in (HF, "ar", "chain"):
            outs = [r.tokens for r in runs if r.prompt == p.key and r.strategy == m]
            assert len(outs) == 3 and outs[0] == outs[1] == outs[2] and outs[0]
    table = summarize_runs(runs).set_index("strategy")
    assert (table.speedup_min <= table.speedup_median + 1e-12).all()
    assert (table.speedup == table.speedup_median).all() and table.loc[HF, "speedup"] == 1.0
    assert table.exact.tolist() == [1.0, 1.0, 1.0] and table.loc[HF, "tokens"] == 3 * sum(
        len(r.tokens) for r in runs if r.strategy == HF and r.repeat == 0)
    assert not find_mismatches(models, runs, PROMPTS)
    with pytest.raises(SpectreeError, match="repeats must be a whole number >= 1, got 0"):
        run_strategies(models, PROMPTS, _policies(), 5, warmup=False, repeats=0)


def test_one_repeat_keeps_the_old_columns_and_numbers(models):
    runs = run_strategies(models, PROMPTS, _policies(), 5, warmup=False)
    assert {r.repeat for r in runs} == {0}
    table = summarize_runs(runs)
    assert [c for c in table.columns if c not in ("speedup_min", "speedup_median", "projected", "projected_error")
            and c not in ("prefill_frac", "keep_frac", "rest_frac")] == OLD_COLUMNS  # added since: the projection
    # (`speed.stepmodel`) and the time split's prefill, keep and rest shares
    t = table.set_index("strategy")
    assert t.speedup.tolist() == (t.tokens_per_s / t.loc[HF, "tokens_per_s"]).tolist()  # the pooled ratio, as before
    assert t.speedup_min.tolist() == t.speedup_median.tolist() == t.speedup.tolist()
    assert t.speedup_same_kernels.isna().all()  # no packed kernels: no such reference
    assert list(per_prompt(runs).columns) == ["prompt", "category", "strategy", "n_tokens", "seconds", "time_saved",
                                              "wasted_per_token"]


def _runs(seconds: dict[str, list[list[float]]]) -> list[Run]:
    """Runs of 10 tokens: method → [repeat][prompt] seconds, prompts p0 (category c) and p1 (category d)."""
    return [Run(m, f"p{i}", "cd"[i], list(range(10)), s, 5, 10, 0, 0.0, 0.0, repeat=k)
            for m, per_repeat in seconds.items() for k, row in enumerate(per_repeat) for i, s in enumerate(row)]


def test_speedup_is_the_median_of_the_per_repeat_speedups():
    # HF 2 s per repeat (both prompts); chain 1, 0.5, 2 s: per-repeat speedups 2, 4, 1
    runs = _runs({HF: [[1.0, 1.0]] * 3, "chain": [[0.5, 0.5], [0.25, 0.25], [1.0, 1.0]]})
    t = summarize_runs(runs).set_index("strategy")
    assert t.loc["chain", "speedup"] == t.loc["chain", "speedup_median"] == pytest.approx(2.0)
    assert t.loc["chain", "speedup_min"] == pytest.approx(1.0)
    assert t.loc["chain", "tokens_per_s"] == pytest.approx(60 / 3.5)  # pooled over repeats
    assert speed_table(runs).set_index("strategy").loc["chain", "speedup"] == pytest.approx(2.0)
    cat = by_category(runs).set_index(["category", "method"])
    assert cat.loc[("c", "chain"), "speedup"] == pytest.approx(statistics.median([2, 4, 1]))
    assert cat.loc[("d", "HF generate"), "speedup"] == 1.0 and cat.loc[("c", "chain"), "tau"] == 2.0


def test_per_prompt_and_claim_rows_with_repeats():
    runs = _runs({HF: [[1.0, 2.0], [1.0, 2.0]], "chain": [[0.5, 1.0], [1.0, 1.0]]})
    rows = per_prompt(runs)
    assert "repeat" in rows and rows.time_saved.tolist() == pytest.approx([0.5, 0.5, 0.0, 0.5])
    pooled = prompt_rows(runs)  # one row per (method, prompt), repeats summed: a bootstrap resamples prompts
    assert len(pooled) == 4 and pooled.set_index(["strategy", "prompt"]).loc[("chain", "p0"), "seconds"] == 1.5
    assert pooled.n_tokens.tolist() == [20] * 4


def test_outputs_that_change_between_repeats_are_reported():
    runs = _runs({HF: [[1.0, 1.0]] * 2, "chain": [[1.0, 1.0]] * 2})
    runs[-1].tokens = [9]
    assert unsteady_outputs(runs) == ["chain gave other tokens on p1 in repeat 1 than in its first repeat"]
    assert unsteady_outputs(runs[:-1]) == []


@pytest.mark.skipif(not __import__("os").path.exists("/proc/stat"), reason="needs Linux /proc/stat")
def test_a_busy_machine_is_warned_of_in_a_timed_run_and_not_in_an_untimed_one(models):
    import subprocess
    import sys
    import time
    import warnings

    prompts = PROMPTS * 8  # long enough for the meter to read the neighbour
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # about one core of other load
    try:
        time.sleep(0.3)
        with pytest.warns(UserWarning, match="the machine was busy"):
            run_strategies(models, prompts, _policies(), 16, warmup=False, hf_packed=False)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run_strategies(models, prompts, _policies(), 16, warmup=False, hf_packed=False, share_prefill=True)
    finally:
        spinner.kill()
        spinner.wait()
    assert not [w for w in seen if "the machine was busy" in str(w.message)]  # tokens, τ and γ: nothing timed
