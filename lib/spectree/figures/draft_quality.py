"""Figures of the trained drafts: training loss curves and top-1 agreement by draft position."""
from __future__ import annotations

from typing import Optional

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes

from spectree.figures.checks import legend_outside

# --- draft training -------------------------------------------------------------------------------------

def plot_loss_curves(logs: pd.DataFrame, ax: Optional[Axes] = None) -> Axes:
    """Training loss (KL or CE per token) against step, one line per run; columns step, loss, run."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    smooth = logs.assign(loss=logs.groupby("run").loss.transform(lambda s: s.rolling(20, min_periods=1).mean()))
    sns.lineplot(data=smooth, x="step", y="loss", hue="run", ax=ax)
    legend_outside(ax)
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
    ax.set_title("top-1 agreement of each draft by draft position (greedy chains)", fontsize=10)
    legend_outside(ax)
    return ax


def plot_arm_agreement(arms: pd.DataFrame, tolerance: float, ax: Optional[Axes] = None) -> Axes:
    """The position-1 agreement of every draft arm (`analysis.draft_arms.arm_table`: columns pair, role, top1),
    each draft once, against the band a comparison's base arm must reach (the shipped EDD's ± `tolerance`)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    drafts = arms.drop_duplicates("pair")
    shipped = drafts[drafts.role == "shipped EDD"].top1
    arms = drafts[drafts.role != "shipped EDD"]
    names = arms.pair.str.rsplit(":", n=1).str[-1]
    ax.barh(names, arms.top1, color=["tab:blue" if r == "base arm" else "tab:gray" for r in arms.role])
    for level in shipped:
        ax.axvspan(level - tolerance, level + tolerance, color="tab:green", alpha=0.2)
        ax.axvline(level, color="tab:green", label=f"shipped EDD ± {tolerance:g}")
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("top-1 agreement at draft position 1 (blue: a base arm)")
    ax.set_title("Can the draft arms carry a verdict? (EDD Table 3, Fig. 5)")
    if len(shipped):
        ax.legend(*[h[:1] for h in ax.get_legend_handles_labels()], loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  frameon=False, fontsize=8)
    return ax
