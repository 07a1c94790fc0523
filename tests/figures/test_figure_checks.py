"""Every picture RESULTS.md and the README show is readable: each registry figure, drawn by the function its notebook
calls on small data shaped like the notebook's, has no "nan" text, no legend over plotted data and no strip shape
(`figures.checks.figure_problems`); and each caption quotes the numbers of its own figure."""
from __future__ import annotations

import math
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from helpers import make_tree  # noqa: E402

from spectree.analysis import stats  # noqa: E402
from spectree.analysis.calibration import calibration_stats, reliability_table  # noqa: E402
from spectree.analysis.entropy_match import match_rate_by_entropy  # noqa: E402
from spectree.analysis.sparsity import dfs_tree  # noqa: E402
import spectree.figures.calibration  # noqa: E402  (reached as figures.calibration)
import spectree.figures.classifier  # noqa: E402  (reached as figures.classifier)
import spectree.figures.draft_quality  # noqa: E402  (reached as figures.draft_quality)
import spectree.figures.entropy  # noqa: E402  (reached as figures.entropy)
import spectree.figures.quality_sweep  # noqa: E402  (reached as figures.quality_sweep)
import spectree.figures.sparsity  # noqa: E402  (reached as figures.sparsity)
import spectree.figures.speed  # noqa: E402  (reached as figures.speed)
import spectree.figures.sweeps  # noqa: E402  (reached as figures.sweeps)
import spectree.figures.trees  # noqa: E402  (reached as figures.trees)
from spectree import figures  # noqa: E402
from spectree.figures.checks import FigureProblem, figure_problems  # noqa: E402
from spectree.reports.result_figures import REGISTRY, caption  # noqa: E402

RNG = np.random.default_rng(0)
PARENTS = [-1, 0, 0, 1, 1, 2, 3, 3, 4, 5, 6]


def unprobed_tree():
    """A tree drawn by a policy that reads no probabilities: draft_prob and joint NaN below the root."""
    tree = make_tree(PARENTS)
    tree.draft_prob[1:] = float("nan")
    tree.joint[1:] = float("nan")
    return tree


def speed_table(shift: float = 0.0) -> pd.DataFrame:
    methods = ["HF generate", "HF generate, our kernels", "AR (our loop)", "chain-4", "PCT", "DySpec m=4",
               "EAGLE-2 N=33", "C2T β=0.5"]
    n = len(methods)
    draft = RNG.uniform(0.2, 0.4, n)
    tree = RNG.uniform(0.0, 0.05, n)
    return pd.DataFrame({"method": methods, "speedup": np.r_[1.0, 1.2, 0.9, RNG.uniform(1.0, 2.0, n - 3) - shift],
                         "tau": RNG.uniform(1, 3, n), "gamma": RNG.uniform(1, 30, n),
                         "forwards": [0, 0, 10, *[10] * (n - 3)], "draft_frac": draft + tree, "tree_frac": tree,
                         "verify_frac": 1 - draft - tree})


def token_table(n: int = 4000) -> pd.DataFrame:
    p = RNG.uniform(0, 1, n)
    return pd.DataFrame({"p": p, "accept": (RNG.uniform(0, 1, n) < p).astype(float), "target_prob": p,
                         "entropy": RNG.uniform(0, 7, n), "rank": RNG.integers(0, 20, n), "examined": True})


def sweep_table() -> pd.DataFrame:
    rows = [("vct", {}, 2.4, 363.0), ("cape", {}, 2.1, 12.0), ("eagle2", {}, 2.3, 33.0), ("eagle2", {}, 2.0, 9.0),
            ("pct", {"ratio": 0.037}, 2.2, 8.0), ("pct", {"ratio": 0.037}, 2.4, 14.0), ("dyspec", {"K": 8, "m": 64},
                                                                                         2.3, 20.0),
            ("sequoia", {}, 2.2, 16.0), ("entropy", {}, 1.9, 5.0), ("chain", {"stop": "entropy"}, 1.6, 3.0)]
    return pd.DataFrame([{"name": n, "params": p, "tau": t, "gamma": g, "dataset": "all", "replayable": True,
                          "group": "edd_table2", "spec": n} for n, p, t, g in rows])


def reliability_diagrams(k: int = 5) -> list[dict]:
    conf, acc = RNG.uniform(0, 1, 600), (RNG.uniform(0, 1, 600) < 0.5).astype(float)
    prompt = np.repeat(np.arange(30), 20)
    return [{"title": f"diagram {i}", "xlabel": "confidence", "table": reliability_table(conf, acc, 10),
             "stats": calibration_stats(conf, acc, prompt, 10, 50)} for i in range(k)]


def training_curve():  # notebook 08's cell, as it draws
    curve = pd.DataFrame({"epoch": range(1, 21), "recall": np.linspace(0.5, 0.9, 20),
                          "positive_rate": np.linspace(0.4, 0.2, 20), "loss": np.linspace(0.7, 0.3, 20)})
    axes = curve.plot(x="epoch", y=["recall", "positive_rate", "loss"], subplots=True, sharex=True, figsize=(7, 6),
                      title="C2T classifier on held-out trees (dotted: the kept epoch)", legend=False)
    for ax in axes:
        ax.axvline(12, ls=":", c="k")
    return axes[0].figure


def surfaces_table() -> pd.DataFrame:
    grid = np.linspace(0, math.log(1000), 6)
    rows = [{"fixed": f, "value": v, "x": x, "y": y, "x_name": "P", "y_name": "H", "confidence": RNG.uniform()}
            for f in ("P", "H", "d") for v in (0.1, 0.5, math.log(1000)) for x in grid for y in grid]
    return pd.DataFrame(rows)


def projected() -> pd.DataFrame:
    rows = [{"agreement": a, "family": f, "speedup": s * (0.6 + a), "gamma": g * (1 + a), "spec": f"{f}:x"}
            for a in (0.2, 0.4, 0.6, 0.8) for f, s, g in (("PCT", 1.5, 8), ("EAGLE-2", 1.4, 20), ("chain", 1.2, 4),
                                                          ("DySpec", 1.3, 30), ("C2T", 1.6, 12))]
    return pd.DataFrame(rows)


FIGURES = {  # REGISTRY's notebook/stem (and a few more the notebooks save) → the figure, as the notebook draws it
    "00_quickstart/tree": lambda: figures.trees.draw_tree(unprobed_tree(), accepted=[1, 3, 6]).figure,
    "00_quickstart/tree_mask": lambda: figures.trees.draw_tree_mask(unprobed_tree()).figure,
    "01_train_drafts/agreement_by_position": lambda: figures.draft_quality.plot_acceptance_by_position(pd.DataFrame(
        [{"pair": p, "dataset": d, "position": k, "top1": top * 0.9 ** k} for p, top in (("smollm2-edd", 0.7),
         ("smollm2-vdm", 0.5), ("smollm2-layerskip", 0.6)) for d in ("mtbench", "humaneval") for k in range(1, 6)]
    )).figure,
    "01_train_drafts/draft_arms": lambda: figures.draft_quality.plot_arm_agreement(pd.DataFrame(
        {"pair": ["a:shipped", "b:base", "c:no-kl"], "role": ["shipped EDD", "base arm", "arm"],
         "top1": [0.6, 0.55, 0.5]}), 0.05).figure,
    "02_tree_strategies/tau_gamma_trees": lambda: figures.sweeps.plot_tau_gamma(sweep_table(), title="trees").figure,
    "02_tree_strategies/per_category": lambda: figures.sweeps.plot_per_category(pd.DataFrame(
        {"dataset": "mtbench", "category": ["writing", "coding", "math", "stem"], "tau": [2.1, 2.5, 2.3, 2.0],
         "gamma": [10, 14, 12, 9]}), "PCT by category"),
    "03_speed_benchmark/speedup_T0.6": lambda: figures.speed.plot_speedups(speed_table(), title="T = 0.6").figure,
    "03_speed_benchmark/time_split": lambda: figures.speed.plot_time_split(
        {0.0: speed_table(), 0.6: speed_table()}).figure,
    "04_entropy_rank/entropy_rank": lambda: figures.entropy.plot_entropy_rank(
        stats.cell_table(token_table(), min_count=5), 4000, 5),
    "05_calibration/reliability": lambda: figures.calibration.plot_reliability(reliability_diagrams()),
    "06_acceptance_vs_probability/acceptance_vs_probability": lambda: figures.calibration.plot_acceptance_vs_probability(
        {"greedy": token_table(), "T = 0.6": token_table()}, {k: {"accept": 0.5, "target_prob": 0.9}
                                                              for k in ("greedy", "T = 0.6")}),
    "07_entropy_match/entropy_match": lambda: figures.entropy.plot_entropy_match(
        *(lambda t: (t, match_rate_by_entropy(t.entropy, t.accept)))(token_table()[["entropy", "accept"]]),
        1.2, 1.0, 5),
    "08_classifier_surfaces/training_curve": training_curve,
    "08_classifier_surfaces/scatter3d": lambda: figures.classifier.plot_classifier_scatter(pd.DataFrame(
        {"P": RNG.uniform(0, 1, 200), "H": RNG.uniform(0, 7, 200), "d": RNG.integers(0, 10, 200),
         "colour": RNG.uniform(0, 1, 200)})),
    "08_classifier_surfaces/surfaces": lambda: figures.classifier.plot_surface_heatmaps(surfaces_table()),
    "08_classifier_surfaces/partial_dependence": lambda: figures.classifier.plot_partial_dependence(pd.DataFrame(
        [{"feature": f, "value": v, "confidence": RNG.uniform()} for f in ("P", "H", "d")
         for v in np.linspace(0, 1, 8)])),
    "09_block_sparsity/mask_random": lambda: figures.sparsity.plot_block_masks(
        make_tree(PARENTS, 0), dfs_tree(make_tree(PARENTS, 0)), 0, 4),
    "09_block_sparsity/block_counts": lambda: figures.sparsity.plot_block_counts(
        pd.DataFrame({"nodes": [256, 512, 1024], "original": [60.0, 200, 580], "dfs": [40.0, 110, 296],
                      "ratio": [1.5, 1.8, 1.96]}),
        pd.DataFrame({"prefix": [0, 256, 1024], "original": [20.0, 40, 90], "dfs": [12.0, 30, 80],
                      "ratio": [1.67, 1.33, 1.12], "nodes": [60, 60, 60]})),
    "09_block_sparsity/attention_times": lambda: figures.sparsity.plot_attention_times(pd.DataFrame(
        [{"nodes": n, "order": o, "dense_ms": n / 500, "sparse_ms": n / (900 if o == "dfs" else 400), "device": "cpu"}
         for n in (256, 512, 1024, 2048) for o in ("original", "dfs")])),
    "11_draft_quality/projected_speedup": lambda: figures.quality_sweep.plot_projected(projected(), (1.3, 2.0)),
    "11_draft_quality/readings": lambda: figures.quality_sweep.plot_readings(pd.DataFrame(
        [{"agreement": a, "reading": r, "value": RNG.uniform()} for a in (0.2, 0.5, 0.8)
         for r in ("04 gap", "05 ECE", "06 ρ", "07 crossover")])),
    "12_retrieval/speedup_all_prompts": lambda: figures.speed.plot_speedups(speed_table(), title="all").figure,
    "12_retrieval/speedup_by_length": lambda: figures.speed.plot_by_length(pd.DataFrame(
        [{"category": c, "method": m, "speedup": RNG.uniform(0.8, 2)} for c in ("short", "256", "1k", "2k")
         for m in ("PCT", "prompt lookup", "PCT + suffix", "AR (our loop)")])).figure,
    "13_engine_settings/settings_cpu": lambda: figures.speed.plot_engine_settings(pd.DataFrame(
        [{"engine": e, "λ": w, "cost model": "this CPU", "projected": 1.4, "default projected": 1.1}
         for e in ("sglang", "trtllm", "vllm") for w in (0.0, 0.25, 0.5, 0.75)]), "this CPU"),
}


def test_every_registry_figure_is_drawn_here():
    shown = {f"{e.notebook}/{e.stem.replace('*', '0.6')}" for e in REGISTRY}
    missing = shown - set(FIGURES) - {"02_tree_strategies/tau_gamma_c2t", "02_tree_strategies/tau_gamma_chain",
                                      "09_block_sparsity/mask_logged"}  # the same functions as figures drawn here
    assert not missing


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_results_figure_has_no_nan_no_legend_over_data_and_a_page_shape(name):
    fig = FIGURES[name]()
    try:
        assert figure_problems(fig) == []
    finally:
        plt.close(fig)


def test_the_check_finds_nan_text_a_legend_over_data_and_a_strip():
    fig, ax = plt.subplots(figsize=(12, 2))
    x = np.linspace(0, 1, 50)
    for k in range(4):
        ax.plot(x, np.full_like(x, 0.9) - 0.01 * k, label=f"line {k}")  # under an upper-right legend
    ax.legend(loc="upper right")
    ax.set_title(f"p = {float('nan'):.2f}")
    problems = figure_problems(fig)
    plt.close(fig)
    assert any("nan" in p for p in problems)
    assert any("legend covers" in p for p in problems)
    assert any("aspect" in p for p in problems)


def test_save_figure_warns_of_a_problem_and_still_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    fig, ax = plt.subplots()
    ax.set_title("nan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = figures.save_figure(fig, "bad", "nb")
    plt.close(fig)
    assert path.is_file() and any(issubclass(w.category, FigureProblem) for w in caught)


def test_the_tree_prints_each_draft_probability_and_no_number_where_none_is_known():
    tree = make_tree(PARENTS)
    tree.draft_prob[3] = float("nan")  # node 3's p from the joints: 0.125 / 0.25
    tree.draft_prob[4] = float("nan")
    tree.joint[4] = float("nan")  # node 4: nothing known
    assert figures.trees.node_probs(tree)[:5] == [None, 0.5, 0.5, 0.5, None]
    ax = figures.trees.draw_tree(tree)
    texts = [t.get_text() for t in ax.texts]
    plt.close(ax.figure)
    assert texts[3] == "103\n0.50" and texts[4] == "104" and texts[0] == "100"
    assert not any("nan" in t for t in texts)
    assert not any("nan" in t.get_text() for t in figures.trees.draw_tree(unprobed_tree()).texts)
    plt.close("all")


def speed_summary() -> dict:
    def rows(fast, same):
        return [{"method": "HF generate", "speedup": 1.0, "tau": 1.0, "gamma": 0.0, "forwards": 0, "tree_frac": None},
                {"method": "HF generate, our kernels", "speedup": 1.3, "tau": 1.0, "gamma": 0.0, "forwards": 0},
                {"method": "DySpec m=4", "speedup": fast, "speedup_same_kernels": same, "tau": 2.5, "gamma": 9.0,
                 "forwards": 10, "tree_frac": 0.02},
                {"method": "chain-4", "speedup": 1.1, "speedup_same_kernels": 0.9, "tau": 2.0, "gamma": 4.0,
                 "forwards": 10, "tree_frac": 0.04 if fast < 1.9 else 0.01},
                {"method": "synthetic", "speedup": float("nan"), "tau": 3.0, "gamma": 5.0, "forwards": 10}]
    claims = [{"name": "best strategy ≥ 1.3× HF generate (issue goal; paper speedups 2–3× on GPUs)",
               "ours": "DySpec m=4: 1.99×", "verdict": "holds", "kind": "bar"},
              {"name": "Gunjur: dyn width only saves the most time against chain-4 (T = 0)", "ours": "-579.0%",
               "verdict": "does not hold"},
              {"name": "Gunjur: dyn width only saves the most time against chain-4 (T = 0.6)", "ours": "-641.7%",
               "verdict": "does not hold"},
              {"name": "tree construction ≤ 5% of decoding time for every policy", "ours": "max 4.0% (chain-4, T = 0.6)",
               "verdict": "holds", "kind": "bar"}]
    return {"tables": {"speed table at T = 0": rows(1.99, 1.53), "speed table at T = 0.6": rows(1.67, 1.27)},
            "claims": claims}


def test_the_speed_captions_quote_their_own_temperature():
    entry = next(e for e in REGISTRY if e.stem == "speedup_T*")
    hot, cold = caption(entry, speed_summary(), "0.6"), caption(entry, speed_summary(), "0.0")
    assert "1.67×" in hot and "1.27×" in hot and "-641.7%" in hot
    assert "1.99" not in hot and "1.53" not in hot and "-579.0%" not in hot
    assert "1.99×" in cold and "1.53×" in cold and "-579.0%" in cold and "1.67" not in cold
    split = caption(next(e for e in REGISTRY if e.stem == "time_split"), speed_summary())
    assert "2.0% (DySpec m=4) at T = 0," in split and "4.0% (chain-4) at T = 0.6" in split


def test_captions_name_no_paper_figure_the_plot_is_not():
    by_stem = {e.stem: e for e in REGISTRY}
    assert by_stem["agreement_by_position"].paper == "—"
    assert "Fig. 6" not in by_stem["tau_gamma_trees"].paper
    assert "acceptance − probability" in by_stem["entropy_rank"].says
    summary = {"pairs": ["a"], "a": {"top1_by_position": [0.61, 0.5, 0.42], "tau_chain": 1.9}}
    assert "0.61 at position 1 → 0.42 at 3" in caption(by_stem["agreement_by_position"], summary)


def test_the_tau_gamma_plot_goes_logarithmic_where_one_tree_dwarfs_the_rest():
    ax = figures.sweeps.plot_tau_gamma(sweep_table())
    assert ax.get_yscale() == "log"
    plt.close(ax.figure)


def test_tick_labels_round_ln_1000():
    fig = figures.classifier.plot_surface_heatmaps(surfaces_table())
    labels = [ax.get_xlabel() + ax.get_ylabel() + ax.get_title() for ax in fig.axes]
    plt.close(fig)
    assert not any("6.90776" in t for t in labels) and any("6.91" in t for t in labels)


def test_entropy_rank_panel_c_is_acceptance_minus_probability():
    cells = stats.cell_table(token_table(), min_count=5)
    gap = figures.entropy.with_gap(cells)
    assert np.allclose((gap.accept - gap.mean_p).dropna(), (-gap["diff"]).dropna())
    fig = figures.entropy.plot_entropy_rank(cells, 4000, 5)
    titles = [ax.get_title() for ax in fig.axes]
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("(c)"))
    mesh = panel.collections[0]
    values, colours = np.ma.filled(mesh.get_array(), np.nan).ravel(), mesh.get_facecolors()
    plt.close(fig)
    assert any(t.startswith("(c) acceptance − probability") for t in titles)
    # the paper's colours (C2T Fig. 2c caption): red where the probability is higher than the acceptance rate
    low, high = np.nanargmin(values), np.nanargmax(values)
    assert values[low] < 0 < values[high]
    assert colours[low][0] > colours[low][2] and colours[high][2] > colours[high][0]
