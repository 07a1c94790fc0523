"""Per-group selections over flat arrays: how a policy decides "per tree" over a batch of nodes that carry a
tree id (one tree when drafting live, every logged tree at once in replay). numpy only; no Python loop over
groups, so deciding for 10,000 trees costs about what deciding for one does, times the rows.
"""
from __future__ import annotations

from typing import Union

import numpy as np


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
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    sizes = np.diff(np.append(starts, len(group)))
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


def top_in_groups(group: np.ndarray, key: np.ndarray, n: Union[int, np.ndarray], depth: np.ndarray) -> np.ndarray:
    """bool [len(group)]: the n largest keys of each group (n: one count, or one per element: its group's),
    ties towards smaller `depth`, then input order. A child's joint probability never exceeds its parent's, so
    the top n by joint of a tree is root-connected."""
    key = key.astype(np.float64)
    if len(group) and group[0] == group[-1] and (group == group[0]).all():  # one group (live drafting): one sort
        keep = np.zeros(len(group), dtype=bool)
        keep[np.lexsort((depth, -key))[:max(int(np.min(n)), 0)]] = True  # lexsort is stable: ties in input order
        return keep
    if np.isscalar(n):
        steps, deeper = np.diff(group), np.diff(depth)
        if (steps >= 0).all() and ((deeper >= 0) | (steps != 0)).all():  # runs per group, by depth within a run
            return smallest_in_runs(group, -key, int(n))
    return rank_in_group(group, -key, depth) < n


def kth_largest(group: np.ndarray, key: np.ndarray, k: int, n_groups: int) -> np.ndarray:
    """float [n_groups]: the k-th largest key of each group, −inf where a group has fewer than k."""
    bar = np.full(n_groups, -np.inf)
    if k < 1 or len(group) == 0:
        return bar
    if n_groups == 1:  # live drafting: one partial sort
        if len(key) >= k:
            bar[0] = -np.partition(-key, k - 1)[k - 1]
        return bar
    kth = rank_in_group(group, -key) == k - 1
    bar[group[kth]] = key[kth]
    return bar


def sibling_order(parents: np.ndarray) -> np.ndarray:
    """long [n]: each row's place among the rows with the same parent, in offer order — the rank under
    greedy drafting, the sample order under stochastic drafting. Offers list siblings contiguously."""
    idx = np.arange(len(parents))
    change = np.ones(len(parents), dtype=bool)
    change[1:] = parents[1:] != parents[:-1]
    return idx - idx[change][np.cumsum(change) - 1]


def mass_before(parents: np.ndarray, p: np.ndarray) -> np.ndarray:
    """float64 [n]: the sum of `p` over each row's earlier siblings (rows with the same parent before it; offers
    list siblings contiguously), 0 for a first child — the draft mass a sibling's slot no longer holds."""
    p = np.asarray(p, dtype=np.float64)
    total = np.cumsum(p) - p  # [n] exclusive running sum over all rows
    idx = np.arange(len(parents))
    change = np.ones(len(parents), dtype=bool)
    change[1:] = parents[1:] != parents[:-1]
    first = idx[change][np.cumsum(change) - 1]  # [n] the row of each row's first sibling
    return total - total[first]


__all__ = ["rank_in_group", "smallest_in_runs", "top_in_groups", "kth_largest", "sibling_order", "mass_before"]
