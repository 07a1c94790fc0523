"""Figures of the live speed benchmark (seaborn PNG; plotly where a figure is worth rotating/hovering)."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes

from spectree.figures.checks import legend_outside


def plot_speedups(table: pd.DataFrame, ax: Optional[Axes] = None, title: str = "") -> Axes:
    """Horizontal bars: speedup over HF generate per method (1 = HF), τ and γ in the labels."""
    t = table.sort_values("speedup")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(t) + 1))
    labels = [f"{m}  (τ {a:.2f}, γ {g:.1f})" for m, a, g in zip(t.method, t.tau, t.gamma)]
    sns.barplot(x=t.speedup.to_numpy(), y=labels, hue=labels, ax=ax, palette="viridis", legend=False)
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set(xlabel="speedup over HF generate (tokens/s ratio, same run)", ylabel="", title=title)
    return ax


def plot_time_split(tables: Union[pd.DataFrame, Mapping[float, pd.DataFrame]], ax: Optional[Axes] = None) -> Axes:
    """Stacked shares of decoding time (draft model, tree construction, verification) per method: one panel per
    temperature of `tables` (temperature → speed table; one bare table: one panel), titled with its temperature and
    the largest tree-construction share in it; the legend under the panels."""
    tables = tables if isinstance(tables, Mapping) else {None: tables}
    if ax is None:
        n = max(len(t[t.forwards > 0]) for t in tables.values())
        _, axes = plt.subplots(len(tables), 1, figsize=(7, len(tables) * max(0.35 * n + 1.2, 2.6) + 0.6),
                               sharex=True, squeeze=False)  # panels stacked: a row of them is a strip
        axes = list(axes[:, 0])
    else:
        axes = [ax]
    for panel, (temp, table) in zip(axes, tables.items()):
        t = table[table.forwards > 0].set_index("method")
        split = pd.DataFrame({"draft model": t.draft_frac - t.tree_frac, "tree construction": t.tree_frac,
                              "verification": t.verify_frac})
        split.plot.barh(stacked=True, ax=panel, colormap="Set2", legend=False)
        worst = t.tree_frac.idxmax() if len(t) else None
        head = "" if temp is None else f"T = {float(temp):g}: "
        tail = f"tree construction at most {100 * t.tree_frac.max():.1f}% ({worst})" if worst is not None else ""
        panel.set(xlabel="share of decoding time" if panel is axes[-1] else "", ylabel="", xlim=(0, 1))
        panel.set_title(head + tail, fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False,
                          fontsize=8)
    axes[0].figure.suptitle("where decoding time goes (DySpec Fig. 4)", fontsize=10)
    axes[0].figure.tight_layout()
    return axes[0]


def plotly_per_prompt(df: pd.DataFrame, title: str = "Gunjur Fig. 5/6 against chain-4") -> Any:
    """Gunjur Fig. 5/6: per prompt (`tables.gunjur_per_prompt`), seconds saved against chain-4 vs the draft passes
    it wastes less; dashed zero lines, and each method's mean as a cross."""
    import plotly.express as px

    fig = px.scatter(df, x="wasted_reduction", y="seconds_saved", color="strategy", hover_data=["prompt", "category"],
                     labels={"wasted_reduction": "wasted draft passes saved", "seconds_saved": "seconds saved"},
                     title=title)
    means = df.groupby("strategy")[["wasted_reduction", "seconds_saved"]].mean().reset_index()
    for trace in px.scatter(means, x="wasted_reduction", y="seconds_saved", color="strategy").data:
        fig.add_trace(trace.update(marker_symbol="x", marker_size=14, showlegend=False, name=f"{trace.name} (mean)"))
    return fig.add_hline(y=0, line_dash="dash").add_vline(x=0, line_dash="dash")


def plot_by_length(per_length: pd.DataFrame, ax: Optional[Axes] = None, title: str = "") -> Axes:
    """Speedup over HF generate against prompt length (`tables.by_category` of a length-axis run: categories
    'short', '256', '1k', …, in run order), one line per method."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    sns.pointplot(per_length, x="category", y="speedup", hue="method", ax=ax, order=list(dict.fromkeys(per_length.category)))
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set(xlabel="prompt length (tokens, chat template included)", ylabel="speedup over HF generate", title=title)
    legend_outside(ax)
    return ax


def plot_engine_settings(results: pd.DataFrame, cost_model: str) -> Any:
    """Grouped bars per engine and draft quality λ: projected speedup of the tuned setting and of the engine's
    default, priced by one cost model (`results`: notebook 13's table); at most three draft qualities a row."""
    rows = results[results["cost model"] == cost_model]
    long = pd.concat([rows.assign(setting="tuned", speedup=rows.projected),
                      rows.assign(setting="engine default", speedup=rows["default projected"])], ignore_index=True)
    grid = sns.catplot(data=long, kind="bar", x="engine", y="speedup", hue="setting", col="λ", height=3, aspect=1.1,
                       palette="viridis", col_wrap=min(3, max(1, long["λ"].nunique())))  # no strip of panels
    grid.set_axis_labels("", "projected speedup over plain decoding")
    grid.figure.suptitle(f"priced by {cost_model}", y=1.04)
    return grid.figure
