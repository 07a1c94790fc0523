"""Gunjur et al. Fig. 5/6: per prompt, seconds saved against chain-4 vs the reduction in wasted draft passes."""
import math

import pandas as pd
import pytest

from spectree.speed.bench import Run

from spectree.speed.references import HF
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
            run("dyn width only", "q", 7.0, 25, 50, 700), run("naive width", "q", 6.5, 20, 45, 110),
            run("chain-5", "q", 5.5, 18, 50, 90)]  # not one of Gunjur's methods
    out = gunjur_per_prompt(runs).set_index(["strategy", "prompt"])
    assert sorted(out.index) == [("dyn width only", "p"), ("dyn width only", "q"), ("naive width", "q"),
                                 ("static b=2 d=4", "p")]  # naive width: a Fig. 5 panel (s1 l.129)
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
    from spectree.strategies.chain import Chain, autoregressive

    models = tiny_llama(0, layers=2), tiny_llama(1, layers=1), ToyChat()
    runs = run_strategies(models, [Prompt("toy", "0", "a", "x")], {"chain": Chain(k=3), "ar": autoregressive()}, 8,
                          warmup=False)
    by = {r.strategy: r for r in runs}
    assert by["chain"].depth_sum == 3 * by["chain"].forwards and by["ar"].depth_sum == 0 and math.isnan(by[HF].depth_sum)


def test_gunjur_rows_are_the_papers_methods_as_it_drafts_them():
    """One verification rule across Gunjur's table at T > 0, its Alg. 1: every row (the baseline chain-4 and simple
    cutoff too) offers the draft's top tokens, each verified as a fixed proposal ("selecting b top tokens", s1 l.73,
    l.125; the target's sample matched, Alg. 1); before issue 66 its chains drew theirs, two rules in one table.
    Naive width is timed for Fig. 5 but is no column of Fig. 2's table."""
    from spectree.core.drafting import offer_sampling
    from spectree.core.sampling import Sampling
    from spectree.speed.tables import GUNJUR_ROWS, GUNJUR_SCATTER, gunjur_table, speed_strategies
    from spectree.strategies.chain import Chain

    policies = speed_strategies(0.1, "0.6/0.2", None)
    warm = Sampling(temperature=0.6)
    for label in GUNJUR_SCATTER:
        assert offer_sampling(policies[label], warm).greedy, label
    assert not offer_sampling(Chain(k=4), warm).greedy  # a plain chain would draw: the rule the table used to mix in
    assert not offer_sampling(policies["VCT w=3 d=5"], warm).greedy  # another static tree still draws
    assert policies["naive width"].spec == "naive_width:d=10"  # k = 4, cutoff 1 nats: simple cutoff's chain
    assert policies["chain-4"].spec == "kary:b=1,offer=top" and policies["simple cutoff"].spec == "naive_width:k=1,d=10"
    table = pd.DataFrame({"method": list(GUNJUR_SCATTER), "ms_per_token": [10.0, 9, 8, 7, 6, 12],
                          "tokens_per_s": [100.0, 111, 125, 143, 167, 83]})
    assert list(gunjur_table(table).method) == list(GUNJUR_ROWS)


def test_gunjurs_top_token_chains_are_the_chains_under_greedy_decoding():
    """Live on a tiny pair: `kary:b=1,d=4,offer=top` decodes as `chain:k=4`, `naive_width:k=1` as the entropy-cutoff
    chain (`chain:stop=entropy`) at every cutoff, step by step (tokens, τ, γ, depth)."""
    from helpers import ToyChat, tiny_llama

    from spectree.prompts import Prompt
    from spectree.speed.bench import run_strategies
    from spectree.strategies.chain import Chain
    from spectree.strategies.gunjur import NaiveWidth
    from spectree.strategies.static import Kary

    models = tiny_llama(0, layers=2), tiny_llama(1, layers=1), ToyChat()
    cutoffs = (4.52, 4.56, 4.6)
    pairs = {"chain": (Chain(k=4), Kary(b=1, d=4, offer="top")),
             **{f"cut {c}": (Chain(k=10, stop="entropy", threshold=c), NaiveWidth(k=1, d=10, cutoff=c))
                for c in cutoffs}}
    policies = {f"{name} {i}": p for name, both in pairs.items() for i, p in enumerate(both)}
    runs = run_strategies(models, [Prompt("toy", "0", "a", "x"), Prompt("toy", "1", "a", "y")], policies, 24,
                          warmup=False, share_prefill=True)
    got = {(r.strategy, r.prompt): (r.tokens, r.tau_sum, r.gamma_sum, r.depth_sum) for r in runs if r.strategy != HF}
    for name in pairs:
        for prompt in ("toy/0", "toy/1"):
            assert got[f"{name} 0", prompt] == got[f"{name} 1", prompt], (name, prompt)
    depths = {got[f"cut {c} 0", "toy/0"][3] / got[f"cut {c} 0", "toy/0"][1] for c in cutoffs}
    assert len(depths) > 1  # the cutoffs stop the chain at different depths: the rule is exercised


def test_the_paper_profiles_guard_admits_gunjurs_depth_4_tree_and_only_his():
    """B(H) ≤ 7 to depth 4 (s1 l.131, l.143) is 2,801 nodes at worst: past the CPU's 1,024-node guard, inside
    GUNJUR_PAPER_GUARD, which the paper profile gives notebook 03's Gunjur trees and no other policy."""
    from spectree.speed.tables import GUNJUR_PAPER_GUARD, speed_strategies

    cpu = speed_strategies(0.1, "0.6/0.2", None, gunjur_depth=4)
    paper = speed_strategies(0.1, "0.6/0.2", None, gunjur_depth=4, gunjur_guard=GUNJUR_PAPER_GUARD)
    assert "more than the 1,024-node guard" in cpu["dyn width only"].oversized()
    assert paper["dyn width only"].worst_case() == (2801, 4) and paper["dyn width only"].oversized() is None
    # dyn width + depth stops branches by entropy up to the same depth 4: its worst case fits too (at depth 8 it
    # could reach 19,608 nodes, and the guard skipped it in every run before issue 73)
    assert paper["dyn width + depth"].worst_case() == (2801, 4) and paper["dyn width + depth"].oversized() is None
    assert {label for label, p in paper.items() if p.max_nodes != cpu[label].max_nodes} == {"dyn width only",
                                                                                          "dyn width + depth"}
