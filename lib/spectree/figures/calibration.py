"""Figures of calibration: reliability diagrams (EDD Fig. 3b) and acceptance against draft probability
(DySpec Fig. 2)."""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from spectree.analysis import stats as analysis
from spectree.figures.entropy import PROB_EDGES

# --- EDD Fig. 3b -----------------------------------------------------------------------------------------

RELIABILITY_COLUMNS = 3  # reliability diagrams per row: five in one row would be a strip no page shows


def plot_reliability(diagrams: Sequence[dict[str, Any]]) -> Figure:
    """Reliability diagrams in a grid of at most RELIABILITY_COLUMNS per row (dicts of
    `calibration.calibration_diagrams`), one legend under them all."""
    cols = min(len(diagrams), RELIABILITY_COLUMNS)
    rows = -(-len(diagrams) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.4 * rows + 0.4), squeeze=False,
                             constrained_layout=True)
    for ax in axes.flat[len(diagrams):]:
        ax.set_visible(False)
    for ax, d in zip(axes.flat, diagrams):
        t, c = d["table"], d["stats"]
        width = float(t.hi.iloc[0] - t.lo.iloc[0])
        centres = (t.lo + t.hi) / 2
        ax.bar(centres, t.accept.fillna(0), width=width * 0.95, color="#4c72b0", alpha=0.85, label="acceptance")
        ax.scatter(t.confidence, t.accept, color="black", s=14, zorder=3, label="(mean confidence, acceptance)")
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
        for x, n in zip(centres, t["count"]):
            ax.text(x, 1.02, f"{n}", ha="center", va="bottom", fontsize=6, rotation=90, color="#444444")
        ax.text(-0.02, 1.02, "tokens", ha="right", va="bottom", fontsize=6, color="#444444")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.15)
        ax.set_xlabel(d["xlabel"])
        ax.set_ylabel(d.get("ylabel", "acceptance rate"))
        ax.set_title(f"{d['title']}\nECE {c['ece']:.3f} (95% CI {c['ci_low']:.3f}–{c['ci_high']:.3f}), "
                     f"{c['tokens']:,} tokens", fontsize=9)
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8,
               frameon=False)
    return fig


def plotly_reliability(diagrams: Sequence[dict[str, Any]]) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(diagrams), subplot_titles=[d["title"] for d in diagrams])
    for k, d in enumerate(diagrams, start=1):
        t, c = d["table"], d["stats"]
        fig.add_trace(go.Bar(x=(t.lo + t.hi) / 2, y=t.accept, customdata=np.stack([t["count"], t.confidence], -1),
                             hovertemplate="acceptance %{y:.3f}, mean confidence %{customdata[1]:.3f}, "
                                           "%{customdata[0]} tokens<extra></extra>",
                             name=f"{d['title']}: ECE {c['ece']:.3f}"), row=1, col=k)
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dash", color="grey"),
                                 showlegend=False), row=1, col=k)
        fig.update_xaxes(title_text=d["xlabel"], range=[0, 1], row=1, col=k)
        fig.update_yaxes(title_text=d.get("ylabel", "acceptance rate"), range=[0, 1], row=1, col=k)
    fig.update_layout(title="Reliability diagrams (EDD Fig. 3b)", height=480, width=480 * len(diagrams))
    return fig


# --- DySpec Fig. 2 ---------------------------------------------------------------------------------------

def _dyspec_panels(tokens: pd.DataFrame):
    """(name, y label, column-normalised histogram, column means) for the two panels of one token table."""
    t = tokens[tokens.examined]
    for column, label in (("accept", "acceptance"), ("target_prob", "target probability")):
        hist, _ = analysis.column_normalised_histogram(t.p, t[column], PROB_EDGES, PROB_EDGES)
        mean, _ = analysis.binned_mean(t.p, t[column], PROB_EDGES)
        yield column, label, hist, mean


def plot_acceptance_vs_probability(tables: dict[str, pd.DataFrame], rhos: dict[str, dict[str, float]]) -> Figure:
    """One row per setting (e.g. 'greedy', 'T = 0.6'): acceptance and target probability against draft
    probability, column-normalised, with the column means (white line)."""
    fig, axes = plt.subplots(len(tables), 2, figsize=(11, 4.6 * len(tables)), squeeze=False,
                             constrained_layout=True)
    centres = (PROB_EDGES[:-1] + PROB_EDGES[1:]) / 2
    for row, (name, tokens) in zip(axes, tables.items()):
        n = int(tokens.examined.sum())
        for ax, (column, label, hist, mean) in zip(row, _dyspec_panels(tokens)):
            image = ax.imshow(hist, origin="lower", extent=(0, 1, 0, 1), aspect="auto", cmap="magma", vmin=0, vmax=1)
            ax.plot(centres, mean, color="white", lw=1.5, marker="o", ms=3, label="column mean")
            ax.set_xlabel("draft probability")
            ax.set_ylabel(label)
            ax.set_title(f"{name}: {label} vs draft probability\nSpearman ρ {rhos[name][column]:.3f}, "
                         f"{n:,} draft tokens", fontsize=9)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7, frameon=False)
            fig.colorbar(image, ax=ax, label="share of the column")
    fig.suptitle("DySpec Fig. 2: each column (draft-probability bin) sums to 1", fontsize=11)
    return fig


def plotly_acceptance_vs_probability(tables: dict[str, pd.DataFrame], rhos: dict[str, dict[str, float]]
                                     ) -> go.Figure:
    titles = [f"{name}: {label} (ρ {rhos[name][col]:.3f})" for name in tables
              for col, label in (("accept", "acceptance"), ("target_prob", "target probability"))]
    fig = make_subplots(rows=len(tables), cols=2, subplot_titles=titles)
    centres = (PROB_EDGES[:-1] + PROB_EDGES[1:]) / 2
    for r, tokens in enumerate(tables.values(), start=1):
        for c, (_, label, hist, _) in enumerate(_dyspec_panels(tokens), start=1):
            fig.add_trace(go.Heatmap(z=hist, x=centres, y=centres, colorscale="Magma", zmin=0, zmax=1,
                                     showscale=(r, c) == (1, 1),
                                     hovertemplate="draft p %{x:.3f}, " + label + " %{y:.3f}: share %{z:.3f}"
                                                   "<extra></extra>"), row=r, col=c)
            fig.update_xaxes(title_text="draft probability", row=r, col=c)
            fig.update_yaxes(title_text=label, row=r, col=c)
    fig.update_layout(title="DySpec Fig. 2 (column-normalised)", height=450 * len(tables), width=1000)
    return fig
