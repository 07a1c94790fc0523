"""Static trees: the same shape at every step."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes


@dataclass
class KaryPolicy(Policy):
    name = "kary"
    features = frozenset()

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return torch.ones(len(cand), dtype=torch.bool)  # every offered child: K per node


def kary_policy(b: int = 2, d: int = 4) -> KaryPolicy:
    """Full b-ary tree of depth d (Gunjur et al.'s static baseline is b = 2, d = 4)."""
    return KaryPolicy(K=b, d_max=d)


@dataclass
class SequencesPolicy(Policy):
    name = "sequences"
    features = frozenset({"rank"})

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        if int(cand.depth[0]) == 1:
            return torch.ones(len(cand), dtype=torch.bool)  # k different first tokens
        return cand.rank == 0  # then each sequence continues greedily


def sequences_policy(k: int = 4, d: int = 5) -> SequencesPolicy:
    """SpecInfer-style: k draft sequences that share the root and differ in their first token."""
    return SequencesPolicy(K=k, d_max=d)


SiblingPath = tuple[int, ...]  # offer order of each node among its siblings, from the root's child down


def sibling_order(parents: torch.Tensor) -> torch.Tensor:
    """long [n]: each candidate's index among the candidates with the same parent, in offer order — the
    rank under greedy drafting, the sample order under stochastic drafting. Offers list siblings contiguously."""
    idx = torch.arange(len(parents))
    change = torch.ones(len(parents), dtype=torch.bool)
    change[1:] = parents[1:] != parents[:-1]
    group = change.cumsum(0) - 1  # [n] which run of equal parents
    return idx - idx[change][group]


@dataclass
class StaticShapePolicy(Policy):
    """A fixed tree given as the sibling-order paths of its nodes. Decides before seeing any sampled value,
    so multi-branch stochastic verification stays lossless on it."""

    shape: frozenset = field(default_factory=frozenset, repr=False)  # SiblingPaths of the draft nodes

    name = "static"
    features = frozenset()

    def __post_init__(self):
        super().__post_init__()
        self._paths: dict[int, SiblingPath] = {}  # tree node → its sibling path (the tree being grown)
        self._children: dict[SiblingPath, int] = {}  # path → how many children it has in the shape
        for q in self.shape:
            self._children[q[:-1]] = max(self._children.get(q[:-1], 0), q[-1] + 1)

    def width(self, tree: DraftTree, frontier: torch.Tensor) -> int:
        # sampling without replacement draws children in order, so the first j of K draws are a draw of j
        depth = tree.depth[frontier].tolist()
        return max(self._children.get(self._paths.get(i, ()) if d else (), 0) for i, d in zip(frontier.tolist(), depth))

    def expand(self, tree: DraftTree, new: torch.Tensor) -> torch.Tensor:
        # only nodes with children in the shape are scored by the draft and offered children
        return torch.tensor([self._paths[i] in self._children for i in new.tolist()], dtype=torch.bool)

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        if bool((tree.depth[cand.parents] == 0).all()):  # first layer of a new tree (or forest)
            self._paths = {}
        paths = [self._paths.get(p, ()) + (j,) for p, j in zip(cand.parents.tolist(), sibling_order(cand.parents).tolist())]
        keep = torch.tensor([q in self.shape for q in paths], dtype=torch.bool)
        kept = [q for q, k in zip(paths, keep.tolist()) if k]
        self._paths.update(zip(range(len(tree), len(tree) + len(kept)), kept))  # indices `tree.add` gives them
        return keep


def static_shape(paths) -> StaticShapePolicy:
    """The static policy for a set of sibling paths (K and depth sized to fit)."""
    paths = frozenset(tuple(q) for q in paths)
    return StaticShapePolicy(K=max((q[-1] + 1 for q in paths), default=1), d_max=max(map(len, paths), default=0),
                             shape=paths)


def tree_shape(tree: DraftTree) -> frozenset:
    """The sibling paths of a greedy tree's nodes (its ranks along each path): its shape, as a static policy reads it."""
    return frozenset(tuple(tree.rank[tree.path_to(i)[1:]].tolist()) for i in range(1, len(tree)))


def vct_policy(w: int = 3, d: int = 5) -> KaryPolicy:
    """VCT, EDD's "vanilla candidate tree": every node expanded with its top-w children, depth d (3, 5 in
    EDD Table 2: a full 3-ary tree of 363 draft tokens)."""
    policy = KaryPolicy(K=w, d_max=d)
    policy.name = "vct"
    return policy
