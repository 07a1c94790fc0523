"""Entropy-informed dynamic trees (Gunjur et al.): a branching factor B(H) from the entropy of each node's
draft distribution."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from spectree.core.policy import Policy, Rows, spec_field


def gunjur_branching(h: float) -> int:
    """The paper's best rule: B(H) = 1 if H < 0.02; 2 if 0.02 <= H < 1; min(ceil(4H), 7) if H >= 1."""
    if h < 0.02:
        return 1
    if h < 1.0:
        return 2
    return min(math.ceil(4 * h), 7)


@dataclass
class EntropyBranching(Policy):
    """"Dyn width only": B(H) children per node (H in nats over the full vocabulary), fixed depth d. With a finite
    `cutoff` (and a larger d) it is "dyn width + depth": a branch stops where H > cutoff."""

    d: int = 4
    k_max: int = 7  # the widest B(H) may ask for
    cutoff: float = math.inf  # B(H) = 0 where H > cutoff
    branching: Callable[[float], int] = spec_field(default=gunjur_branching)  # B(H), e.g. from the explorer

    name = "entropy"
    features = frozenset({"entropy"})
    sampling_safe = True
    param_names: ClassVar[dict[str, str]] = {"K": "k_max", "d_max": "d"}

    @property
    def K(self) -> int:
        return self.k_max

    @property
    def d_max(self) -> int:
        return self.d

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # every candidate of one parent carries that parent's entropy H: keep its first B(H) offers (the top B(H)
        # when greedy, the first B(H) draws when sampling: a sample's rank would keep it for its value)
        h, where = np.unique(cand.entropy, return_inverse=True)  # B(H) once per distinct parent
        width = np.array([0 if x > self.cutoff else self.branching(float(x)) for x in h], dtype=np.int64)
        return cand.sibling() < width[where]


@dataclass
class NaiveWidth(Policy):
    """Gunjur's "naive width": the greedy chain, with the top-k alternatives at its last index only."""

    k: int = 4
    d: int = 4

    name = "naive_width"
    features = frozenset()
    sampling_safe = True
    param_names: ClassVar[dict[str, str]] = {"K": "k", "d_max": "d"}
    fixed_size = True

    def layer_cap(self) -> int:
        return 1  # the chain; the k alternatives at depth d are never expanded

    @property
    def K(self) -> int:
        return self.k

    @property
    def d_max(self) -> int:
        return self.d

    def width(self, frontier: Rows) -> int:
        return self.k if frontier.depth[0] == self.d - 1 else 1

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return cand.sibling() < np.where(cand.depth == self.d, self.k, 1)  # offer order, as in EntropyBranching
