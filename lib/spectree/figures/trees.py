"""Figures of draft trees: the layered drawing, the tree attention mask, and one logged tree with the nodes a
policy keeps highlighted against the candidates it was offered and pruned."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes

from spectree.core.tree import DraftTree, Nodes
from spectree.core.groups import rank_in_group
from spectree.replay.forest import Forest
from spectree.replay.replay import logged_grafter
from spectree.retrieval.graft import graft_columns
from spectree.retrieval.proposers import Retrieval

ACCEPT_COLOR = "#2e7d32"
ROOT_COLOR = "#d9d9d9"
NODE_COLOR = "#e8eef7"
EDGE_COLOR = "#9aa5b1"
MASK_COLORS = ["#f5f5f5", "#1f4e79"]  # 0 = masked out, 1 = may attend


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


def node_probs(tree: DraftTree) -> list[Optional[float]]:
    """Each node's draft probability p, where the tree holds one: its `draft_prob`, else its joint P over its
    parent's (a policy that reads no probabilities leaves both NaN: `core.policy.NodeTable.node_fields`); None where
    neither is known, and at the root."""
    probs, joint, parents = tree.draft_prob.tolist(), tree.joint.tolist(), tree.parents.tolist()
    out: list[Optional[float]] = []
    for i, (p, parent) in enumerate(zip(probs, parents)):
        if parent < 0:
            out.append(None)
        elif np.isfinite(p):
            out.append(float(p))
        elif np.isfinite(joint[i]) and np.isfinite(joint[parent]) and joint[parent] > 0:
            out.append(float(joint[i] / joint[parent]))
        else:
            out.append(None)
    return out


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
    each node's draft probability p under its label where the tree holds one (`node_probs`), no number elsewhere.
    """
    pos = tree_layout(tree)
    n_rows = max(len(tree.leaves()), 1)
    d_max = int(tree.depth.max()) if len(tree) else 0
    if ax is None:
        width = 1.9 * (d_max + 1) + 1.0
        _, ax = plt.subplots(figsize=(width, max(0.42 * n_rows + 1.2, width / 2.5)))  # a chain: no strip
    on_path = {0, *(accepted or [])}
    labels = node_labels(tree, tokenizer, max_chars)
    probs = node_probs(tree)
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
        text = labels[i] if (probs[i] is None or not show_prob) else f"{labels[i]}\n{probs[i]:.2f}"
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
    note += "; under each token its draft probability p" if show_prob and any(p is not None for p in probs) else ""
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

KEPT_COLOR = "#1f4e79"
PRUNED_COLOR = "#f2f2f2"
RETRIEVAL_COLOR = "#e07b00"  # nodes grafted by retrieval proposers (prompt lookup, suffix index)


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


def graft_drawn(forest: Forest, tree_id: int, kept: np.ndarray, rows: np.ndarray, tree: DraftTree,
                retrieval: Sequence[Retrieval]) -> np.ndarray:
    """Graft the proposers' branches into the drawn `tree` (logged `rows`) as hybrid replay grafts them into the
    tree's kept nodes (`replay.HybridSteps`: pruned nodes are not followed); returns the added nodes' on-path flags."""
    lp, pos, cols = forest.logbook[int(forest.tree_prompt[tree_id])], int(forest.tree_position[tree_id]), forest.cols
    grafter, max_new = logged_grafter(lp, retrieval)  # branches cut as replay and live decoding cut them
    grafter.extend(lp.continuation[:pos])
    tokens = np.where(kept[rows], cols["tokens"][rows], -1)  # a branch never follows a pruned node
    new = graft_columns(tree.parents.numpy(), tokens, cols["depth"][rows], cols["joint"][rows],
                        grafter.proposals(max_new - pos - 1))
    path, cont = (forest.on_path[rows] & kept[rows]).tolist(), lp.continuation[pos:]
    for p, t, d in zip(new["parents"].tolist(), new["tokens"].tolist(), new["depth"].tolist()):
        path.append(path[p] and d <= len(cont) and t == cont[d - 1])
    tree.add(Nodes(**{f: torch.from_numpy(c) for f, c in new.items()}))
    return np.array(path[len(rows):], dtype=bool)


def draw_kept_tree(forest: Forest, tree_id: int, kept: np.ndarray, K: int, expanded: Optional[np.ndarray] = None,
                   tokenizer: Any = None, ax: Optional[Axes] = None, max_pruned: int = 3, max_nodes: int = 90,
                   retrieval: Sequence[Retrieval] = ()) -> Axes:
    """One logged tree as a policy sees it: kept nodes dark (green where the target accepts them, i.e. on
    its greedy path), offered-but-pruned candidates light with dashed edges (a green border marks a pruned
    node the target would have accepted). `expanded`: nodes whose children were offered (default: kept).
    `retrieval`: a hybrid's proposers, whose grafted nodes are drawn kept with an orange border."""
    rows, hidden = shown_rows(forest, tree_id, kept, K, expanded, max_pruned, max_nodes)
    tree = subtree_of(forest, rows)
    is_kept, on_path, grafted = kept[rows], forest.on_path[rows], np.zeros(len(rows), bool)
    if retrieval:
        added = graft_drawn(forest, tree_id, kept, rows, tree, retrieval)
        new = np.ones(len(added), bool)  # grafted nodes are all in the hybrid's tree
        is_kept, on_path, grafted = np.r_[is_kept, new], np.r_[on_path, added], np.r_[grafted, new]
    pos = tree_layout(tree)
    n_rows = max(len(tree.leaves()), 1)
    d_max = int(tree.depth.max()) if len(tree) else 0
    if ax is None:
        width = max(1.6 * (d_max + 1) + 1.0, 6.5)
        height = max(min(0.34 * n_rows + 1.2, 14), width / 2.5)
        fig, ax = plt.subplots(figsize=(width, height))
        fig.subplots_adjust(left=0.03, right=0.97, bottom=0.55 / height, top=1 - 0.45 / height)
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
        edge = RETRIEVAL_COLOR if grafted[i] else edge
        ax.text(x, y, labels[i], ha="center", va="center", color=color, zorder=3, fontsize=6.5 if small else 8,
                bbox=dict(boxstyle="round,pad=0.2", fc=face, ec=edge,
                          lw=2.2 if grafted[i] else 1.6 if (i and on_path[i]) else 0.8))
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
    note += f", {int(grafted.sum())} retrieval nodes (orange border)" if retrieval else ""
    ax.set_title(f"{lp.prompt.key} @ {int(forest.tree_position[tree_id])}: kept {n_kept} draft tokens (dark), "
                 f"accepted {accepted} (green)\npruned candidates light{note}", fontsize=8.5)
    return ax
