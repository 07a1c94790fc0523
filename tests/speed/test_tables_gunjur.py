"""Gunjur et al. Fig. 5/6: per prompt, seconds saved against chain-4 vs the reduction in wasted draft passes."""
import math

import pytest

from spectree.speed.bench import HF, Run
from spectree.speed.tables import gunjur_per_prompt, per_prompt, wasted_passes


def run(strategy, prompt, seconds, forwards, tau_sum, gamma_sum, repeat=0, depth=4):
    """A run whose every tree is `depth` deep (the reference rows record none)."""
    return Run(strategy, prompt, "c", list(range(tau_sum)), seconds, forwards, tau_sum, gamma_sum, 0.0, 0.0,
               repeat=repeat, depth_sum=math.nan if strategy == HF else float(forwards * depth))


def test_wasted_passes_are_the_layers_drafted_past_the_accepted_tokens():
    """chain-4, 10 steps, 15 tokens accepted (τ sum 25): 40 − 15 = 25 passes wasted. A static b=2 d=4 tree verifies
    30 candidates a step, but wastes only its 4 layers less what it accepted: 10·4 − 25 = 15."""
    runs = [run("chain-4", "p", 5.0, 10, 25, 40), run("static b=2 d=4", "p", 4.0, 10, 35, 300)]
    assert wasted_passes(runs).wasted.tolist() == [25.0, 15.0]
    shallow = wasted_passes([run("dyn width + depth", "p", 1.0, 10, 30, 80, depth=2)]).wasted[0]
    assert shallow == 0.0  # trees cut at depth 2 whose both layers were accepted waste nothing


def test_gunjur_scatter_is_seconds_saved_against_chain4_and_passes_saved_per_prompt():
    runs = [run(HF, "p", 8.0, 64, 64, 0), run("chain-4", "p", 6.0, 20, 50, 80),
            run("dyn width only", "p", 5.0, 15, 50, 400), run("static b=2 d=4", "p", 6.5, 18, 50, 540),
            run(HF, "q", 8.0, 64, 64, 0), run("chain-4", "q", 6.0, 20, 50, 80),
            run("dyn width only", "q", 7.0, 25, 50, 700)]
    out = gunjur_per_prompt(runs).set_index(["strategy", "prompt"])
    assert sorted(out.index) == [("dyn width only", "p"), ("dyn width only", "q"), ("static b=2 d=4", "p")]
    # chain-4 wastes 20·4 − 30 = 50; dyn width only on p: 15·4 − 35 = 25 (25 fewer) and 1 s faster
    assert out.loc[("dyn width only", "p"), ["seconds_saved", "wasted_reduction"]].tolist() == pytest.approx([1.0, 25.0])
    assert out.loc[("dyn width only", "q"), ["seconds_saved", "wasted_reduction"]].tolist() == pytest.approx([-1.0, -25.0])
    assert out.loc[("static b=2 d=4", "p"), ["seconds_saved", "wasted_reduction"]].tolist() == pytest.approx([-0.5, 10.0])  # 18·4 − 32 = 40 wasted
    # the old scatter: a fraction saved against HF generate and the method's own unaccepted candidates per token
    old = per_prompt(runs).set_index(["strategy", "prompt"])
    assert old.loc[("dyn width only", "p"), "time_saved"] == pytest.approx(1 - 5.0 / 8.0)
    assert old.loc[("dyn width only", "p"), "wasted_per_token"] != pytest.approx(25.0)


def test_a_live_run_records_each_trees_depth():
    """bench's Run carries Σ depth over the steps of our loop (what `wasted_passes` reads): a chain of 3 is 3 deep
    at every step, AR's root alone 0."""
    from helpers import ToyChat, tiny_llama

    from spectree.prompts import Prompt
    from spectree.speed.bench import run_strategies
    from spectree.strategies import Chain, autoregressive

    models = tiny_llama(0, layers=2), tiny_llama(1, layers=1), ToyChat()
    runs = run_strategies(models, [Prompt("toy", "0", "a", "x")], {"chain": Chain(k=3), "ar": autoregressive()}, 8,
                          warmup=False)
    by = {r.strategy: r for r in runs}
    assert by["chain"].depth_sum == 3 * by["chain"].forwards and by["ar"].depth_sum == 0 and math.isnan(by[HF].depth_sum)
