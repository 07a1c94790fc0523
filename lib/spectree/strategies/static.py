"""Static trees: the same shape at every step — full k-ary trees, VCT, SpecInfer-style sequences, and any
shape given as the sibling-order paths of its nodes (Sequoia's)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy, Rows, spec_field
from spectree.core.tree import DraftTree

SiblingPath = tuple[int, ...]  # offer order of each node among its siblings, from the root's child down


@dataclass
class Kary(Policy):
    """Full b-ary tree of depth d (Gunjur et al.'s static baseline is b = 2, d = 4). At T > 0 its children are the
    draft's draws without replacement (`offer=draws`), or its top b verified as fixed proposals (`offer=top`):
    Gunjur's static tree is its dynamic trees' machinery with b fixed, "selecting b top tokens" (s1 l.73, l.125)."""

    b: int = 2
    d: int = 4
    offer: str = "draws"  # draws | top: what the draft offers at T > 0 (greedy: the top b either way)

    name = "kary"
    features = frozenset()
    sampling_safe = True
    param_names: ClassVar[dict[str, str]] = {"K": "b", "d_max": "d"}
    fixed_size = True

    def __post_init__(self):
        super().__post_init__()
        if self.offer not in ("draws", "top"):
            raise SpectreeError(f"kary: offer must be 'draws' or 'top', got '{self.offer}'")

    @property
    def proposes_top(self) -> bool:
        return self.offer == "top"

    @property
    def K(self) -> int:
        return self.b

    @property
    def d_max(self) -> int:
        return self.d

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return np.ones(len(cand), dtype=bool)  # every offered child: b per node


@dataclass
class VCT(Policy):
    """VCT, EDD's "vanilla candidate tree": every node expanded with its top-w children, depth d (3, 5 in EDD
    Table 2: a full 3-ary tree of 363 draft tokens)."""

    w: int = 3
    d: int = 5

    name = "vct"
    features = frozenset()
    sampling_safe = True
    param_names: ClassVar[dict[str, str]] = {"K": "w", "d_max": "d"}
    fixed_size = True

    @property
    def K(self) -> int:
        return self.w

    @property
    def d_max(self) -> int:
        return self.d

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return np.ones(len(cand), dtype=bool)


@dataclass
class Sequences(Policy):
    """SpecInfer-style: k draft sequences that share the root and differ in their first token, depth d."""

    k: int = 4
    d: int = 5

    name = "sequences"
    features = frozenset()
    sampling_safe = True
    param_names: ClassVar[dict[str, str]] = {"K": "k", "d_max": "d"}
    fixed_size = True

    @property
    def K(self) -> int:
        return self.k

    @property
    def d_max(self) -> int:
        return self.d

    def layer_cap(self) -> int:
        return self.k  # k sequences

    def width(self, frontier: Rows) -> int:
        return self.k if frontier.depth[0] == 0 else 1

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # k different first tokens, then each sequence continues with its first offer (the top-1 when greedy, a
        # sample when not: offer order, never a sample's rank, which would keep a sample for its value)
        return (cand.depth == 1) | (cand.sibling() == 0)


@dataclass
class StaticShape(Policy):
    """A fixed tree given as the sibling paths of its nodes. It decides before seeing any sampled value, so
    multi-branch stochastic verification stays lossless on it. Each node remembers its place in the shape
    (state "shape": a node of the shape's trie, 0 = the root)."""

    shape: frozenset = spec_field(default_factory=frozenset)  # SiblingPaths of the draft nodes

    name = "static"
    features = frozenset()
    sampling_safe = True
    fixed_size = True
    size_params = ("shape",)

    def __post_init__(self):
        paths = sorted(self.shape, key=lambda q: (len(q), q))
        self._K = max((q[-1] + 1 for q in paths), default=1)
        self._d_max = max(map(len, paths), default=0)
        depth = np.array([len(q) for q in paths], dtype=np.int64)  # [nodes]
        fed = np.array([len(q) for q in {q[:-1] for q in paths}], dtype=np.int64)  # [nodes with children]
        self._per_depth = np.bincount(depth, minlength=self._d_max + 1)  # [d_max + 1] nodes at each depth
        self._fed_per_depth = np.bincount(fed, minlength=self._d_max + 1)  # [d_max + 1] of them with children
        index = {(): 0}
        self._child = np.full((len(paths) + 1, self._K), -1, dtype=np.int64)  # [trie nodes, K] → child node
        for q in paths:
            index[q] = len(index)
            self._child[index[q[:-1]], q[-1]] = index[q]
        self._n_children = (self._child >= 0).sum(1)  # [trie nodes]
        super().__post_init__()

    @property
    def K(self) -> int:
        return self._K

    @property
    def d_max(self) -> int:
        return self._d_max

    def worst_case(self) -> tuple[int, int]:
        # the guard at depth l counts the shape's nodes above l (root included) plus K per node fed at l - 1
        counts = [1 + int(self._per_depth[1:d].sum()) + int(self._fed_per_depth[d - 1]) * self._K
                  for d in range(1, self._d_max + 1)]
        return max(((c, d) for d, c in enumerate(counts, start=1)), default=(1, 0))

    def width(self, frontier: Rows) -> int:
        # sampling without replacement draws children in order, so the first j of K draws are a draw of j
        return int(self._n_children[frontier.state("shape")].max())

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        sib = cand.sibling()
        node = np.where(sib < self._K, self._child[cand.parent_state("shape"), np.minimum(sib, self._K - 1)], -1)
        cand.set_state("shape", node)
        return node >= 0

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return self._n_children[new.state("shape")] > 0  # only nodes with children in the shape are fed


def tree_shape(tree: DraftTree) -> frozenset:
    """The sibling paths of a greedy tree's nodes (its ranks along each path): its shape, as a static policy reads it."""
    return frozenset(tuple(tree.rank[tree.path_to(i)[1:]].tolist()) for i in range(1, len(tree)))


def static_shape(paths) -> StaticShape:
    """The static policy for a set of sibling paths (K and depth sized to fit)."""
    return StaticShape(shape=frozenset(tuple(q) for q in paths))


__all__ = ["Kary", "VCT", "Sequences", "StaticShape", "tree_shape", "static_shape"]
