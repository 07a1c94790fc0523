"""Every rule the paper claims use can give every verdict it claims to give: for each rule helper of
`claims.claims` (and the deterministic-count and rising-steps rules of notebooks 06, 07 and 09), small synthetic
inputs that hold, do not hold and are inconclusive (and not testable where the rule can say so), each asserted. The
claims restated so that they can fail — DySpec Table 5's block counts and timing (notebook 09), DySpec Fig. 2 left
(06), Gunjur Fig. 1's rise (07) and EDD Table 3's leaf ablation (01) — are tested through the functions that build
them, with data for each verdict, including data on which the old rule (ρ > 0, γ higher, the loop's own
original ÷ DFS time, a ±0.05 tolerance) would have held while the new one does not."""
import numpy as np
import pandas as pd
import pytest
from synthetic_tokens import of_prompts, per_prompt, prompts, verdicts

from spectree.claims import claims as C
from spectree.claims.verdicts import BAR, VERDICTS
from spectree.analysis import entropy_match, sparsity_claims, stats
from spectree.claims.rules import prompt_codes, prompt_sums, ratio_statistic
from spectree.analysis.tree_tau import LEAVES, SHIPPED, ablation_claims

HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = VERDICTS


def _text(reading):
    """A diagnosis reading's words (a dict with "text", or plain text)."""
    return reading["text"] if isinstance(reading, dict) else str(reading)


# --- the rule helpers of claims.claims ---------------------------------------------------------------------

def test_interval_rule_gives_each_verdict():
    assert C.interval_rule(1.0, 0.6, 1.4, 0.5, 10, "x").verdict == HOLDS
    assert C.interval_rule(0.2, 0.1, 0.3, 0.5, 10, "x").verdict == FAILS
    assert C.interval_rule(0.5, 0.3, 0.7, 0.5, 10, "x").verdict == INCONCLUSIVE
    assert C.interval_rule(0.2, 0.1, 0.3, 0.5, 10, "x", above=False).verdict == HOLDS  # the ≤ side
    assert C.interval_rule(1.0, 0.6, 1.4, 0.5, 3, "x", min_n=8).verdict == INCONCLUSIVE  # too few units
    assert C.interval_rule(1.0, float("nan"), 1.4, 0.5, 10, "x").verdict == INCONCLUSIVE  # no interval


def test_proportion_rule_gives_each_verdict():
    assert C.proportion_rule(90, 100, 0.5, "share").verdict == HOLDS
    assert C.proportion_rule(10, 100, 0.5, "share").verdict == FAILS
    assert C.proportion_rule(50, 100, 0.5, "share").verdict == INCONCLUSIVE
    assert C.proportion_rule(0, 0, 0.5, "share").verdict == INCONCLUSIVE


def test_mean_rule_gives_each_verdict():
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.1, 20)
    assert C.mean_rule(1.0 + noise, 0.0, "mean").verdict == HOLDS
    assert C.mean_rule(-1.0 + noise, 0.0, "mean").verdict == FAILS
    assert C.mean_rule(np.r_[noise, -noise], 0.0, "mean").verdict == INCONCLUSIVE  # centred on the bar
    assert C.mean_rule([1.0], 0.0, "mean").verdict == INCONCLUSIVE  # one value: no interval


def test_correlation_rule_gives_each_verdict():
    x = np.arange(40.0)
    assert C.correlation_rule(x, x + np.sin(x), 0.5, "ρ").verdict == HOLDS
    assert C.correlation_rule(x, -x, 0.0, "ρ", strict=True).verdict == FAILS
    weak = np.random.default_rng(1).permutation(40)
    ev = C.correlation_rule(x, weak, 0.0, "ρ", strict=True)
    assert ev.verdict == INCONCLUSIVE and ev.low < 0 < ev.high
    assert C.correlation_rule(x[:5], x[:5], 0.0, "ρ").verdict == INCONCLUSIVE  # below min_n


def test_bootstrap_rule_gives_each_verdict():
    def mean(x, axis=-1):
        return np.mean(x, axis=axis)
    up = np.linspace(0.8, 1.2, 10)
    assert C.bootstrap_rule([up], mean, 0.0, "mean", strict=True).verdict == HOLDS
    assert C.bootstrap_rule([-up], mean, 0.0, "mean", strict=True).verdict == FAILS
    assert C.bootstrap_rule([np.tile([1.0, -1.0], 5)], mean, 0.0, "mean", strict=True).verdict == INCONCLUSIVE
    assert C.bootstrap_rule([up[:5]], mean, 0.0, "mean").verdict == INCONCLUSIVE  # below MIN_PROMPTS


def _per_prompt_mean(rates, size=50):
    """A cluster statistic: the mean of a 0/1 token value over the drawn prompts, each prompt at its rate."""
    labels = prompts(len(rates), size)
    values = (np.tile(np.arange(size), len(rates)) < per_prompt(rates, size) * size).astype(float)
    codes, g = prompt_codes(labels)
    return ratio_statistic(prompt_sums(codes, g, values), prompt_sums(codes, g)), g, len(values)


def test_cluster_rule_gives_each_verdict():
    for rates, verdict in (([0.8, 0.9] * 5, HOLDS), ([0.1, 0.2] * 5, FAILS), ([0.1, 0.9] * 5, INCONCLUSIVE)):
        statistic, g, n = _per_prompt_mean(rates)
        assert C.cluster_rule(statistic, g, 0.5, "rate", tokens=n, n_resamples=500).verdict == verdict
    statistic, g, n = _per_prompt_mean([0.8, 0.9] * 2)  # four prompts: too few to resample
    assert C.cluster_rule(statistic, g, 0.5, "rate", tokens=n).verdict == INCONCLUSIVE


def test_prompt_interval_rule_gives_each_verdict():
    assert C.prompt_interval_rule(1.0, 0.8, 1.2, 0.5, 10, "x").verdict == HOLDS
    assert C.prompt_interval_rule(0.2, 0.1, 0.3, 0.5, 10, "x").verdict == FAILS
    assert C.prompt_interval_rule(0.5, 0.3, 0.7, 0.5, 10, "x").verdict == INCONCLUSIVE
    assert C.prompt_interval_rule(1.0, 0.8, 1.2, 0.5, 10, "x", tokens=5, min_tokens=30).verdict == INCONCLUSIVE


def test_tolerance_rule_gives_each_verdict():
    assert C.tolerance_rule(0.2, 0.05, 10, "effect", "seeds").verdict == HOLDS
    assert C.tolerance_rule(-0.2, 0.05, 10, "effect", "seeds").verdict == FAILS
    assert C.tolerance_rule(0.01, 0.05, 10, "effect", "seeds").verdict == INCONCLUSIVE
    assert C.tolerance_rule(None, 0.05, 10, "effect", "seeds").verdict == INCONCLUSIVE


def test_all_of_and_not_testable_give_each_verdict():
    yes, no = C.interval_rule(1.0, 0.6, 1.4, 0.5, 10, "x"), C.interval_rule(0.2, 0.1, 0.3, 0.5, 10, "x")
    maybe, never = C.interval_rule(0.5, 0.3, 0.7, 0.5, 10, "x"), C.not_testable("the paper leaves it unsaid")
    assert C.all_of([yes, yes]).verdict == HOLDS
    assert C.all_of([yes, no]).verdict == FAILS and C.all_of([maybe, no]).verdict == FAILS
    assert C.all_of([yes, maybe]).verdict == INCONCLUSIVE and C.all_of([]).verdict == INCONCLUSIVE
    assert C.all_of([never, never]).verdict == NOT_TESTABLE and never.n == 0
    assert C.all_of([yes, never]).verdict == INCONCLUSIVE
    # a decisive verdict on fewer than MIN_UNITS units is inconclusive once it is a claim
    assert C.claim("x", "—", 1, C.interval_rule(1.0, 0.6, 1.4, 0.5, 7, "x"), kind=BAR)["verdict"] == INCONCLUSIVE


# --- deterministic counts and rising steps ---------------------------------------------------------------------

def test_count_rule_reads_a_count_exactly():
    assert sparsity_claims.count_rule(0.5, 10, "original − DFS", "trees").verdict == HOLDS
    assert sparsity_claims.count_rule(0.0, 10, "original − DFS", "trees").verdict == FAILS  # equal is not fewer
    assert sparsity_claims.count_rule(-3.0, 10, "original − DFS", "trees").verdict == FAILS
    assert sparsity_claims.count_rule(float("nan"), 10, "original − DFS", "trees").verdict == INCONCLUSIVE
    ev = sparsity_claims.count_rule(0.01, 10, "original − DFS", "trees")  # no tolerance: a small margin is a margin
    assert ev.verdict == HOLDS and ev.rule.startswith("deterministic count (exact, no interval)")
    assert "tolerance" not in ev.rule and ev.low == ev.high == ev.estimate
    assert sparsity_claims.steps_rule([1.0, 2.0, 3.0], 10, "ratio", "trees", ["a", "b", "c"]).verdict == HOLDS
    assert sparsity_claims.steps_rule([1.0, 3.0, 2.0], 10, "ratio", "trees", ["a", "b", "c"]).verdict == FAILS
    assert sparsity_claims.steps_rule([3.0, 2.0, 1.0], 10, "ratio", "trees", ["a", "b", "c"], falls=True).verdict == HOLDS
    assert sparsity_claims.steps_rule([1.0], 10, "ratio", "trees", ["a"]).verdict == INCONCLUSIVE  # nothing to compare


def _rising_tokens(curve, n_prompts=10, size=400, seed=0):
    """Tokens with x uniform on [0, 1) and y ~ Bernoulli(curve(x)), `size` per prompt."""
    rng = np.random.default_rng(seed)
    x = rng.random(n_prompts * size)
    y = (rng.random(len(x)) < curve(x)).astype(float)
    return x, y, prompts(n_prompts, size)


def test_rise_rule_gives_each_verdict_where_rho_above_zero_would_hold():
    edges = np.linspace(0.0, 1.0, 6)
    x, y, g = _rising_tokens(lambda p: 0.1 + 0.8 * p)
    assert stats.rise_rule(x, y, g, edges, "y", n_resamples=500)[0].verdict == HOLDS
    x, y, g = _rising_tokens(lambda p: 0.9 - 0.8 * p)
    assert stats.rise_rule(x, y, g, edges, "y", n_resamples=500)[0].verdict == FAILS
    # rising up to 0.8, then a fall: ρ > 0 holds on these tokens, every step rising does not
    x, y, g = _rising_tokens(lambda p: np.where(p < 0.8, p, 0.2))
    assert C.correlation_rule(x, y, 0.0, "ρ", strict=True, level=0.99).verdict == HOLDS
    ev, bins = stats.rise_rule(x, y, g, edges, "y", n_resamples=500)
    assert ev.verdict == FAILS and ev.high < 0 and len(bins) == 5
    x, y, g = _rising_tokens(lambda p: 0.1 + 0.8 * p, n_prompts=5)  # five prompts: too few
    assert stats.rise_rule(x, y, g, edges, "y", n_resamples=500)[0].verdict == INCONCLUSIVE
    ev, bins = stats.rise_rule(x[:40], y[:40], g[:40], edges, "y")  # no bin holds 30 tokens
    assert ev.verdict == INCONCLUSIVE and bins == [] and "no step" in ev.rule


# --- notebook 09: DySpec Table 5 / Fig. 9 through block_claims -----------------------------------------------------

def _blocks(ratios, key, values, trees=10):
    return pd.DataFrame({"trees": trees, "nodes": 100.0, "depth": 5.0, "prefix": 0.0,
                         "original": np.asarray(ratios) * 10, "dfs": 10.0, "ratio": ratios, key: values})


def _times(sparse, dense, reps=10):
    """Timing rows at 2048 nodes: per (kernel, order) `reps` rounds spread evenly over (first, last)."""
    rows = []
    for order in ("original", "dfs"):
        row = {"nodes": 2048, "prefix": 0, "order": order, "blocks": 10, "reps": reps, "device": "cpu"}
        for kernel, spec in (("sparse", sparse[order]), ("dense", dense[order])):
            ms = np.linspace(*spec, reps).tolist()
            row.update({f"{kernel}_rounds": ms, f"{kernel}_ms": float(np.median(ms))})
        rows.append(row)
    return pd.DataFrame(rows)


SIZES = [256.0, 512.0, 1024.0]
PREFIXES = [0.0, 512.0, 1024.0]
GOOD_TIMES = _times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)}, {"original": (9.0, 9.2), "dfs": (9.0, 9.2)})


def _claims(random=(1.6, 2.5, 4.0), logged=(1.5, 1.3, 1.1), times=GOOD_TIMES, trees=10):
    return sparsity_claims.block_claims(_blocks(list(random), "nodes", SIZES, trees), _blocks(list(logged), "prefix", PREFIXES,
                                                                                       trees), times)


def _claims_with_trees():
    """The claims with per-tree tables behind the summaries: 10 trees a size (every tree the summary's counts) and 10
    logged trees at each prefix."""
    from spectree.analysis.sparsity import summarise_blocks

    random = pd.DataFrame([{"tree": t, "nodes": n, "depth": 5.0, "original": 10.0 * r, "dfs": 10.0, "bfs": 10.0}
                           for n, r in zip(SIZES, (1.6, 2.5, 4.0)) for t in range(10)])
    logged = pd.DataFrame([{"tree": t, "prefix": p, "nodes": 100.0, "depth": 5.0, "original": 10.0 * r, "dfs": 10.0,
                            "bfs": 10.0} for p, r in zip(PREFIXES, (1.5, 1.3, 1.1)) for t in range(10)])
    return sparsity_claims.block_claims(summarise_blocks(random, "nodes"), summarise_blocks(logged, "prefix"),
                                        GOOD_TIMES, trees=(random, logged))


def test_block_count_claims_give_each_verdict_exactly():
    held = _claims()
    assert verdicts(held)[:3] == [HOLDS] * 3 and [c["n"] for c in held[:3]] == [30, 30, 10]
    assert all(c["rule"].startswith("deterministic count") and "tolerance" not in c["rule"] for c in held[:3])
    # the dilution by a prefix is arithmetic once DFS needs fewer tree tiles: not testable, the count beside
    assert held[3]["verdict"] == NOT_TESTABLE and held[3]["details"]["counted"] == HOLDS
    assert "a fall by arithmetic, not a reading" in held[3]["rule"]
    # each count claim is re-read on the two halves of its trees given the per-tree tables
    per_tree = _claims_with_trees()
    assert [c["halves"] for c in per_tree[:3]] == [[HOLDS, HOLDS]] * 3 and per_tree[0]["repeat"] == "repeats"
    # a ratio of 1.03 is fewer blocks, read exactly (a ±0.05 tolerance called it inconclusive)
    assert verdicts(_claims(random=(1.03, 1.04, 1.05), logged=(1.03, 1.02, 1.01)))[:3] == [HOLDS] * 3
    # equal counts are not fewer; a saving that shrinks at one size does not grow; a ratio that rises with the
    # prefix is not diluted
    failed = _claims(random=(1.0, 2.5, 2.4), logged=(1.0, 1.2, 1.1))
    assert verdicts(failed)[:3] == [FAILS] * 3 and failed[3]["details"]["counted"] == FAILS
    assert _text(failed[0]["readings"]["more prompts"]).startswith("would not flip it (a deterministic count")
    few = _claims(trees=2)  # 6 random and 2 logged trees: below the 8 units a verdict needs
    assert verdicts(few)[:3] == [INCONCLUSIVE] * 3 and [c["n"] for c in few[:3]] == [6, 6, 2]
    assert _text(few[0]["readings"]["more prompts"]).startswith("too few random trees: n = 6 < 8")
    one = sparsity_claims.block_claims(_blocks([1.6], "nodes", [256.0]), _blocks([1.5], "prefix", [0.0]), GOOD_TIMES)
    assert one[1]["verdict"] == INCONCLUSIVE and "nothing to compare" in one[1]["rule"]


def _per_tree(ratios_by_size, seed=0, spread=0.0):
    """10 random trees a size whose original ÷ DFS ratios scatter by ±`spread` around each size's ratio."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"tree": t, "nodes": n, "depth": 5.0, "original": 10.0 * (r + spread * rng.uniform(-1, 1)),
                          "dfs": 10.0, "bfs": 10.0} for n, r in zip(SIZES, ratios_by_size) for t in range(10)])


def test_the_random_trees_are_a_sample_read_with_their_interval():
    from spectree.analysis.sparsity import summarise_blocks

    def claims(random):
        logged = pd.DataFrame([{"tree": t, "prefix": p, "nodes": 100.0, "depth": 5.0, "original": 15.0 - p / 512,
                                "dfs": 10.0, "bfs": 10.0} for p in PREFIXES for t in range(10)])
        return sparsity_claims.block_claims(summarise_blocks(random, "nodes"), summarise_blocks(logged, "prefix"),
                                            GOOD_TIMES, trees=(random, logged))

    tight = claims(_per_tree((1.6, 2.5, 4.0), spread=0.05))
    assert verdicts(tight)[:3] == [HOLDS] * 3 and "bootstrap interval over random trees" in tight[0]["rule"]
    # each row prints the intervals its own rule reads: original − DFS per size, the ratio per size
    assert "256 nodes, 1.6" in tight[0]["ours"] and "original − DFS" in tight[0]["ours"] and "95% CI" in tight[0]["ours"]
    assert tight[1]["ours"].count("95% CI") == 3 and tight[1]["n"] >= 10
    assert tight[2]["rule"].startswith("deterministic count")  # Fig. 9's logged trees share prompts: read exactly
    # the same means, trees scattered so widely that the sizes' intervals overlap: the rise is not read as growth,
    # and a mean saving of 0.002 blocks a tree among ±10 is not read as fewer blocks
    wide = claims(_per_tree((1.0002, 1.4, 1.8), spread=1.0))
    assert verdicts(wide)[:2] == [INCONCLUSIVE, INCONCLUSIVE]
    # the exact-count reading of the same means called both hold
    assert verdicts(_claims(random=(1.0002, 1.4, 1.8)))[:2] == [HOLDS, HOLDS]
    # a ratio that falls at one size, every tree alike: the rise does not hold
    assert verdicts(claims(_per_tree((1.6, 2.5, 2.0), spread=0.01)))[1] == FAILS


def test_the_speed_claim_reads_dense_attention_not_the_loops_own_block_count():
    faster = _claims()[4]
    assert faster["verdict"] == HOLDS and "faster in DFS order than dense attention" in faster["name"]
    assert faster["estimate"] == pytest.approx(9.1 / 1.05, rel=0.02) and faster["n"] == 10
    assert "2.21×" in faster["paper"] and "up to 2.1×" in faster["paper"] and "1.83×" in faster["paper"]
    assert "s2 l.427–428" in faster["paper"] and "it fails when the loop's per-tile calls" in faster["rule"]
    # twice as fast in DFS order as in the original (what its block count alone gives), but slower than dense
    # attention: the old rule (the loop's original ÷ DFS time ≥ 1.1) held, the new one does not
    slow = _claims(times=_times({"original": (20.0, 21.0), "dfs": (10.0, 10.5)},
                                {"original": (9.0, 9.2), "dfs": (9.0, 9.2)}))[4]
    assert slow["verdict"] == FAILS and slow["details"]["order_ratio"][0] == pytest.approx(2.0, rel=0.01)
    assert slow["interval"][1] < 1.1
    straddle = _claims(times=_times({"original": (20.0, 21.0), "dfs": (9.6, 7.2)},
                                    {"original": (9.1, 9.0), "dfs": (9.1, 9.0)}, reps=12))[4]
    assert straddle["verdict"] == INCONCLUSIVE and straddle["interval"][0] < 1.1 < straddle["interval"][1]
    seven = _claims(times=_times({"original": (2.0, 2.2), "dfs": (1.0, 1.1)},
                                 {"original": (9.0, 9.2), "dfs": (9.0, 9.2)}, reps=7))[4]
    assert seven["verdict"] == INCONCLUSIVE and seven["n"] == 7


# --- notebook 06: DySpec Fig. 2 left through dyspec_claims -----------------------------------------------------------

def _dyspec(curve, n_prompts=10, size=400, seed=0):
    p, accept, labels = _rising_tokens(curve, n_prompts, size, seed)
    return of_prompts(labels, p=p, accept=accept, target_prob=p)


def test_dyspec_left_gives_each_verdict():
    left = stats.dyspec_claims(_dyspec(lambda p: 0.1 + 0.8 * p), "x", n_resamples=500)[0]
    assert left["verdict"] == HOLDS and "rises at every step" in left["goal"] and "l.76" in left["paper"]
    assert stats.dyspec_claims(_dyspec(lambda p: 0.9 - 0.8 * p), "x", n_resamples=500)[0]["verdict"] == FAILS
    t = _dyspec(lambda p: np.where(p < 0.8, p, 0.2))  # rising up to 0.8, then a fall
    old = stats.spearman_rule(t.p, t.accept, t.prompt, 0.0, "ρ", strict=True, level=0.99, n_resamples=500)
    assert old.verdict == HOLDS  # the old rule, ρ > 0 over prompts, held
    assert stats.dyspec_claims(t, "x", n_resamples=500)[0]["verdict"] == FAILS
    few = stats.dyspec_claims(_dyspec(lambda p: 0.1 + 0.8 * p, n_prompts=5), "x", n_resamples=500)[0]
    assert few["verdict"] == INCONCLUSIVE and few["n"] == 5


# --- notebook 07: Gunjur Fig. 1's rise through gunjur_claims ----------------------------------------------------------

def _drawn(curve, n_prompts=10, size=400, seed=0):
    """Drafted positions with entropy uniform on [0, 4) nats, matched with probability curve(entropy)."""
    h, match, labels = _rising_tokens(lambda x: curve(4 * x), n_prompts, size, seed)
    return pd.DataFrame({"prompt": labels, "position": 0, "depth": 1, "entropy": 4 * h, "accept": match})


def _gunjur(curve, n_prompts=10, size=400, seed=0):
    drawn = _drawn(curve, n_prompts, size, seed)
    rates = entropy_match.match_rate_by_entropy(drawn.entropy, drawn.accept)
    return entropy_match.gunjur_claims(drawn, rates, entropy_match.crossover_entropy(rates), n_resamples=500)[1]


def test_gunjur_rise_gives_each_verdict():
    grows = _gunjur(lambda h: 0.9 - 0.2 * h)  # match falls with entropy: mismatch rises
    assert grows["verdict"] == HOLDS and "equal token count" in grows["goal"] and len(grows["details"]["by_bin"]) == 5
    assert _gunjur(lambda h: 0.1 + 0.2 * h)["verdict"] == FAILS
    def bent(h):  # mismatch rises, then falls in the top fifth
        return np.where(h < 3.2, 0.9 - 0.2 * h, 0.5)
    d = _drawn(bent)
    old = stats.spearman_rule(d.entropy, 1 - d.accept, d.prompt, 0.0, "ρ", strict=True, level=0.99, n_resamples=500)
    assert old.verdict == HOLDS and _gunjur(bent)["verdict"] == FAILS  # the old rule, ρ > 0 over prompts, held
    few = _gunjur(lambda h: 0.9 - 0.2 * h, n_prompts=5)
    assert few["verdict"] == INCONCLUSIVE and few["n"] == 5


# --- notebook 01: EDD Table 3 'w/o removing leaf nodes' through ablation_claims ---------------------------------------

def _row(label, tau, gamma=5.0, spread=0.3, prompts_=16, seed=0):
    rng = np.random.default_rng(seed)
    taus, gammas = tau + rng.normal(0, spread, prompts_), gamma + rng.normal(0, 0.2, prompts_)
    by_prompt = {f"p{i}": {"steps": 20.0, "tau": 20 * t, "gamma": 20.0 * g, "tau_drafted": 20 * t, "depth": 60.0}
                 for i, (t, g) in enumerate(zip(taus, gammas))}
    return {"label": label, "pair": "x", "spec": "pct", "ratio": 0.037, "tau": float(taus.mean()), "gamma": gamma,
            "alpha": float(taus.mean()) / 3, "depth": 3.0, "steps": 20 * prompts_, "by_prompt": by_prompt}


def _leaf(*rows):
    return ablation_claims(pd.DataFrame(list(rows)).set_index("label", drop=False))[0]


def test_leaf_ablation_gives_each_verdict_on_tau_alone():
    held = _leaf(_row(SHIPPED, 3.0), _row(LEAVES, 3.03, gamma=9.0))
    assert held["verdict"] == HOLDS and "γ is reported, not judged" in held["rule"]
    assert held["details"]["gamma_ratio"] == pytest.approx(1.8)
    failed = _leaf(_row(SHIPPED, 3.0), _row(LEAVES, 3.3, gamma=9.0))  # γ higher (the old half held), τ lifted 10%
    assert failed["verdict"] == FAILS and failed["interval"][0] > 1.02
    rng = np.random.default_rng(5)  # the ablation's τ wanders ±6% around PCT's, prompt by prompt
    noisy = _row(LEAVES, 3.06, gamma=9.0)
    noisy["by_prompt"] = {k: {**v, "tau": v["tau"] * (1 + rng.normal(0, 0.06))} for k, v in noisy["by_prompt"].items()}
    wandering = _leaf(_row(SHIPPED, 3.0), noisy)
    assert wandering["verdict"] == INCONCLUSIVE and wandering["interval"][0] < 1.02 < wandering["interval"][1]
    same = _leaf(_row(SHIPPED, 3.0), _row(LEAVES, 3.0))  # PCT removed nothing: the same nodes in every prompt
    assert same["verdict"] == NOT_TESTABLE and "identity" in same["rule"]
