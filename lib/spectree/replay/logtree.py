"""The logbook's "full tree" policy: what is drafted (and stored) at every position so that replay can
score other policies exactly.

Every expanded node offers its top-K children (all kept and stored). The nodes expanded at the next
layer are the beam — the top-`beam` by joint probability among the children of the previous layer's beam
(EAGLE-2's expansion: with beam = K it is exactly EAGLE-2's top-K per layer; C2T's full trees use K = 10,
d_max = 11) — plus an envelope that keeps static shapes replayable: every node whose path ranks are all
< b_env at depth < d_env (k-ary trees up to b_env × d_env), and the rank-0 chain at every depth.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from spectree.core.policy import OPTIONAL_FEATURES, Policy
from spectree.core.tree import DraftTree, Nodes


def path_max_rank(tree: DraftTree) -> torch.Tensor:
    """[n] the largest rank on each node's root path (root excluded)."""
    anc = tree.ancestor_mask()
    anc[:, 0] = False
    return (anc.long() * tree.rank[None, :]).max(dim=1).values


@dataclass
class LogTreePolicy(Policy):
    beam: int = 10
    b_env: int = 2
    d_env: int = 4

    name = "logtree"
    max_nodes = None  # the logbook's tree is as large as its config asks
    features = OPTIONAL_FEATURES  # the logbook stores every feature

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        return torch.ones(len(cand), dtype=torch.bool)

    def expand(self, tree: DraftTree, new: torch.Tensor) -> torch.Tensor:
        if bool((tree.depth[new] == 1).all()):  # a new tree: the root is the beam
            self._beam = torch.zeros(1, dtype=torch.bool)
            self._beam[0] = True
        self._beam = torch.cat([self._beam, torch.zeros(len(tree) - len(self._beam), dtype=torch.bool)])
        eligible = self._beam[tree.parents[new]]  # children of the previous layer's beam
        joint = torch.where(eligible, tree.joint[new], torch.full_like(tree.joint[new], -1.0))
        top = torch.zeros(len(new), dtype=torch.bool)
        top[joint.topk(min(self.beam, int(eligible.sum()))).indices] = True
        self._beam[new[top]] = True
        max_rank = path_max_rank(tree)[new]
        in_env = (max_rank < self.b_env) & (tree.depth[new] < self.d_env)
        return top | in_env | (max_rank == 0)


def logtree_policy(K: int = 10, d_max: int = 11, beam: int = 10, b_env: int = 2, d_env: int = 4) -> LogTreePolicy:
    return LogTreePolicy(K=K, d_max=d_max, beam=beam, b_env=b_env, d_env=d_env)
