"""Sequoia (Chen et al. 2024): the static tree of a given size that maximises the expected number of
accepted tokens under positional acceptance probabilities p_1 ≥ p_2 ≥ … (the rank-k child of an accepted
node is accepted with probability p_k), found by dynamic programming."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.strategies.static import StaticShape

RankPath = tuple[int, ...]  # ranks from the root's child down to the node


def sequoia_tree(p: list[float], n: int) -> tuple[float, list[RankPath]]:
    """The best tree of n nodes (root included): (expected accepted tokens incl. the root, its rank paths)."""
    k_max = len(p)

    @lru_cache(maxsize=None)
    def best(size: int) -> tuple[float, tuple[RankPath, ...]]:  # F(size): a subtree with `size` nodes
        value, kids = children(0, size - 1)
        return 1.0 + value, kids

    @lru_cache(maxsize=None)
    def children(rank: int, budget: int) -> tuple[float, tuple[RankPath, ...]]:  # G(rank, budget)
        if rank == k_max or budget == 0:
            return 0.0, ()
        top, top_paths = 0.0, ()
        for s in range(1, budget + 1):  # the rank-`rank` child heads a subtree of s nodes
            sub, sub_paths = best(s)
            rest, rest_paths = children(rank + 1, budget - s)
            value = p[rank] * sub + rest
            if value > top:
                top, top_paths = value, ((rank,),) + tuple((rank,) + q for q in sub_paths) + rest_paths
        return top, top_paths

    value, paths = best(n)
    return value, sorted(paths, key=lambda q: (len(q), q))


def acceptance_vector(logbook: list, k: int) -> list[float]:
    """Greedy positional acceptance from LoggedPrompts: P(the rank-r child is the accepted one | its parent
    was accepted), r = 0..k-1, over every on-path node with logged children."""
    accepted, parents = np.zeros(k), 0
    for lp in logbook:
        scored = lp.nodes[lp.nodes.target_prob.notna()]  # the children of on-path nodes
        parents += scored.groupby(["position", "parents"]).ngroups
        ranks = scored[scored.on_path]["rank"].to_numpy()
        accepted += np.bincount(ranks[ranks < k], minlength=k)[:k]
    return (accepted / max(parents, 1)).round(4).tolist()


@dataclass
class Sequoia(StaticShape):
    """The DP-optimal static tree of n draft tokens for the positional acceptance vector p ('/'-separated, so it
    fits a strategy spec; measure it on a logbook with `acceptance_vector`)."""

    n: int = 32
    p: str = "0.6/0.15/0.07/0.04/0.03/0.02/0.015/0.01"

    name = "sequoia"
    size_params = ("n",)

    def __post_init__(self):
        if self.max_nodes is not None and isinstance(self.n, int) and self.n >= self.max_nodes:
            raise SpectreeError(f"sequoia: n={self.n} draft tokens cannot fit the {self.max_nodes:,}-node guard "
                                f"(Policy.max_nodes): lower n")
        try:
            probs = [float(x) for x in str(self.p).split("/")]
        except ValueError as err:
            raise SpectreeError(f"sequoia: p must be probabilities separated by '/', got '{self.p}'") from err
        if not probs or any(not 0.0 <= q <= 1.0 for q in probs):
            raise SpectreeError(f"sequoia: every acceptance probability must be in [0, 1], got {probs}")
        self.shape = frozenset(sequoia_tree(probs, self.n + 1)[1])
        super().__post_init__()


__all__ = ["sequoia_tree", "acceptance_vector", "Sequoia"]
