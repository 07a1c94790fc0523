"""Figures of the interactive explorer: the τ–γ frontier with the current policy on it, and one logged tree
with the nodes a policy keeps highlighted against the candidates it was offered and pruned."""
from __future__ import annotations

import io
from typing import Any, Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .fastreplay import Forest, rank_in_group
from .plots import ACCEPT_COLOR, EDGE_COLOR, ROOT_COLOR, node_labels, tree_layout
from .tree import DraftTree

KEPT_COLOR = "#1f4e79"
PRUNED_COLOR = "#f2f2f2"
CURRENT_COLOR = "#d62728"


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


def shown_rows(forest: Forest, tree_id: int, kept: np.ndarray, K: int, expanded: Optional[np.ndarray] = None,
               max_pruned: int = 3, max_nodes: int = 90) -> tuple[np.ndarray, int]:
    """Global rows of one tree to draw: its kept nodes plus, under every node whose children were offered
    (`expanded`, default the kept nodes), the first `max_pruned` (by rank) of the offered children not in
    the final tree; at most `max_nodes` (kept first). Returns the rows (ascending) and how many pruned
    candidates were left out."""
    rows = np.flatnonzero(forest.tree == tree_id)
    parents, rank = forest.cols["parents"][rows], forest.cols["rank"][rows]
    keep = kept[rows]
    opened = rows[(expanded if expanded is not None else kept)[rows] & keep]
    offered = (parents >= 0) & (rank < K) & np.isin(parents, opened) & ~keep
    pruned = rows[offered][rank_in_group(parents[offered], rank[offered]) < max_pruned]
    chosen = np.r_[rows[keep], pruned]
    chosen = np.sort(chosen[:max_nodes]) if len(chosen) > max_nodes else np.sort(chosen)
    chosen = chosen[np.isin(forest.cols["parents"][chosen], np.r_[chosen, -1])]  # stay connected
    return chosen, int(offered.sum()) - int((~kept[chosen]).sum())


def subtree_of(forest: Forest, rows: np.ndarray) -> DraftTree:
    """The logged nodes `rows` (ascending, root first, parents included) as a DraftTree."""
    nodes = forest.nodes(rows)
    local = {int(r): i for i, r in enumerate(rows)}
    nodes.parents = torch.tensor([local.get(int(p), -1) for p in forest.cols["parents"][rows]], dtype=torch.long)
    return DraftTree(**nodes.columns(), prefix_len=0)


def draw_kept_tree(forest: Forest, tree_id: int, kept: np.ndarray, K: int, expanded: Optional[np.ndarray] = None,
                   tokenizer: Any = None, ax: Optional[Axes] = None, max_pruned: int = 3, max_nodes: int = 90) -> Axes:
    """One logged tree as a policy sees it: kept nodes dark (green where the target accepts them, i.e. on
    its greedy path), offered-but-pruned candidates light with dashed edges (a green border marks a pruned
    node the target would have accepted). `expanded`: nodes whose children were offered (default: kept)."""
    rows, hidden = shown_rows(forest, tree_id, kept, K, expanded, max_pruned, max_nodes)
    tree = subtree_of(forest, rows)
    pos = tree_layout(tree)
    n_rows = max(len(tree.leaves()), 1)
    d_max = int(tree.depth.max()) if len(tree) else 0
    if ax is None:
        height = min(0.34 * n_rows + 1.2, 14)
        fig, ax = plt.subplots(figsize=(max(1.6 * (d_max + 1) + 1.0, 6.5), height))
        fig.subplots_adjust(left=0.03, right=0.97, bottom=0.55 / height, top=1 - 0.45 / height)
    is_kept, on_path = kept[rows], forest.cols["on_path"][rows]
    labels = node_labels(tree, tokenizer, 8)
    for i, p in enumerate(tree.parents.tolist()):
        if p < 0:
            continue
        (x0, y0), (x1, y1) = pos[p], pos[i]
        good = is_kept[i] and on_path[i]
        ax.plot([x0, x1], [y0, y1], color=ACCEPT_COLOR if good else (KEPT_COLOR if is_kept[i] else EDGE_COLOR),
                lw=2.4 if good else (1.4 if is_kept[i] else 0.8), ls="-" if is_kept[i] else "--", zorder=1)
    small = n_rows > 24
    for i, (x, y) in pos.items():
        if i == 0:
            face, edge, color = ROOT_COLOR, "#555555", "black"
        elif is_kept[i]:
            face = ACCEPT_COLOR if on_path[i] else KEPT_COLOR
            edge, color = face, "white"
        else:
            face, edge, color = PRUNED_COLOR, ACCEPT_COLOR if on_path[i] else EDGE_COLOR, "#666666"
        ax.text(x, y, labels[i], ha="center", va="center", color=color, zorder=3, fontsize=6.5 if small else 8,
                bbox=dict(boxstyle="round,pad=0.2", fc=face, ec=edge, lw=1.6 if (i and on_path[i]) else 0.8))
    ax.set_xlim(-0.5, d_max + 0.5)
    ax.set_ylim(n_rows - 0.4, -0.6)
    ax.set_xticks(range(d_max + 1))
    ax.set_xlabel("depth")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    n_kept, accepted = int(is_kept.sum()) - 1, int((is_kept & on_path).sum()) - 1
    lp = forest.logbook[int(forest.tree_prompt[tree_id])]
    note = f", {hidden} more not drawn" if hidden else ""
    ax.set_title(f"{lp.prompt.key} @ {int(forest.tree_position[tree_id])}: kept {n_kept} draft tokens (dark), "
                 f"accepted {accepted} (green)\npruned candidates light{note}", fontsize=8.5)
    return ax


def png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (for an ipywidgets Image; one draw, no tight bbox); the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
