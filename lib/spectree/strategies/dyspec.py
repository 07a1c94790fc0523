"""DySpec (Xiong et al.): grow the token tree where the estimated acceptance is highest, one *slot* at a time.

A slot is the next draw from a node's draft distribution. Its value is known before its token is (Alg. 1 lines
8–9, appendix A.1): a node's first-child slot is worth the node's own v = P (the product of the draft
probabilities along its path), and after a draw y the next sibling slot is worth v·(1 − R[y]), so the k-th child of
u is worth P(u)·(1 − Σ p of u's first k − 1 children) (`Rows.slot_value`). "The estimated acceptance rate is
independent of its actual token ... If what this token is affects whether or not we keep the sample in draft token
tree, then the final result will be biased" (A.1): so both algorithms keep a child for the value of its slot, never
its own, and stay lossless under multi-branch sampling verification (Alg. 3). Under greedy drafting the draws are
the draft's ranks in order.

Alg. 1's heap is grown layer by layer here — the m slots of largest value are the same set, since a slot is never
worth more than the slot it came from. Alg. 1 holds at most m + 1 slots, and so does a layer here: live drafting
offers a node's children only while their slots can still be among the m best (`DySpec.limit`), so K = m (no cap
on children, as in Alg. 1) offers at most m candidates a layer, not K per node, and stays inside the node guard.
Where we differ from the paper (docs/fidelity.md): K may cap a node's children (K < m) and the tree stops at depth
d_max (the logbook's width and depth).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from spectree.core.groups import kth_largest, top_in_groups
from spectree.core.policy import Policy, Rows

ROOT_VALUE = 2.0  # above every slot value (≤ 1): the root is always among the kept


def slot_key(cand: Rows) -> np.ndarray:
    """float64 [c]: each offered child's slot value, never above its parent's (as it cannot be when the draft's
    probabilities sum to at most 1; this holds it through rounding, so that the top m stay root-connected)."""
    parent = np.where(cand.depth == 1, 1.0, cand.parent_state("slot", np.float64))
    return np.minimum(cand.slot_value(), parent)


@dataclass
class DySpec(Policy):
    """`dyspec_greedy`, Alg. 1 with budget m: the m draft tokens whose slots a max-heap of slot values pops first
    (the m slots of largest value); at most K children a node (K ≥ m: uncapped, Alg. 1), depth d_max."""

    m: int = 64  # draft tokens per tree
    K: int = 8
    d_max: int = 11

    name = "dyspec"
    features = frozenset({"draft_prob"})
    size_params = ("m", "K")
    sampling_safe = True  # a child is kept for its slot's value, known before its token

    def layer_cap(self) -> int:
        return max(self.m, 1)  # nodes expanded per layer: those whose P reaches the m-th best slot value

    def width(self, frontier: Rows) -> int:
        return max(min(self.K, self.m), 1)  # m nodes hold at most m children of one node

    def offer_cap(self) -> int:
        return self.m  # `limit`: a layer offers at most the m best slots

    def limit(self, offers: Rows, tree: Rows) -> np.ndarray:
        # Alg. 1 pops the m slots of largest value: an offered child can only be kept if its slot is among the m best
        # of the slots drafted so far and this layer's, in finalize's order (value, then shallower — the drafted
        # rows —, then offer order). The others are never kept, nor is anything below them (a slot is worth no more
        # than its parent's or an earlier sibling's), and they leave `select`'s bar, the m-th best value, as it is:
        # the tree is the same. Each node's kept offers are a prefix of its children (slots fall in offer order), at
        # most m in all, and the cut reads slot values only, known before a token (A.1: sampling stays lossless)
        key = slot_key(offers)  # [c]
        drafted = tree.depth > 0
        group = np.concatenate([tree.tree[drafted], offers.tree])
        value = np.concatenate([tree.state("slot", np.float64)[drafted], key])
        depth = np.concatenate([tree.depth[drafted], offers.depth])
        return top_in_groups(group, value, self.m, depth)[int(drafted.sum()):] & (key > 0)

    def _bar(self, tree: Rows, extra: Optional[Rows] = None, key: Optional[np.ndarray] = None) -> np.ndarray:
        """float [trees]: the m-th largest slot value drafted so far (with `extra`'s `key` values), −inf if fewer."""
        drafted = tree.depth > 0
        groups, values = [tree.tree[drafted]], [tree.state("slot", np.float64)[drafted]]
        if extra is not None:
            groups.append(extra.tree)
            values.append(key)
        return kth_largest(np.concatenate(groups), np.concatenate(values), self.m, tree.n_trees)

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        # a slot can only end among the m best if it beats the m-th best value seen so far (the bar only rises); a
        # value of 0 (a draft probability that underflowed: a sharp draft's other children) never does, even while
        # fewer than m values are positive — else every such tie would pass and the tree would grow without bound
        key = slot_key(cand)  # [c]
        cand.set_state("slot", key)
        return (key >= self._bar(tree, cand, key)[cand.tree]) & (key > 0)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        # a node's first child slot is worth its own P; below the bar none of its children can be kept
        return (new.joint >= self._bar(tree)[new.tree]) & (new.joint > 0)

    def finalize(self, tree: Rows) -> np.ndarray:
        key = np.where(tree.depth == 0, ROOT_VALUE, tree.state("slot", np.float64))
        return tree.top(key, self.m + 1)  # the m best slots (ties to shallower, then offer order) and the root


@dataclass
class DySpecThreshold(Policy):
    """`dyspec_threshold`, Alg. 2: layer by layer, every node keeps drawing children while the slot value is at
    least t (the next child's value P(u)·(1 − Σ p of the earlier children)); K children offered per node."""

    t: float = 0.05  # draw while the slot value is at least t
    K: int = 8
    d_max: int = 11

    name = "dyspec_threshold"
    features = frozenset({"draft_prob"})
    probabilities = ("t",)
    sampling_safe = True  # a child is kept for its slot's value, known before its token

    def layer_cap(self) -> Optional[int]:
        # nodes expanded per layer: those with P ≥ t, whose joint probabilities sum to at most 1
        return int(1 / self.t) if self.t > 0 else None

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        key = cand.slot_value()
        return (key >= self.t) & (key > 0)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return (new.joint >= self.t) & (new.joint > 0)  # its first child slot is worth its P
