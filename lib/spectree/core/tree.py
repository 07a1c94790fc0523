"""`DraftTree`: the one value that flows draft → verify → stats → replay.

Nodes are stored as parallel column tensors, index 0 = root = the last committed token.
Nodes are appended layer by layer, so a parent always has a smaller index than its children.
Everything else (ancestor mask, position ids, DFS order, paths) is derived, never stored twice.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional

import numpy as np
import torch

from spectree.core.errors import SpectreeError

NODE_FIELDS = ("tokens", "parents", "depth", "draft_prob", "joint", "entropy", "entropy_topm", "rank", "confidence",
               "source", "match_len")
LONG_FIELDS = {"tokens", "parents", "depth", "rank", "source", "match_len"}
ROOT = {"parents": -1, "depth": 0, "draft_prob": 1.0, "joint": 1.0, "entropy": 0.0, "entropy_topm": 0.0, "rank": 0,
        "confidence": 1.0, "source": 0, "match_len": 0}  # a root's features: the committed token, certain
SOURCES = ("draft", "lookup", "suffix")  # `source` codes: who proposed a node (retrieval proposers graft theirs)


def root_columns(token: int, fields: tuple[str, ...] = NODE_FIELDS) -> dict[str, np.ndarray]:
    """numpy [1] columns of a root node (the last committed token), for `fields`."""
    return {f: np.array([token if f == "tokens" else ROOT[f]], dtype=np.int64 if f in LONG_FIELDS else np.float32)
            for f in fields}


@dataclass
class Nodes:
    """Column arrays describing a set of draft nodes (a tree, or one layer of candidates).

    tokens       [n] long   token id
    parents      [n] long   index of the parent in the tree (-1 for the root)
    depth        [n] long   0 for the root
    draft_prob   [n] float  p of the token under its parent's draft distribution (T = 1; when drawn: the warped one)
    joint        [n] float  P = product of p along the root path
    entropy      [n] float  entropy (nats, full vocabulary) of the distribution the node was drawn from
    entropy_topm [n] float  the same entropy over the renormalised top-M probabilities
    rank         [n] long   rank of the token in that distribution (0 = most likely)
    confidence   [n] float  max probability of that distribution (EDD's draft confidence)
    source       [n] long   who proposed the node: 0 the draft model, 1 prompt lookup, 2 the suffix index (SOURCES)
    match_len    [n] long   retrieval nodes: length of the context suffix whose continuation proposed it (0: draft)

    A retrieval node (`spectree.retrieval`) is a node like any other: its `draft_prob` is its proposer's count-based
    probability, `joint` the product along its path, `rank` its place among its proposer's siblings; its entropy
    and confidence are NaN.
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depth: torch.Tensor
    draft_prob: torch.Tensor
    joint: torch.Tensor
    entropy: torch.Tensor
    entropy_topm: torch.Tensor
    rank: torch.Tensor
    confidence: torch.Tensor
    source: Optional[torch.Tensor] = None  # None: every node the draft's (zeros)
    match_len: Optional[torch.Tensor] = None

    def __post_init__(self):
        for f in ("source", "match_len"):
            if getattr(self, f) is None:
                setattr(self, f, torch.zeros(len(self.tokens), dtype=torch.long))

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def columns(self) -> dict[str, torch.Tensor]:
        return {f: getattr(self, f) for f in NODE_FIELDS}

    def take(self, idx: torch.Tensor) -> "Nodes":
        """Rows `idx` (long indices or a bool mask) as a new `Nodes`."""
        return Nodes(**{f: t[idx] for f, t in self.columns().items()})

    @staticmethod
    def from_columns(cols: dict) -> "Nodes":
        return Nodes(**{f: torch.tensor(cols[f], dtype=torch.long if f in LONG_FIELDS else torch.float32)
                        for f in NODE_FIELDS})

    @staticmethod
    def cat(parts: list["Nodes"]) -> "Nodes":
        return Nodes(**{f: torch.cat([getattr(p, f) for p in parts]) for f in NODE_FIELDS})


@dataclass
class DraftTree(Nodes):
    """A draft tree rooted at the last committed token.

    prefix_len  committed sequence length L including the root, so node i sits at position
                L - 1 + depth[i].
    dists       [m, V] the (temperature / top-p warped) draft distributions the children of the expanded
                nodes were drawn from; only kept for stochastic verification (None when greedy).
    dist_row    long [n]: node i's row in `dists`, −1 for a node never expanded. Leaves (most nodes) get
                no [V] row, and pruning or reordering the tree re-indexes `dist_row` without copying
                `dists` (a dense [n, V] copy cost ~150 ms per VCT tree at T > 0 here, measured).
    offered     candidate children the draft offered while growing the tree (kept or not): the size of
                tree construction's work in the step model (`speed.stepmodel`); 0 for a tree not drafted.
    """

    prefix_len: int = 0
    dists: Optional[torch.Tensor] = None
    dist_row: Optional[torch.Tensor] = None
    offered: int = 0  # candidate children the draft offered while growing it (tree construction's work)

    @staticmethod
    def root(token: int, prefix_len: int) -> "DraftTree":
        return DraftTree(**{f: torch.from_numpy(c) for f, c in root_columns(token).items()}, prefix_len=prefix_len)

    @property
    def size(self) -> int:
        return len(self)

    def add(self, layer: Nodes) -> torch.Tensor:
        """Append a layer of nodes (their `parents` index into this tree); returns their indices."""
        start = len(self)
        for f in NODE_FIELDS:
            setattr(self, f, torch.cat([getattr(self, f), getattr(layer, f)]))
        return torch.arange(start, len(self))

    def children(self, i: int) -> torch.Tensor:
        return torch.nonzero(self.parents == i).flatten()

    def ancestor_mask(self) -> torch.Tensor:
        """[n, n] bool: mask[i, j] is True iff j is i or an ancestor of i (the tree attention pattern)."""
        return self.ancestor_rows(torch.arange(len(self)))

    def ancestor_rows(self, nodes: torch.Tensor) -> torch.Tensor:
        """[m, n] bool: the rows of `ancestor_mask` for nodes [m] alone (what feeding a frontier needs)."""
        parents = self.parents.numpy()
        mask = np.zeros((len(nodes), len(self)), dtype=bool)
        rows, cur = np.arange(len(nodes)), nodes.numpy()
        while len(cur):  # one step up the tree per iteration: depth iterations
            mask[rows, cur] = True
            up = parents[cur]
            rows, cur = rows[up >= 0], up[up >= 0]
        return torch.from_numpy(mask)

    def position_ids(self) -> torch.Tensor:
        """[n] absolute positions: committed length - 1 + depth."""
        return self.prefix_len - 1 + self.depth

    def path_to(self, i: int) -> list[int]:
        """Node indices from the root to node i (inclusive)."""
        path = [i]
        while self.parents[path[-1]] >= 0:
            path.append(int(self.parents[path[-1]]))
        return path[::-1]

    def leaves(self) -> torch.Tensor:
        has_child = torch.zeros(len(self), dtype=torch.bool)
        has_child[self.parents[self.parents >= 0]] = True
        return torch.nonzero(~has_child).flatten()

    def dfs_order(self) -> torch.Tensor:
        """Node indices in depth-first pre-order (children in index order), DySpec App. C."""
        kids: list[list[int]] = [[] for _ in range(len(self))]
        for i, p in enumerate(self.parents.tolist()):
            if p >= 0:
                kids[p].append(i)
        order, stack = [], [0]
        while stack:
            u = stack.pop()
            order.append(u)
            stack.extend(reversed(kids[u]))
        return torch.tensor(order)

    def subtree(self, keep: torch.Tensor) -> "DraftTree":
        """The root-connected subtree of the nodes where `keep` (bool [n]) holds, re-indexed."""
        keep = keep.clone()
        keep[0] = True
        bad = keep & (self.parents >= 0) & ~keep[self.parents.clamp(min=0)]
        if bool(bad.any()):
            raise SpectreeError(f"subtree is not root-connected: nodes {bad.nonzero().flatten().tolist()} lack a parent")
        idx = keep.nonzero().flatten()
        new_index = torch.full((len(self),), -1, dtype=torch.long)
        new_index[idx] = torch.arange(len(idx))
        part = self.take(idx)
        part.parents = torch.where(part.parents >= 0, new_index[part.parents.clamp(min=0)], part.parents)
        return DraftTree(**part.columns(), prefix_len=self.prefix_len, dists=self.dists,
                         dist_row=None if self.dist_row is None else self.dist_row[idx])

    def fixed_proposals(self) -> torch.Tensor:
        """bool [n]: the nodes verified as fixed proposals (a point mass at their token) rather than as draws from
        their parent's recorded draft distribution: retrieval nodes, and every child of a node with no recorded
        distribution (its children were the draft's top-K: `drafting.offer_sampling`)."""
        drawn_from = self.dist_row >= 0 if self.dist_row is not None else torch.zeros(len(self), dtype=torch.bool)
        return (self.source > 0) | ~drawn_from[self.parents.clamp(min=0)]

    def draft_dist(self, i: int) -> torch.Tensor:
        """[V] the warped draft distribution node i's children were drawn from."""
        row = int(self.dist_row[i])
        if row < 0:
            raise SpectreeError(f"node {i} was never expanded: it has no draft distribution")
        return self.dists[row]

    def copy(self) -> "DraftTree":
        return replace(self, **{f.name: getattr(self, f.name).clone() for f in fields(Nodes)})
