"""Figures of what C2T's classifier learned (`spectree.analysis.surfaces`, C2T Fig. 9/10). Matplotlib/seaborn
figures are returned for `figures.save_figure`, plotly ones for `save_plotly`.
"""
from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

# --- classifier surfaces --------------------------------------------------------------------------------

def tick(value: float) -> str:
    """A feature value as an axis reads it: 3 significant digits ("6.91" for ln 1000, not "6.90776")."""
    return f"{float(value):.3g}"


def plot_classifier_scatter(scatter: pd.DataFrame) -> Figure:
    """C2T Fig. 9 as a static 3-D scatter: random (P, H, d), colour = min-max normalised logit."""
    fig = plt.figure(figsize=(6.5, 5.5))
    ax = fig.add_subplot(projection="3d")
    points = ax.scatter(scatter.P, scatter.H, scatter.d, c=scatter.colour, cmap="viridis", s=8)
    ax.set_xlabel("joint probability P")
    ax.set_ylabel("entropy H")
    ax.set_zlabel("depth d (Alg. 1: first drafted layer 0)")
    fig.colorbar(points, ax=ax, shrink=0.6, pad=0.12, label="classifier output (min-max normalised logit)")
    ax.set_title(f"C2T classifier over {len(scatter)} random inputs")
    return fig


def plotly_classifier_scatter(scatter: pd.DataFrame) -> Any:
    """The same scatter, rotatable; hover shows the confidence sigmoid(F)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter3d(
        x=scatter.P, y=scatter.H, z=scatter.d, mode="markers",
        marker=dict(size=3, color=scatter.colour, colorscale="Viridis", colorbar=dict(title="min-max logit")),
        customdata=scatter.confidence, hovertemplate="P %{x:.3f}<br>H %{y:.2f}<br>d %{z}<br>C %{customdata:.3f}"))
    fig.update_layout(title="C2T classifier output (C2T Fig. 9)", height=650,
                      scene=dict(xaxis_title="P", yaxis_title="H", zaxis_title="d"))
    return fig


def plot_surface_heatmaps(surf: pd.DataFrame) -> Figure:
    """C2T Fig. 10 as heatmaps: one row per fixed feature, one column per fixed value, confidence colour
    on a shared scale; axes are the two free features."""
    fixed_values = surf.groupby("fixed", sort=False).value.unique()
    fig, axes = plt.subplots(len(fixed_values), 3, figsize=(13, 3.6 * len(fixed_values)), squeeze=False)
    lo, hi = float(surf.confidence.min()), float(surf.confidence.max())
    for r, (fixed, values) in enumerate(fixed_values.items()):
        for c, value in enumerate(values[:3]):
            rows = surf[(surf.fixed == fixed) & (surf.value == value)]
            grid = rows.pivot_table(index="y", columns="x", values="confidence").sort_index(ascending=False)
            ax = axes[r, c]
            sns.heatmap(grid, ax=ax, vmin=lo, vmax=hi, cmap="viridis", cbar=c == 2, xticklabels=False,
                        yticklabels=False, cbar_kws={"label": "confidence"})
            x_name, y_name = rows.x_name.iloc[0], rows.y_name.iloc[0]
            ax.set_xlabel(f"{x_name}: {tick(grid.columns.min())} (left) → {tick(grid.columns.max())} (right)")
            ax.set_ylabel(f"{y_name}: {tick(grid.index.min())} (bottom) → {tick(grid.index.max())} (top)")
            ax.set_title(f"{fixed} = {tick(value)}")
    fig.suptitle("C2T classifier confidence with one feature fixed (C2T Fig. 10)")
    fig.tight_layout()
    return fig


def plotly_surfaces(surf: pd.DataFrame) -> Any:
    """C2T Fig. 10 as rotatable surfaces: one scene per fixed feature, its three values overlaid."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fixed_values = surf.groupby("fixed", sort=False).value.unique()
    fig = make_subplots(rows=1, cols=len(fixed_values), specs=[[{"type": "scene"}] * len(fixed_values)],
                        subplot_titles=[f"{f} fixed" for f in fixed_values.index])
    scales = ["Blues", "Greens", "Reds"]
    for c, (fixed, values) in enumerate(fixed_values.items(), start=1):
        for value, scale in zip(values, scales):
            rows = surf[(surf.fixed == fixed) & (surf.value == value)]
            grid = rows.pivot_table(index="y", columns="x", values="confidence")
            fig.add_trace(go.Surface(x=grid.columns, y=grid.index, z=grid.values, colorscale=scale, opacity=0.8,
                                     showscale=False, name=f"{fixed}={tick(value)}", showlegend=True), row=1, col=c)
        rows = surf[surf.fixed == fixed]
        fig.update_scenes(dict(xaxis_title=rows.x_name.iloc[0], yaxis_title=rows.y_name.iloc[0],
                               zaxis_title="confidence"), row=1, col=c)
    fig.update_layout(title="C2T classifier surfaces (C2T Fig. 10): blue / green / red = low / mid / high value",
                      height=550)
    return fig


def plot_partial_dependence(pdep: pd.DataFrame) -> Figure:
    """Mean confidence as each feature sweeps its range, the others at their random values."""
    features = list(dict.fromkeys(pdep.feature))
    fig, axes = plt.subplots(1, len(features), figsize=(3.2 * len(features) + 0.6, 3.8), sharey=True)
    for ax, feature in zip(np.atleast_1d(axes), features):
        rows = pdep[pdep.feature == feature]
        ax.plot(rows.value, rows.confidence, marker="o", ms=3)
        ax.set_xlabel(feature)
        ax.set_title(f"range {rows.confidence.max() - rows.confidence.min():.3f}", fontsize=10)
    np.atleast_1d(axes)[0].set_ylabel("mean confidence")
    fig.suptitle("partial dependence of the C2T classifier")
    fig.tight_layout()
    return fig
