"""Grafting retrieval branches into a draft tree: each branch is walked from the root, following a child that
already carries its next token (the draft's, or an earlier branch's) and adding nodes where none does. Siblings
never share a token, so greedy verification follows one path, and a stochastic verifier meets every proposed token
once (`core.verify`: a retrieval node is a fixed proposal, a point mass). Live decoding grafts into the policy's
finished tree (`DraftTree`), replay into the policy's kept rows of each logged tree (numpy columns): the same
`graft_columns`.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from spectree.core.tree import LONG_FIELDS, NODE_FIELDS, DraftTree, Nodes
from spectree.retrieval.index import ContextIndex
from spectree.retrieval.proposers import Branch, Retrieval, trimmed


def proposals(retrievers: Sequence[Retrieval], index: ContextIndex, stop: Sequence[int] = (),
              limit: Optional[int] = None) -> list[tuple[int, list[Branch]]]:
    """[(source code, branches)] of every proposer, in the order they are grafted; each branch cut after a `stop`
    token and to `limit` tokens (`proposers.trimmed`; empty ones dropped)."""
    cut = [[trimmed(b, stop, limit) for b in r.propose(index)] for r in retrievers]
    return [(r.source, [b for b in branches if b.tokens]) for r, branches in zip(retrievers, cut)]


def graft_columns(parents: np.ndarray, tokens: np.ndarray, depth: np.ndarray, joint: np.ndarray,
                  proposed: list[tuple[int, list[Branch]]]) -> dict[str, np.ndarray]:
    """The NODE_FIELDS columns [m] of the nodes the branches add to a tree of n nodes (parents [n], row 0 the
    root; tokens, depth, joint [n]); their `parents` index the tree grown by them (n + i is the i-th new node)."""
    kids = {(int(p), int(t)): i for i, (p, t) in enumerate(zip(parents.tolist(), tokens.tolist())) if p >= 0}
    depth, joint, n = list(depth.tolist()), list(joint.tolist()), len(parents)
    new: dict[str, list] = {f: [] for f in NODE_FIELDS}
    for source, branches in proposed:
        for rank, branch in enumerate(branches):
            node = 0
            for j, (t, p, m) in enumerate(zip(branch.tokens, branch.probs, branch.match)):
                child = kids.get((node, t))
                if child is None:
                    child = kids[(node, t)] = n + len(new["tokens"])
                    row = {"tokens": t, "parents": node, "depth": depth[node] + 1, "draft_prob": p,
                           "joint": joint[node] * p, "entropy": np.nan, "entropy_topm": np.nan,
                           "rank": rank if j == 0 else 0, "confidence": np.nan, "source": source, "match_len": m}
                    for f in NODE_FIELDS:
                        new[f].append(row[f])
                    depth.append(row["depth"])
                    joint.append(row["joint"])
                node = child
    return {f: np.array(v, dtype=np.int64 if f in LONG_FIELDS else np.float32) for f, v in new.items()}


def graft(tree: DraftTree, proposed: list[tuple[int, list[Branch]]]) -> DraftTree:
    """`tree` with the proposed branches grafted (new nodes appended after the draft's, never expanded)."""
    cols = graft_columns(tree.parents.numpy(), tree.tokens.numpy(), tree.depth.numpy(), tree.joint.numpy(), proposed)
    if len(cols["tokens"]) == 0:
        return tree
    tree.add(Nodes(**{f: torch.from_numpy(c) for f, c in cols.items()}))
    if tree.dist_row is not None:
        tree.dist_row = torch.cat([tree.dist_row, torch.full((len(cols["tokens"]),), -1, dtype=torch.long)])
    return tree


class Grafter:
    """The proposers of one generation over their shared index of the committed text (prompt + output so far):
    live decoding asks it to `graft` each draft tree and `extend`s it with every step's new tokens. A branch ends
    at its first `stop` token (the EOS ids: as HF's prompt lookup, nothing past one is ever used) and, given a
    step's `limit`, after the tokens the generation may still take less the target's own."""

    def __init__(self, retrievers: Sequence[Retrieval], tokens: Sequence[int], stop: Sequence[int] = ()):
        self.retrievers, self.stop = tuple(retrievers), tuple(stop)
        self.index = ContextIndex(max(r.n for r in self.retrievers), tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        self.index.extend(tokens)

    def proposals(self, limit: Optional[int] = None) -> list[tuple[int, list[Branch]]]:
        return proposals(self.retrievers, self.index, self.stop, limit)

    def graft(self, tree: DraftTree, limit: Optional[int] = None) -> DraftTree:
        return graft(tree, self.proposals(limit))


__all__ = ["proposals", "graft_columns", "graft", "Grafter"]
