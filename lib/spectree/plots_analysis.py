"""Figures of the analysis notebooks (04–07): seaborn/matplotlib PNGs and plotly HTML, drawn from the tables
of `spectree.analysis`. Save them with `spectree.plots.save_figure` / `save_plotly`."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import seaborn as sns
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from . import analysis

MASK_FACE = "#d9d9d9"  # cells with too few tokens
LOG_FLOOR = 1e-4  # log colour scales start here (an acceptance rate of 0 is drawn at the floor)
PROB_EDGES = np.linspace(0.0, 1.0, 21)  # DySpec Fig. 2 axes: 20 bins of width 0.05
MATCH_COLORS = {"matched": "#2e7d32", "mismatched": "#c62828"}
ENTROPY_NOTE = "entropy: full vocabulary, natural log (nats)"


# --- C2T Fig. 2 ------------------------------------------------------------------------------------------

def plot_entropy_rank(cells: pd.DataFrame, n_tokens: int, min_count: int, note: str = "") -> Figure:
    """C2T Fig. 2 a/b/c plus the token count per cell: entropy bin (rows) × rank (columns)."""
    fig, axes = plt.subplots(2, 2, figsize=(17, 8.5), constrained_layout=True)
    panels = [("mean_p", "(a) mean draft probability (log colour)", "viridis", "log"),
              ("accept", "(b) acceptance rate (log colour)", "viridis", "log"),
              ("diff", "(c) probability − acceptance (red: probability above acceptance)", "RdBu_r", "diverging"),
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
        ax.set_ylabel("entropy bin (nats)")
    fig.suptitle(f"Entropy × rank (C2T Fig. 2): {n_tokens:,} draft tokens; {ENTROPY_NOTE}{note}", fontsize=12)
    return fig


def plotly_entropy_rank(cells: pd.DataFrame, n_tokens: int, note: str = "") -> go.Figure:
    titles = ["mean draft probability", "acceptance rate", "probability − acceptance", "tokens per cell"]
    fig = make_subplots(rows=2, cols=2, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.12)
    hover = analysis.cell_matrix(cells, "count", masked=False)
    for k, column in enumerate(["mean_p", "accept", "diff", "count"]):
        data = analysis.cell_matrix(cells, column, masked=column != "count")
        scale = {"diff": dict(colorscale="RdBu_r", zmid=0.0), "count": dict(colorscale="Greys")}.get(
            column, dict(colorscale="Viridis"))
        fig.add_trace(go.Heatmap(z=data.to_numpy(), x=list(data.columns), y=list(data.index), customdata=hover,
                                 hovertemplate="entropy %{y}, rank %{x}: %{z:.4f} (%{customdata} tokens)"
                                               "<extra></extra>",
                                 colorbar=dict(x=0.46 if k % 2 == 0 else 1.0, y=0.78 if k < 2 else 0.22, len=0.4),
                                 **scale), row=k // 2 + 1, col=k % 2 + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"Entropy × rank (C2T Fig. 2), {n_tokens:,} draft tokens; {ENTROPY_NOTE}{note}",
                      height=800, width=1400)
    return fig


# --- EDD Fig. 3b -----------------------------------------------------------------------------------------

def plot_reliability(diagrams: Sequence[dict[str, Any]]) -> Figure:
    """Reliability diagrams side by side (dicts of `analysis.calibration_diagrams`)."""
    fig, axes = plt.subplots(1, len(diagrams), figsize=(5.2 * len(diagrams), 5), squeeze=False,
                             constrained_layout=True)
    for ax, d in zip(axes[0], diagrams):
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
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7, frameon=False)
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
            ax.legend(loc="upper left", fontsize=7)
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


# --- Gunjur Fig. 1 ---------------------------------------------------------------------------------------

def _match_long(top1: pd.DataFrame) -> pd.DataFrame:
    """Top-1 tokens as weighted rows: matched with weight accept, mismatched with 1 − accept."""
    return pd.concat([pd.DataFrame({"entropy": top1.entropy, "label": "matched", "weight": top1.accept}),
                      pd.DataFrame({"entropy": top1.entropy, "label": "mismatched", "weight": 1 - top1.accept})],
                     ignore_index=True)


def plot_entropy_match(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float],
                       paper_cutoff: float, min_count: int) -> Figure:
    """Left: entropy histograms of matched vs mismatched top-1 draft tokens; right: match rate per bin
    with the 0.5 line, our crossover and the paper's cutoff."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    long = _match_long(top1)
    edges = np.asarray(analysis.MATCH_EDGES)
    top = edges[min(len(edges) - 1, int(np.searchsorted(edges, top1.entropy.max(), side="right")) + 1)] \
        if len(top1) else edges[-1]
    sns.histplot(long, x="entropy", hue="label", weights="weight", bins=list(edges), element="step", ax=left,
                 palette=MATCH_COLORS, hue_order=list(MATCH_COLORS))
    left.set_xlim(0, top)
    left.set_xlabel("draft entropy (full vocabulary, nats)")
    left.set_ylabel("tokens")
    left.set_title(f"Gunjur Fig. 1: {len(top1):,} top-1 draft tokens ({top1.accept.sum():,.0f} matched)", fontsize=9)
    ok = rates[rates["count"] >= min_count]
    right.plot((ok.lo + ok.hi) / 2, ok.match_rate, marker="o", ms=3, color=MATCH_COLORS["matched"],
               label=f"match rate (bins with ≥ {min_count} tokens)")
    right.axhline(0.5, color="grey", lw=1, ls=":")
    right.axvline(paper_cutoff, color="black", ls="--", lw=1, label=f"paper's cutoff {paper_cutoff:g}")
    if crossover is not None:
        right.axvline(crossover, color=MATCH_COLORS["mismatched"], lw=1.5, label=f"our crossover {crossover:.2f}")
    right.set_xlim(0, top)
    right.set_ylim(0, 1)
    right.set_xlabel("draft entropy (nats)")
    right.set_ylabel("share of matched tokens")
    right.set_title("mismatch likelier than match below the 0.5 line", fontsize=9)
    right.legend(fontsize=7)
    return fig


def plotly_entropy_match(top1: pd.DataFrame, rates: pd.DataFrame, crossover: Optional[float],
                         paper_cutoff: float) -> go.Figure:
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
    fig.update_xaxes(title_text="draft entropy (nats, full vocabulary)")
    return fig
