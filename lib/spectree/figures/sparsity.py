"""Figures of block sparsity (DySpec Table 5, Fig. 7–9): non-zero tiles by order, masks, attention times."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from spectree.analysis.sparsity import BLOCK, nonzero_blocks, verify_mask
from spectree.core.tree import DraftTree
from spectree.figures.checks import legend_outside
from spectree.figures.trees import MASK_COLORS

ORDER_COLORS = {"original": "#c0504d", "dfs": "#1f4e79"}


# --- block sparsity -------------------------------------------------------------------------------------

def plot_block_counts(random_summary: pd.DataFrame, logged_summary: pd.DataFrame, block: int = BLOCK) -> Figure:
    """Left: non-zero tiles against tree size for random trees (DySpec Table 5); right: against prefix
    length for logged trees (DySpec Fig. 9). The original order (the order a tree was generated in: heap pop order
    for the random trees, DySpec Alg. 1's; our drafting's layer-by-layer order for the logged ones) vs DFS order."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.6))
    for ax, table, x in ((left, random_summary, "nodes"), (right, logged_summary, "prefix")):
        for order in ("original", "dfs"):
            ax.plot(table[x], table[order], marker="o", color=ORDER_COLORS[order], label=order)
        for _, row in table.iterrows():
            ax.annotate(f"{row.ratio:.2f}×", (row[x], row.original), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=8)
        ax.set_ylabel(f"non-zero {block}×{block} blocks")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("random tree size n (nodes)")
    left.set_title("random trees, no prefix (DySpec Table 5)")
    right.set_xlabel("prefix length")
    right.set_title(f"logged trees (mean {logged_summary.nodes.mean():.0f} nodes; DySpec Fig. 9)")
    fig.tight_layout()
    fig.legend(*left.get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
               frameon=False, title="order")
    return fig


def plot_block_masks(tree: DraftTree, dfs: DraftTree, prefix: int = 0, block: int = BLOCK) -> Figure:
    """DySpec Fig. 7: the verification mask in both orders; non-zero tiles shaded behind the mask."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 6))
    for ax, t, order in ((axes[0], tree, "original"), (axes[1], dfs, "dfs")):
        mask = verify_mask(t, prefix)
        tiles = nonzero_blocks(mask, block).repeat_interleave(block, 0).repeat_interleave(block, 1)
        picture = tiles[: mask.shape[0], : mask.shape[1]].float() * 0.3 + mask.float() * 0.7
        ax.imshow(picture.numpy(), cmap=sns.blend_palette([MASK_COLORS[0], MASK_COLORS[1]], as_cmap=True),
                  vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"{order} order: {int(nonzero_blocks(mask, block).sum())} non-zero blocks", fontsize=10)
        ax.set_xlabel(f"key (prefix {prefix} + {len(t)} tree slots)")
        ax.set_ylabel("query node")
    fig.suptitle(f"tree attention mask of a {len(tree)}-node tree; light = non-zero {block}×{block} block")
    fig.tight_layout()
    return fig


def plot_attention_times(times: pd.DataFrame) -> Figure:
    """Masked attention time against tree size: dense SDPA (our decoder's) and the block-sparse loop."""
    long = times.melt(id_vars=["nodes", "order"], value_vars=["dense_ms", "sparse_ms"], var_name="kernel",
                      value_name="ms")
    long["kernel"] = long.kernel.map({"dense_ms": "dense SDPA + additive mask", "sparse_ms": "block-sparse loop"})
    fig, ax = plt.subplots(figsize=(7, 4.2))
    sns.lineplot(data=long, x="nodes", y="ms", hue="order", style="kernel", markers=True, palette=ORDER_COLORS, ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel(f"attention time (ms, {times.device.iloc[0]})")
    ax.set_xlabel("tree size n (nodes)")
    ax.set_title("one masked attention call, original vs DFS order")
    legend_outside(ax)
    return fig
