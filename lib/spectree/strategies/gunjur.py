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
    proposes_top = True  # "selecting b top tokens" (§3.2); at T > 0 matched against the target's sample (Alg. 1)
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
    """Gunjur's "naive width" (§3.1): the simple-cutoff chain (it ends at the first token drawn from a distribution of
    entropy H > `cutoff`, or after d tokens), with that last index's token replaced by the top-k of its distribution
    ("copying the entire sequence ... replacing the last token with the top-k probable tokens"). At T > 0 the draft's
    top tokens are verified as fixed proposals (`proposes_top`), as the paper's top-k and sample matching do."""

    k: int = 4
    d: int = 4
    cutoff: float = 1.0  # nats: the chain's last index is the first whose distribution is above it

    name = "naive_width"
    features = frozenset({"entropy"})
    sampling_safe = True
    proposes_top = True  # "the top-k probable tokens" at the last index
    param_names: ClassVar[dict[str, str]] = {"K": "k", "d_max": "d"}

    def layer_cap(self) -> int:
        return 1  # the chain; the k alternatives at its last index are never expanded

    @property
    def K(self) -> int:
        return self.k

    @property
    def d_max(self) -> int:
        return self.d

    def last(self, rows: Rows) -> np.ndarray:
        """bool [n]: rows at the chain's last index (drawn from a distribution above the cutoff, or at depth d)."""
        return (rows.entropy > self.cutoff) | (rows.depth >= self.d)

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return cand.sibling() < np.where(self.last(cand), self.k, 1)  # offer order, as in EntropyBranching

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return ~self.last(new)
