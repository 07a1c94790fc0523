"""Figures of the draft-quality sweep (notebook 11, `quality.quality`, `projection`): readings and projected
speed as functions of the draft's top-1 agreement."""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from spectree.figures.checks import legend_outside


def plot_readings(readings: pd.DataFrame, papers: tuple[float, float] = (0.55, 0.85)) -> Figure:
    """Small multiples: each 04–07 reading (`quality_readings.readings_table`) against top-1 agreement, one panel
    each; the papers' drafts agree within `papers` (shaded: `quality_readings.PAPERS_AGREEMENT`)."""
    g = sns.relplot(readings, x="agreement", y="value", col="reading", col_wrap=3, kind="line", marker="o",
                    facet_kws={"sharey": False}, height=2.6, aspect=1.3)
    for ax in g.axes.flat:
        ax.axvspan(*papers, color="0.9", zorder=0)
        ax.axhline(0.0, color="k", lw=0.6, ls=":")
    g.set_titles("{col_name}", size=9)
    g.set_axis_labels("top-1 agreement at draft position 1", "")
    g.figure.suptitle("analysis readings as the draft improves (shaded: the papers' drafts)", y=1.02)
    return g.figure


def plot_projected(best: pd.DataFrame, lines: Sequence[float] = (1.3, 2.0)) -> Figure:
    """The best projected speedup of each family (`projection.best_by_family`) against top-1 agreement, with the
    speedup lines; the right panel gives γ of the best tree of all families at each agreement, in the same colours
    (one palette by family for both panels); the legend under the panels."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [2, 1]})
    families = list(dict.fromkeys(best.family))
    palette = dict(zip(families, sns.color_palette(n_colors=len(families))))
    sns.lineplot(best, x="agreement", y="speedup", hue="family", hue_order=families, palette=palette, marker="o",
                 ax=left)
    for y in lines:
        left.axhline(y, color="k", lw=0.8, ls="--")
        left.annotate(f"{y:g}×", (best.agreement.min(), y), xytext=(2, 2), textcoords="offset points", fontsize=8)
    left.set(xlabel="top-1 agreement at draft position 1", ylabel="projected speedup over our AR loop",
             title="projected speed on this machine (replay × measured cost model)")
    legend_outside(left, "below", ncol=min(len(families), 5))
    top = best.loc[best.groupby("agreement").speedup.idxmax()]
    sns.scatterplot(top, x="agreement", y="gamma", hue="family", hue_order=families, palette=palette, s=80,
                    ax=right, legend=False)
    for r in top.itertuples():
        right.annotate(r.spec, (r.agreement, r.gamma), xytext=(3, 3), textcoords="offset points", fontsize=7)
    right.set(xlabel="top-1 agreement", ylabel="γ of the best tree", title="best tree size")
    fig.tight_layout()
    return fig


def plotly_projected(best: pd.DataFrame, lines: Sequence[float] = (1.3, 2.0)) -> Any:
    import plotly.express as px

    fig = px.line(best, x="agreement", y="speedup", color="family", markers=True,
                  hover_data=["spec", "tau", "gamma", "weight"],
                  labels={"agreement": "top-1 agreement at draft position 1",
                          "speedup": "projected speedup over our AR loop"},
                  title="projected speed by family as the draft improves")
    for y in lines:
        fig.add_hline(y=y, line_dash="dash", annotation_text=f"{y:g}×")
    return fig
