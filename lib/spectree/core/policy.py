"""The policy interface shared by live drafting and replay.

A policy sees node features only (`Nodes`: p, joint P, entropy H, rank, depth, confidence) and never a
model. Drafting offers it, layer by layer, up to K children of every node kept at the previous layer;
`select` returns which to keep, `expand` which of the kept nodes are offered children at the next
layer (default: all, up to depth d_max), and `finalize` may prune the finished tree to a root-connected
subtree (e.g. rerank top-N).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import torch

from spectree.core.errors import SpectreeError
from spectree.core.tree import DraftTree, Nodes

OPTIONAL_FEATURES = frozenset({"entropy", "entropy_topm", "rank"})  # node features that cost passes over the vocabulary


@dataclass
class Policy:
    K: int  # children offered per expanded node
    d_max: int  # maximum depth

    name = "policy"
    probabilities: ClassVar[tuple[str, ...]] = ()  # parameters that are probabilities (validated to lie in [0, 1])
    # live drafting stops (errors.TreeTooLarge) rather than offer more candidates than this: a policy meant
    # for a confident draft can ask a weak one for thousands of nodes a CPU verifies for minutes
    max_nodes: ClassVar[Optional[int]] = 1024
    # the costly node features (OPTIONAL_FEATURES) this policy reads; live drafting computes only these, the
    # others are NaN (rank: -1). By default the full entropy and the sampled tokens' rank, not the top-M entropy
    features: ClassVar[frozenset] = frozenset({"entropy", "rank"})

    def __post_init__(self):
        if self.K < 1:
            raise SpectreeError(f"{self.name}: K (children per node) must be >= 1, got {self.K}")
        if self.d_max < 0:
            raise SpectreeError(f"{self.name}: depth must be >= 0, got {self.d_max}")
        for key in self.probabilities:
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise SpectreeError(f"{self.name}: {key} must be in [0, 1], got {value}")

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        """bool [len(cand)]: which offered children join the tree."""
        raise NotImplementedError

    def width(self, tree: DraftTree, frontier: torch.Tensor) -> int:
        """How many children (≤ K) live drafting offers each frontier node [f] this layer: K unless the
        policy knows it keeps fewer whatever their values (a static shape). Replay may offer more."""
        return self.K

    def expand(self, tree: DraftTree, new: torch.Tensor) -> torch.Tensor:
        """bool [len(new)]: which of the nodes just added get children offered at the next layer."""
        return torch.ones(len(new), dtype=torch.bool)

    def finalize(self, tree: DraftTree) -> torch.Tensor:
        """bool [len(tree)]: the nodes kept in the finished tree (must be root-connected)."""
        return torch.ones(len(tree), dtype=torch.bool)
