"""Replay: score any subtree policy on a logbook without running a model.

With greedy verification the output is the target's greedy continuation g whatever the policy, and the draft's
distributions at position i depend only on the committed prefix g[:i]. So growing the policy's tree from the
logged full tree at i gives the live tree; its accepted length is τ_i = 1 + (on-path nodes kept), γ_i = its
size − 1, and the next step starts at i + τ_i — exactly the live sequence of τ and γ. The policy runs over every
logged tree at once (`core.policy.grow` on a `Forest`): the same code that decides live, one tree at a time.
"""
from __future__ import annotations

from typing import Union

import numpy as np
import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.core.metrics import tau as tau_of
from spectree.core.policy import Growth, Policy, grow
from spectree.replay.forest import Forest
from spectree.replay.logbook import LoggedPrompt

STEP_COLUMNS = ["position", "tau", "gamma", "depth", "prompt", "dataset", "category"]  # a row per target forward


def check_replayable(lp: LoggedPrompt, policy: Policy) -> None:
    if policy.K > lp.K or policy.d_max > lp.d_max:
        raise SpectreeError(f"policy {policy.name} needs K={policy.K}, d_max={policy.d_max} but the logbook "
                            f"holds K={lp.K}, d_max={lp.d_max}: log with larger --K / --d-max")


def as_forest(source: Union[Forest, list[LoggedPrompt]]) -> Forest:
    return source if isinstance(source, Forest) else Forest.of(source)


def grow_forest(forest: Forest, policy: Policy) -> Growth:
    """The policy's trees over every logged tree (`Growth`: grown, kept and fed nodes)."""
    for lp in forest.logbook:
        check_replayable(lp, policy)
    return grow(forest, policy, forest.offering(policy.K))


def visited_steps(forest: Forest, growth: Growth) -> pd.DataFrame:
    """Per-step τ and γ of grown trees: from position 0 of every prompt, the tree at each position reached
    (columns STEP_COLUMNS plus `tree`, the forest's tree id; `depth` = the verified tree's depth, which EDD's α
    divides by)."""
    kept = growth.kept
    n_kept = np.bincount(forest.tree[kept], minlength=forest.n_trees)
    accepted = np.bincount(forest.tree[kept & forest.on_path], minlength=forest.n_trees) - 1  # the root is on path
    depth = np.zeros(forest.n_trees, dtype=np.int64)
    np.maximum.at(depth, forest.tree[kept], forest.cols["depth"][kept])
    tree_at = {(int(p), int(q)): t for t, (p, q) in enumerate(zip(forest.tree_prompt, forest.tree_position))}
    rows = []
    for i, lp in enumerate(forest.logbook):
        pos = 0
        while pos < lp.n_valid:
            t = tree_at[(i, pos)]
            tau = tau_of(int(accepted[t]))
            rows.append((pos, tau, int(n_kept[t]) - 1, int(depth[t]), lp.prompt.id, lp.prompt.dataset,
                         lp.prompt.category, t))
            pos += tau
    return pd.DataFrame(rows, columns=STEP_COLUMNS + ["tree"])


def replay(source: Union[Forest, list[LoggedPrompt]], policy: Policy) -> pd.DataFrame:
    """Per-step τ and γ of `policy` over a logbook (or its prebuilt `Forest`, to score many policies on it):
    columns STEP_COLUMNS, one row per target forward, prompt after prompt."""
    forest = as_forest(source)
    return visited_steps(forest, grow_forest(forest, policy))[STEP_COLUMNS]


def summarize(steps: pd.DataFrame) -> dict:
    """Totals and per-forward means of τ and γ for a per-step table (replay or live). `tokens` is Σ τ: it
    can exceed the generation by the tokens the last forward committed past max_new_tokens / EOS."""
    return {"steps": int(len(steps)), "tokens": int(steps.tau.sum()), "candidates": int(steps.gamma.sum()),
            "tau": float(steps.tau.mean()), "gamma": float(steps.gamma.mean())}


__all__ = ["STEP_COLUMNS", "check_replayable", "as_forest", "grow_forest", "visited_steps", "replay", "summarize"]
