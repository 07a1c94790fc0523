"""Figures of replay sweeps: τ against γ per strategy family (with the explorer's current policy on it) and
τ / γ per category."""
from __future__ import annotations

from typing import Any, Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from spectree.figures.checks import legend_outside

CURRENT_COLOR = "#d62728"
LOG_SPAN = 10.0  # a τ–γ plot whose γ spans more than this factor draws γ on a log scale


def plot_frontier(front: pd.DataFrame, current: Optional[dict] = None, label: str = "current",
                  ax: Optional[Axes] = None) -> Axes:
    """τ against γ: one line per family of the comparison set, the current policy as a red star."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.2, 4.2))
        fig.subplots_adjust(left=0.11, right=0.98, bottom=0.12, top=0.92)  # fixed margins: one draw per PNG
    for family, group in front.groupby("family", sort=False):
        group = group.sort_values("gamma")
        ax.plot(group.gamma, group.tau, marker="o", ms=4, lw=1.2, alpha=0.8, label=family)
    if current is not None and np.isfinite(current.get("tau", np.nan)):
        ax.plot([current["gamma"]], [current["tau"]], marker="*", ms=16, color=CURRENT_COLOR, ls="none",
                label=label, zorder=5)
    ax.set_xlabel("γ (draft tokens verified per forward)")
    ax.set_ylabel("τ (tokens per target forward)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("τ–γ of the comparison policies, current policy ★", fontsize=10)
    return ax

NAMES = {"eagle2": "EAGLE-2", "c2t": "C2T", "pct": "PCT", "cape": "CAPE", "vct": "VCT", "dyspec": "DySpec",
         "kary": "k-ary", "chain": "chain", "entropy": "entropy B(H)", "naive_width": "naive width",
         "sequences": "SpecInfer-style", "sequoia": "Sequoia", "dyspec_threshold": "DySpec threshold"}


def series(table: pd.DataFrame) -> pd.Series:
    """One curve label per sweep row: the strategy's paper name; C2T split by its second pruning
    ("C2T w/o topK", "C2T topK 15", as in C2T Fig. 4), chains by their stop rule, PCT by its s_d/s_t, DySpec into
    Alg. 1 uncapped (K = m) and capped."""
    def label(row: Any) -> str:
        base, params = NAMES.get(row["name"], row["name"]), row["params"]
        if row["name"] == "c2t":
            topk = params.get("topk", 0)
            return f"{base} topK {topk}" if topk else f"{base} w/o topK"
        if row["name"] == "pct" and params.get("ratio") is not None:
            return f"{base} s_d/s_t {params['ratio']:g}"
        if row["name"] == "dyspec":
            return f"{base} uncapped" if params.get("K", 8) >= params.get("m", 64) else f"{base} K {params.get('K', 8)}"
        stop = params.get("stop", "none")
        return f"{base} ({stop})" if row["name"] == "chain" and stop != "none" else base
    return table.apply(label, axis=1) if len(table) else pd.Series([], dtype=str)


def _curves(table: pd.DataFrame) -> pd.DataFrame:
    """Replayable whole-logbook rows with a `series` column, each series ordered by γ."""
    rows = table[(table.dataset == "all") & table.replayable.astype(bool)].copy()
    return rows.assign(series=series(rows)).sort_values(["series", "gamma"])


def plot_tau_gamma(table: pd.DataFrame, ax: Optional[Axes] = None, title: str = "τ against γ") -> Axes:
    """C2T Fig. 4: accept length τ (x, bonus token included) against candidates γ per forward (y), one
    line per strategy family; the lower right is better."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    data = _curves(table)
    sns.lineplot(data=data, x="tau", y="gamma", hue="series", style="series", markers=True, dashes=False,
                 sort=False, estimator=None, ax=ax)
    ax.set_xlabel("τ: tokens per target forward (accepted + 1)")
    ax.set_ylabel("γ: draft tokens verified per forward")
    if len(data) and data.gamma.min() > 0 and data.gamma.max() > LOG_SPAN * data.gamma.min():
        ax.set_yscale("log")  # one wide tree (VCT's γ in the hundreds) would flatten every other curve
        ax.set_ylabel("γ: draft tokens verified per forward (log scale)")
    ax.set_title(title)
    legend_outside(ax)
    return ax


def plotly_tau_gamma(table: pd.DataFrame, title: str = "τ against γ (replay)") -> Any:
    """Interactive τ–γ scatter of every replayable spec, coloured by family, grouped by sweep; hover for the spec."""
    import plotly.express as px

    data = _curves(table)
    fig = px.line(data, x="tau", y="gamma", color="series", line_group="series", facet_col="group", facet_col_wrap=3,
                  markers=True, hover_data=["spec", "alpha", "steps"], title=title,
                  labels={"tau": "τ (accepted + 1)", "gamma": "γ per forward"})
    fig.update_xaxes(matches=None, showticklabels=True)
    fig.update_yaxes(matches=None, showticklabels=True)
    return fig


def plot_per_category(cats: pd.DataFrame, title: str = "") -> Figure:
    """EDD Fig. 7: τ and mean tree size γ per prompt category (columns of `sweeps.per_category`)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    data = cats.assign(label=cats.dataset + "/" + cats.category)
    for ax, column, label in zip(axes, ("tau", "gamma"), ("τ (accepted + 1)", "γ: tree size without the root")):
        sns.barplot(data=data, x="label", y=column, hue="dataset", dodge=False, ax=ax)
        ax.set_xlabel("")
        ax.set_ylabel(label)
        ax.tick_params(axis="x", rotation=45, labelsize=8)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle(title or "per category")
    fig.tight_layout()
    return fig
