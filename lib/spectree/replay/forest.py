"""Vectorised replay: one policy over every logged tree of a logbook at once.

`spectree.replay` grows each tree with the Python layer loop (~10 ms a tree). Here all logged trees sit in
one node table (`Forest`) and the same layer loop runs once for the whole forest, each layer a handful of
numpy operations; per-tree decisions ("top-K of this layer", "the m best nodes") become per-group ranks.
The result is the same per-step τ / γ table as `replay.replay` (tested equal for every policy supported
here); policies without a vectorised rule fall back to it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import numpy as np
import pandas as pd
import torch

from spectree.core.errors import SpectreeError
from spectree.core.metrics import tau as tau_of
from spectree.core.policy import Policy
from spectree.core.tree import LONG_FIELDS, NODE_FIELDS, Nodes
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.replay import check_replayable, replay
from spectree.strategies.c2t import C2TPolicy
from spectree.strategies.chain import ChainPolicy
from spectree.strategies.dyspec import DySpecBudgetPolicy, DySpecThresholdPolicy
from spectree.strategies.eagle2 import Eagle2Policy
from spectree.strategies.gunjur import EntropyBranchingPolicy, NaiveWidthPolicy
from spectree.strategies.pct import CAPE_BOUNDS, CAPE_WIDTHS, CapePolicy, PCTPolicy
from spectree.strategies.static import KaryPolicy


@dataclass
class Forest:
    """Every logged node of a logbook: columns [N] (parents as global row indices, -1 at roots) plus the
    tree each row belongs to and that tree's (prompt, position)."""

    cols: dict[str, np.ndarray]  # NODE_FIELDS + on_path
    tree: np.ndarray  # [N] tree id
    tree_prompt: np.ndarray  # [n_trees] index into the logbook
    tree_position: np.ndarray  # [n_trees]
    logbook: list[LoggedPrompt]
    layers: list[np.ndarray] = field(default_factory=list)  # rows at each depth
    layer_cols: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (parents, rank) of those rows
    has_kids: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [N] expanded in the logbook

    def __post_init__(self):
        depth, parents = self.cols["depth"], self.cols["parents"]
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
        self.layers = [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]
        self.layer_cols = [(parents[rows], self.cols["rank"][rows]) for rows in self.layers]
        self.has_kids = np.bincount(parents[parents >= 0], minlength=len(parents)) > 0

    @staticmethod
    def of(logbook: list[LoggedPrompt]) -> "Forest":
        frames = [lp.nodes.assign(prompt=i) for i, lp in enumerate(logbook) if len(lp.nodes)]
        df = pd.concat(frames, ignore_index=True)
        is_root = (df["parents"].to_numpy() < 0)
        tree = np.cumsum(is_root) - 1  # nodes of a tree are contiguous, root first
        start = np.flatnonzero(is_root)
        parents = df["parents"].to_numpy()
        cols = {f: df[f].to_numpy() for f in NODE_FIELDS}
        cols["parents"] = np.where(parents >= 0, parents + start[tree], -1)
        cols["on_path"] = df["on_path"].to_numpy(dtype=bool)
        return Forest(cols, tree, df["prompt"].to_numpy()[start], df["position"].to_numpy()[start], logbook)

    @property
    def n_trees(self) -> int:
        return len(self.tree_prompt)

    def nodes(self, rows: np.ndarray) -> Nodes:
        return Nodes(**{f: torch.from_numpy(np.ascontiguousarray(self.cols[f][rows])).to(
            torch.long if f in LONG_FIELDS else torch.float32) for f in NODE_FIELDS})


def rank_in_group(group: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """long [n]: each element's 0-based place within its group when sorted by `keys` (first key first;
    ties keep the input order)."""
    if len(keys) == 1 and len(group) and keys[0].min() > -1.0 and keys[0].max() <= 0.0:
        # one probability-like key in (-1, 0]: one stable sort on group + key (4x faster than lexsort). The
        # sum rounds monotonically, so it can only merge near-equal keys of a group: re-sort those runs exactly
        key = keys[0].astype(np.float64)
        merged = group * 2.0 + key
        order = np.argsort(merged, kind="stable")
        ranked = merged[order]
        tie = ranked[1:] == ranked[:-1]
        if tie.any():
            sub = np.flatnonzero(np.r_[tie, False] | np.r_[False, tie])
            run = np.cumsum(np.r_[True, ~tie])[sub]
            order[sub] = order[sub][np.lexsort((order[sub], key[order[sub]], run))]
    else:
        order = np.lexsort((np.arange(len(group)), *reversed(keys), group))
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    place = np.empty(len(group), dtype=np.int64)
    place[order] = np.arange(len(group)) - np.repeat(starts, np.diff(np.r_[starts, len(group)]))
    return place


def smallest_in_runs(group: np.ndarray, key: np.ndarray, n: int) -> np.ndarray:
    """bool [len(group)]: the n smallest keys of each group, ties in input order — `rank_in_group(group, key)
    < n` for groups that come in contiguous runs (group non-decreasing), without a global sort: the runs are
    laid out as rows of a padded matrix [groups, longest run] and each row is partitioned (one O(n) pass)."""
    if len(group) == 0 or n <= 0:
        return np.zeros(len(group), dtype=bool)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, len(group)])
    if n >= sizes.max():
        return np.ones(len(group), dtype=bool)
    run = np.repeat(np.arange(len(starts)), sizes)
    col = np.arange(len(group)) - starts[run]
    table = np.full((len(starts), sizes.max()), np.inf)  # [runs, longest run]; padding sorts last
    table[run, col] = key
    cut = np.partition(table, n - 1, axis=1)[:, n - 1:n]  # [runs, 1] the n-th smallest key of each run
    below, at = table < cut, table == cut
    room = n - below.sum(1, keepdims=True)  # places left for keys equal to the cut, taken in input order
    keep = below | (at & (np.cumsum(at, axis=1) <= room))
    return keep[run, col]


def top_by_joint(f: Forest, rows: np.ndarray, n: int) -> np.ndarray:
    """bool [len(rows)]: the n largest joints of each tree (ties towards shallower nodes, as
    `strategies.eagle2.top_by_joint`)."""
    tree, depth = f.tree[rows], f.cols["depth"][rows]
    if np.all(np.diff(tree) >= 0) and np.all((np.diff(depth) >= 0) | (np.diff(tree) != 0)):
        # each tree's rows contiguous and by depth (a layer, or kept rows in logbook order): input order breaks ties
        return smallest_in_runs(tree, -f.cols["joint"][rows].astype(np.float64), n)
    return rank_in_group(tree, -f.cols["joint"][rows], depth) < n


Select = Callable[[Forest, np.ndarray, np.ndarray], np.ndarray]  # (forest, candidate rows, kept mask) → keep


def vectorised_select(policy: Policy) -> Optional[Select]:
    """The policy's `select` for a whole forest layer, or None if it has no vectorised form."""
    if isinstance(policy, ChainPolicy):
        column = {"none": None, "entropy": "entropy", "dymax": "confidence", "dyjoint": "joint"}[policy.stop]

        def chain_select(f, rows, kept):
            if column is None:
                return np.ones(len(rows), bool)
            value = f.cols[column][rows]
            return value <= policy.threshold if column == "entropy" else value >= policy.threshold
        return chain_select
    if isinstance(policy, (KaryPolicy, PCTPolicy)):
        return lambda f, rows, kept: np.ones(len(rows), bool)
    if isinstance(policy, DySpecThresholdPolicy):
        return lambda f, rows, kept: f.cols["joint"][rows] >= policy.threshold
    if isinstance(policy, Eagle2Policy):  # one layer: one depth, so the joint alone ranks
        return lambda f, rows, kept: top_by_joint(f, rows, policy.K)
    if isinstance(policy, CapePolicy):
        widths = CAPE_WIDTHS.numpy()
        return lambda f, rows, kept: f.cols["rank"][rows] < widths[np.searchsorted(
            CAPE_BOUNDS.numpy(), f.cols["confidence"][rows].astype(np.float32), side="left")]
    if isinstance(policy, EntropyBranchingPolicy):
        def select(f, rows, kept):
            h = f.cols["entropy"][rows]
            width = np.array([0 if x > policy.cutoff else policy.branching(float(x)) for x in h], dtype=np.int64)
            return f.cols["rank"][rows] < width
        return select
    if isinstance(policy, NaiveWidthPolicy):
        return lambda f, rows, kept: f.cols["rank"][rows] < np.where(f.cols["depth"][rows] == policy.d_max, policy.K, 1)
    if isinstance(policy, DySpecBudgetPolicy):
        return _dyspec_budget_select(policy)
    if isinstance(policy, C2TPolicy):
        return _c2t_select(policy)
    return None


def _dyspec_budget_select(policy: DySpecBudgetPolicy) -> Select:
    def select(f: Forest, rows: np.ndarray, kept: np.ndarray) -> np.ndarray:
        # per tree, the m-th best joint among the non-root nodes kept so far and the candidates
        pool = np.r_[np.flatnonzero(kept & (f.cols["parents"] >= 0)), rows]
        place = rank_in_group(f.tree[pool], -f.cols["joint"][pool])
        bar = np.full(f.n_trees, -np.inf)
        mth = place == policy.budget - 1
        bar[f.tree[pool][mth]] = f.cols["joint"][pool][mth]
        return f.cols["joint"][rows] >= bar[f.tree[rows]]
    return select


def _c2t_select(policy: C2TPolicy) -> Select:
    def select(f: Forest, rows: np.ndarray, kept: np.ndarray) -> np.ndarray:
        first = top_by_joint(f, rows, policy.K)
        with torch.inference_mode():
            conf = policy.classifier.confidence(f.nodes(rows)).numpy()
        keep = first & (conf > policy.beta)
        if policy.topk:  # the tree budget left in each tree, filled by confidence
            room = policy.topk - (np.bincount(f.tree[kept], minlength=f.n_trees) - 1)
            keep &= rank_in_group(f.tree[rows], -np.where(keep, conf, -1.0)) < room[f.tree[rows]]
        return keep
    return select


def finalize(policy: Policy, f: Forest, kept: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero(kept)
    if isinstance(policy, (Eagle2Policy, DySpecBudgetPolicy)):
        n = policy.top_n + 1 if isinstance(policy, Eagle2Policy) else policy.budget + 1
        out = np.zeros_like(kept)
        out[rows[top_by_joint(f, rows, n)]] = True
        return out
    if isinstance(policy, PCTPolicy):
        has_kid = np.zeros_like(kept)
        has_kid[f.cols["parents"][rows][f.cols["parents"][rows] >= 0]] = True
        return kept & ~(~has_kid & (f.cols["joint"] < policy.leaf_min))
    return kept


def grow_forest(f: Forest, policy: Policy, select: Select) -> np.ndarray:
    """bool [N]: the nodes `policy` keeps in every tree — `drafting.grow_tree` + finalize, one layer at a
    time for the whole forest."""
    kept = f.cols["parents"] < 0
    open_ = kept.copy()  # nodes offered children at the next layer
    frontier = np.flatnonzero(kept)  # the open nodes of the layer above
    for d in range(1, min(policy.d_max, len(f.layers) - 1) + 1):
        layer = f.layers[d]
        if not f.has_kids[frontier].all():
            raise SpectreeError(f"replay: a node at depth {d - 1} was not expanded in the logbook; log with a "
                                "larger beam / envelope for this policy")
        parents, rank = f.layer_cols[d]
        rows = layer[open_[parents] & (rank < policy.K)]
        if len(rows) == 0:
            break
        keep = select(f, rows, kept)
        kept[rows[keep]] = True
        new = rows[keep]
        open_[new] = _expand(policy, f, new)
        frontier = new[open_[new]]
    return finalize(policy, f, kept)


def _expand(policy: Policy, f: Forest, new: np.ndarray) -> np.ndarray:
    if isinstance(policy, PCTPolicy):
        return f.cols["joint"][new] >= policy.ratio
    return np.ones(len(new), dtype=bool)


def fast_replay(logbook: list[LoggedPrompt], policy: Policy, forest: Optional[Forest] = None) -> pd.DataFrame:
    """Per-step τ and γ of `policy` over a logbook, like `replay.replay` (same columns and rows); pass a
    prebuilt `forest` to score many policies on one logbook."""
    for lp in logbook:
        check_replayable(lp, policy)
    select = vectorised_select(policy)
    if select is None:
        return replay(logbook, policy)
    f = forest if forest is not None else Forest.of(logbook)
    kept = grow_forest(f, policy, select)
    n_kept = np.bincount(f.tree[kept], minlength=f.n_trees)
    accepted = np.bincount(f.tree[kept & f.cols["on_path"]], minlength=f.n_trees) - 1  # the root is on path
    depth = np.zeros(f.n_trees, dtype=np.int64)
    np.maximum.at(depth, f.tree[kept], f.cols["depth"][kept])
    tree_at = {(int(p), int(q)): t for t, (p, q) in enumerate(zip(f.tree_prompt, f.tree_position))}
    rows = []
    for i, lp in enumerate(logbook):
        pos = 0
        while pos < lp.n_valid:
            t = tree_at[(i, pos)]
            tau = tau_of(int(accepted[t]))
            rows.append((pos, tau, int(n_kept[t]) - 1, int(depth[t]), lp.prompt.id, lp.prompt.dataset,
                         lp.prompt.category))
            pos += tau
    return pd.DataFrame(rows, columns=["position", "tau", "gamma", "depth", "prompt", "dataset", "category"])


def tile(logbook: list[LoggedPrompt], n_trees: int) -> list[LoggedPrompt]:
    """The logbook repeated (prompt ids suffixed #1, #2, …) until it holds at least n_trees trees — for
    timing replay at a given scale on a small logbook."""
    out, have, k = list(logbook), sum(lp.nodes.position.nunique() for lp in logbook), 1
    per_copy = max(have, 1)
    while have < n_trees:
        out += [replace(lp, prompt=replace(lp.prompt, id=f"{lp.prompt.id}#{k}")) for lp in logbook]
        have, k = have + per_copy, k + 1
    return out


__all__ = ["tile", "Forest", "fast_replay", "grow_forest", "rank_in_group", "smallest_in_runs", "vectorised_select"]
