"""Figures of draft trees (layered drawing, tree attention mask) and atomic saving under `figures_dir()`.

Static figures are matplotlib/seaborn PNGs, interactive ones plotly HTML; both land in
`figures_dir()/<notebook>/<name>.<ext>` through `atomic_write_bytes`, so a reader never sees half a file.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Optional

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .paths import atomic_write_bytes, atomic_write_text, figures_dir
from .tree import DraftTree

ACCEPT_COLOR = "#2e7d32"
ROOT_COLOR = "#d9d9d9"
NODE_COLOR = "#e8eef7"
EDGE_COLOR = "#9aa5b1"
MASK_COLORS = ["#f5f5f5", "#1f4e79"]  # 0 = masked out, 1 = may attend
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


# --- labels ---------------------------------------------------------------------------------------------

def token_label(token_id: int, tokenizer: Any = None, max_chars: int = 10) -> str:
    """Short, printable text of one token: spaces as '␣', newlines as '↵', other controls escaped,
    '$' escaped for matplotlib, cut to `max_chars` with '…'. The bare id without a tokenizer."""
    if tokenizer is None:
        return str(int(token_id))
    text = tokenizer.decode([int(token_id)])
    out = []
    for ch in text:
        if ch == " ":
            out.append("␣")
        elif ch == "\n":
            out.append("↵")
        elif not ch.isprintable():
            out.append(repr(ch)[1:-1])
        else:
            out.append(ch)
    text = "".join(out) or f"#{int(token_id)}"
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return text.replace("$", r"\$")


def node_labels(tree: DraftTree, tokenizer: Any = None, max_chars: int = 10) -> list[str]:
    return [token_label(t, tokenizer, max_chars) for t in tree.tokens.tolist()]


# --- layout ---------------------------------------------------------------------------------------------

def tree_layout(tree: DraftTree) -> dict[int, tuple[float, float]]:
    """(x, y) per node: x = depth, y = DFS leaf order (leaves 0, 1, 2, …; a parent at its children's mean)."""
    order = tree.dfs_order().tolist()
    parents = tree.parents.tolist()
    kids: dict[int, list[int]] = {i: [] for i in range(len(tree))}
    for i, p in enumerate(parents):
        if p >= 0:
            kids[p].append(i)
    y: dict[int, float] = {}
    next_leaf = 0
    for i in order:  # leaves get consecutive rows in DFS order
        if not kids[i]:
            y[i] = float(next_leaf)
            next_leaf += 1
    for i in reversed(order):  # post-order for internal nodes: children are placed first
        if kids[i]:
            y[i] = sum(y[c] for c in kids[i]) / len(kids[i])
    depth = tree.depth.tolist()
    return {i: (float(depth[i]), y[i]) for i in range(len(tree))}


# --- drawings -------------------------------------------------------------------------------------------

def draw_tree(tree: DraftTree, tokenizer: Any = None, accepted: Optional[list[int]] = None,
              ax: Optional[Axes] = None, show_prob: bool = True, max_chars: int = 10) -> Axes:
    """Layered drawing of a draft tree: x = depth, y = DFS leaf order; labels are token text (or ids).

    `accepted` (node indices, root excluded) is highlighted in green, with its edges; `show_prob` adds
    each node's draft probability p under its label.
    """
    pos = tree_layout(tree)
    n_rows = max(len(tree.leaves()), 1)
    d_max = int(tree.depth.max()) if len(tree) else 0
    if ax is None:
        _, ax = plt.subplots(figsize=(1.9 * (d_max + 1) + 1.0, 0.42 * n_rows + 1.2))
    on_path = {0, *(accepted or [])}
    labels = node_labels(tree, tokenizer, max_chars)
    probs = tree.draft_prob.tolist()
    for i, p in enumerate(tree.parents.tolist()):
        if p < 0:
            continue
        good = i in on_path and p in on_path and bool(accepted)
        (x0, y0), (x1, y1) = pos[p], pos[i]
        ax.plot([x0, x1], [y0, y1], color=ACCEPT_COLOR if good else EDGE_COLOR,
                lw=2.6 if good else 1.0, zorder=2 if good else 1)
    small = n_rows > 24
    for i, (x, y) in pos.items():
        if i == 0:
            face, edge, color = ROOT_COLOR, "#555555", "black"
        elif accepted and i in on_path:
            face, edge, color = ACCEPT_COLOR, ACCEPT_COLOR, "white"
        else:
            face, edge, color = NODE_COLOR, EDGE_COLOR, "black"
        text = labels[i] if (i == 0 or not show_prob) else f"{labels[i]}\n{probs[i]:.2f}"
        ax.text(x, y, text, ha="center", va="center", color=color, zorder=3,
                fontsize=7 if small else 8.5, linespacing=0.95,
                bbox=dict(boxstyle="round,pad=0.25", fc=face, ec=edge, lw=1.0))
    ax.set_xlim(-0.5, d_max + 0.5)
    ax.set_ylim(n_rows - 0.4, -0.6)  # first leaf at the top
    ax.set_xticks(range(d_max + 1))
    ax.set_xlabel("depth")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    note = f", accepted {len(accepted)}" if accepted is not None else ""
    ax.set_title(f"draft tree: {len(tree) - 1} draft tokens, depth {d_max}{note}", fontsize=10)
    return ax


def draw_tree_mask(tree: DraftTree, ax: Optional[Axes] = None, tokenizer: Any = None,
                   max_chars: int = 8) -> Axes:
    """The [n, n] tree attention mask (`tree.ancestor_mask()`, Gunjur et al. Fig. 4): row = query node,
    column = key node, dark = may attend (itself and its ancestors). Nodes in index (layer) order."""
    mask = tree.ancestor_mask().int().numpy()
    n = len(tree)
    labels = [f"{i}:{t}" for i, t in enumerate(node_labels(tree, tokenizer, max_chars))]
    if ax is None:
        side = min(max(0.24 * n + 1.8, 4.0), 16.0)
        _, ax = plt.subplots(figsize=(side, side))
    sns.heatmap(mask, ax=ax, cmap=MASK_COLORS, vmin=0, vmax=1, cbar=False, square=True,
                linewidths=0.4 if n <= 64 else 0, linecolor="white", xticklabels=labels, yticklabels=labels)
    fontsize = 8 if n <= 32 else 6 if n <= 64 else 4
    ax.tick_params(axis="both", labelsize=fontsize, length=0)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=90)
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    ax.set_xlabel("key (attended node)")
    ax.set_ylabel("query node")
    ax.set_title(f"tree attention mask ({n}×{n}, {int(mask.sum())} allowed)", fontsize=10)
    return ax


# --- saving ---------------------------------------------------------------------------------------------

def output_path(name: str, notebook: str, suffix: str) -> Path:
    """figures_dir()/<notebook>/<name><suffix>, rejecting names that would escape that folder."""
    for part in (name, notebook):
        if not _NAME.match(part) or part in {".", ".."}:
            raise ValueError(f"bad figure/notebook name {part!r}: use letters, digits, '_', '-', '.'")
    return figures_dir() / notebook / f"{name}{suffix}"


def save_figure(fig: Figure, name: str, notebook: str, dpi: int = 150) -> Path:
    """Save a matplotlib figure as PNG to figures_dir()/<notebook>/<name>.png, atomically."""
    path = output_path(name, notebook, ".png")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path


def save_plotly(fig: Any, name: str, notebook: str) -> Path:
    """Save a plotly figure as a self-contained HTML file (plotly.js inlined), atomically."""
    path = output_path(name, notebook, ".html")
    atomic_write_text(path, fig.to_html(include_plotlyjs=True, full_html=True))
    return path


def save_json(obj: Any, name: str, notebook: str) -> Path:
    """Save `obj` as pretty JSON to figures_dir()/<notebook>/<name>.json, atomically."""
    path = output_path(name, notebook, ".json")
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
    return path


# --- draft training -------------------------------------------------------------------------------------

def plot_loss_curves(logs: pd.DataFrame, ax: Optional[Axes] = None) -> Axes:
    """Training loss (KL or CE per token) against step, one line per run; columns step, loss, run."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    smooth = logs.assign(loss=logs.groupby("run").loss.transform(lambda s: s.rolling(20, min_periods=1).mean()))
    sns.lineplot(data=smooth, x="step", y="loss", hue="run", ax=ax)
    ax.set_yscale("log")
    ax.set_ylabel("loss per token (20-step mean)")
    ax.set_title("draft distillation")
    return ax


def plot_acceptance_by_position(table: pd.DataFrame, ax: Optional[Axes] = None) -> Axes:
    """Top-1 agreement with the target by draft position; columns pair, dataset, position, top1."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(data=table, x="position", y="top1", hue="pair", style="dataset", markers=True, ax=ax)
    ax.set_ylim(0, 1)
    ax.set_xticks(sorted(table.position.unique()))
    ax.set_ylabel("top-1 agreement with the target")
    ax.set_xlabel("draft position (given the earlier positions right)")
    return ax
