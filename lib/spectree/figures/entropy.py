"""Figures of entropy against acceptance: C2T Fig. 2 (entropy × rank) and Gunjur et al. Fig. 1 (matched vs
mismatched draft tokens). Save them with `spectree.figures`."""
from __future__ import annotations

from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import seaborn as sns
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from spectree.analysis import stats as analysis
from spectree.analysis.entropy_match import MATCH_EDGES
from spectree.figures.checks import legend_outside

MASK_FACE = "#d9d9d9"  # cells with too few tokens
LOG_FLOOR = 1e-4  # log colour scales start here (an acceptance rate of 0 is drawn at the floor)
PROB_EDGES = np.linspace(0.0, 1.0, 21)  # DySpec Fig. 2 axes: 20 bins of width 0.05
MATCH_COLORS = {"matched": "#2e7d32", "mismatched": "#c62828"}


def entropy_note(cells: pd.DataFrame) -> str:
    """Which entropy a cell table (`analysis.stats.cell_table`) bins, in which unit: "entropy: full vocabulary, nats"."""
    return f"entropy: {analysis.ENTROPY_COLUMNS[cells.entropy.iloc[0]]}, {cells.unit.iloc[0]}" if len(cells) else ""


# --- C2T Fig. 2 ------------------------------------------------------------------------------------------

def with_gap(cells: pd.DataFrame) -> pd.DataFrame:
    """A cell table with `gap` = accept − mean_p, C2T Fig. 2 (c)'s sign (the table's `diff` is mean_p − accept)."""
    return cells.assign(gap=cells["accept"] - cells["mean_p"])


def plot_entropy_rank(cells: pd.DataFrame, n_tokens: int, min_count: int, note: str = "") -> Figure:
    """C2T Fig. 2 a/b/c plus the token count per cell: entropy bin (rows) × rank (columns); (c) in the paper's sign,
    acceptance − probability (positive: the draft under-estimates the token), coloured as the paper's caption
    says (s0 l.67: "red indicating probabilities higher than accept rates and blue indicating the opposite")."""
    cells = with_gap(cells)
    fig, axes = plt.subplots(2, 2, figsize=(17, 8.5), constrained_layout=True)
    panels = [("mean_p", "(a) mean draft probability (log colour)", "viridis", "log"),
              ("accept", "(b) acceptance rate (log colour)", "viridis", "log"),
              ("gap", "(c) acceptance − probability (the paper's colours: red where the probability is higher, "
                      "blue where the acceptance rate is)", "RdBu", "diverging"),
              ("count", f"tokens per cell (grey elsewhere: fewer than {min_count})", "Greys", "count")]
    for ax, (column, title, cmap, kind) in zip(axes.flat, panels):
        data = analysis.cell_matrix(cells, column, masked=kind != "count").astype(float)
        if kind == "log":
            sns.heatmap(data.clip(lower=LOG_FLOOR), ax=ax, cmap=cmap, norm=LogNorm(LOG_FLOOR, 1.0))
        elif kind == "diverging":
            vmax = float(np.nanmax(np.abs(data.to_numpy()))) if np.isfinite(data.to_numpy()).any() else 1.0
            sns.heatmap(data, ax=ax, cmap=cmap, center=0.0, vmin=-vmax, vmax=vmax, annot=data.shape[1] <= 20,
                        fmt=".2f", annot_kws={"fontsize": 6})
        else:
            sns.heatmap(data, ax=ax, cmap=cmap, norm=LogNorm(1, max(float(data.max().max()), 2.0)), annot=True,
                        fmt=".0f", annot_kws={"fontsize": 6}, mask=data.to_numpy() == 0)
        ax.set_facecolor(MASK_FACE)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("rank in the draft distribution (1 = most likely)")
        ax.set_ylabel(f"entropy bin ({cells.unit.iloc[0] if len(cells) else 'nats'})")
    fig.suptitle(f"Entropy × rank (C2T Fig. 2): {n_tokens:,} draft tokens; {entropy_note(cells)}{note}", fontsize=12)
    return fig


def plotly_entropy_rank(cells: pd.DataFrame, n_tokens: int, note: str = "") -> go.Figure:
    cells = with_gap(cells)
    titles = ["mean draft probability", "acceptance rate", "acceptance − probability (red: probability higher)",
              "tokens per cell"]
    fig = make_subplots(rows=2, cols=2, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.12)
    hover = analysis.cell_matrix(cells, "count", masked=False)
    for k, column in enumerate(["mean_p", "accept", "gap", "count"]):
        data = analysis.cell_matrix(cells, column, masked=column != "count")
        # plotly's RdBu, as matplotlib's: red at the low end (probability above acceptance), as the paper's Fig. 2c
        scale = {"gap": dict(colorscale="RdBu", zmid=0.0), "count": dict(colorscale="Greys")}.get(
            column, dict(colorscale="Viridis"))
        fig.add_trace(go.Heatmap(z=data.to_numpy(), x=list(data.columns), y=list(data.index), customdata=hover,
                                 hovertemplate="entropy %{y}, rank %{x}: %{z:.4f} (%{customdata} tokens)"
                                               "<extra></extra>",
                                 colorbar=dict(x=0.46 if k % 2 == 0 else 1.0, y=0.78 if k < 2 else 0.22, len=0.4),
                                 **scale), row=k // 2 + 1, col=k % 2 + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Entropy × rank (C2T Fig. 2), {n_tokens:,} draft tokens; {entropy_note(cells)}{note}",
                      height=800, width=1400)
    return fig


# --- Gunjur Fig. 1 ---------------------------------------------------------------------------------------

def _match_long(top1: pd.DataFrame) -> pd.DataFrame:
    """Top-1 tokens as weighted rows: matched with weight accept, mismatched with 1 − accept."""
    return pd.concat([pd.DataFrame({"entropy": top1.entropy, "label": "matched", "weight": top1.accept}),
                      pd.DataFrame({"entropy": top1.entropy, "label": "mismatched", "weight": 1 - top1.accept})],
                     ignore_index=True)


ENTROPY_AXIS = "draft entropy (full vocabulary, nats)"  # when the caller does not say which distribution's


def plot_entropy_match(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float],
                       paper_cutoff: float, min_count: int, entropy_label: str = ENTROPY_AXIS) -> Figure:
    """Left: entropy histograms of matched vs mismatched top-1 draft tokens; right: match rate per bin
    with the 0.5 line, our crossover and the paper's cutoff. `entropy_label` names the entropy binned
    (`analysis.entropy_match.entropy_label`: the logits' at T = 1, or the distribution's drawn from at T)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    long = _match_long(top1)
    edges = np.asarray(MATCH_EDGES)
    top = edges[min(len(edges) - 1, int(np.searchsorted(edges, top1.entropy.max(), side="right")) + 1)] \
        if len(top1) else edges[-1]
    sns.histplot(long, x="entropy", hue="label", weights="weight", bins=list(edges), element="step", ax=left,
                 palette=MATCH_COLORS, hue_order=list(MATCH_COLORS))
    legend_outside(left, "below")
    left.set_xlim(0, top)
    left.set_xlabel(entropy_label, fontsize=8)
    left.set_ylabel("tokens")
    left.set_title(f"Gunjur Fig. 1: {len(top1):,} drafted tokens ({top1.accept.sum():,.0f} matched)", fontsize=9)
    ok = rates[rates["count"] >= min_count]
    right.plot((ok.lo + ok.hi) / 2, ok.match_rate, marker="o", ms=3, color=MATCH_COLORS["matched"],
               label=f"match rate (bins with ≥ {min_count} tokens)")
    right.axhline(0.5, color="grey", lw=1, ls=":")
    right.axvline(paper_cutoff, color="black", ls="--", lw=1, label=f"paper's cutoff {paper_cutoff:g}")
    if crossover is not None:
        right.axvline(crossover, color=MATCH_COLORS["mismatched"], lw=1.5, label=f"our crossover {crossover:.2f}")
    right.set_xlim(0, top)
    right.set_ylim(0, 1)
    right.set_xlabel(entropy_label, fontsize=8)
    right.set_ylabel("share of matched tokens")
    right.set_title("mismatch likelier than match below the 0.5 line", fontsize=9)
    legend_outside(right, "below", fontsize=7, ncol=1)
    return fig


def plotly_entropy_match(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float],
                         paper_cutoff: float, entropy_label: str = ENTROPY_AXIS) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["tokens per entropy bin", "match rate"])
    centres = (rates.lo + rates.hi) / 2
    for label in MATCH_COLORS:
        fig.add_trace(go.Bar(x=centres, y=rates[label], name=label, marker_color=MATCH_COLORS[label],
                             opacity=0.6), row=1, col=1)
    fig.add_trace(go.Scatter(x=centres, y=rates.match_rate, customdata=rates["count"], name="match rate",
                             hovertemplate="entropy %{x:.2f}: %{y:.3f} (%{customdata} tokens)<extra></extra>",
                             line=dict(color=MATCH_COLORS["matched"])), row=1, col=2)
    fig.add_vline(x=paper_cutoff, line_dash="dash", row=1, col=2)
    if crossover is not None:
        fig.add_vline(x=crossover, line_color=MATCH_COLORS["mismatched"], row=1, col=2)
    fig.update_layout(barmode="overlay", height=450, width=1200,
                      title=f"Entropy of matched vs mismatched draft tokens (Gunjur Fig. 1), {len(top1):,} tokens")
    fig.update_xaxes(title_text=entropy_label)
    return fig
