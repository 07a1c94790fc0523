"""EAGLE-2 (Li et al. 2024): expand, then rerank. C2T §2.2 (lines ~49–57 of its text) states the rule: "each token in
current layer generates TopK tokens. Then, among all the generated tokens, the TopK tokens are selected to generate
the next tree layer" for d_max rounds (T1: K + (d_max − 1)·K² drafted nodes); then "rerank all nodes in T1" by
joint probability P and keep the top N (T2, a subtree: a child's P never exceeds its parent's). N counts the root,
as C2T's "TopN = 1011 (meaning no recall …)" over |T1| = 1010 drafted nodes (s0 l.348) and EAGLE-2's own
`total_tokens` (its draft keeps total_tokens − 1) count it: N − 1 draft tokens are verified, as SGLang's `tokens`.

The serving engines build the same tree (SGLang's EAGLE-2, TensorRT-LLM's dynamic tree: `strategies.engines`), so
the rule is written once, here (`EagleTree`), and their policies only name its two numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy, Rows


def eagle2_rerank(rows: Rows, n: int) -> np.ndarray:
    """bool [len(rows)]: the n rows of largest joint probability of each tree (ties to shallower, then offer order):
    the nodes EAGLE-2 expands at a layer, or keeps when it reranks T1."""
    return rows.top(rows.joint, n)


@dataclass
class EagleTree(Policy):
    """EAGLE-2's rule: every offered child is drafted (K per expanded node: T1), the `expanded()` of largest joint
    probability of each layer are expanded, and finally the `verified()` nodes of largest joint probability — the
    root, P = 1, always among them — are verified (T2). Subclasses say what the two numbers are."""

    features = frozenset({"draft_prob"})
    fixed_size = True  # greedy: every layer keeps and expands the same counts
    max_nodes = 4096  # T1 is drafted (features only: the draft runs on the expanded nodes), T2 is what is verified

    def expanded(self) -> int:
        raise NotImplementedError

    def verified(self) -> int:
        raise NotImplementedError  # tokens verified per tree, the root included

    def layer_cap(self) -> int:
        return self.expanded()

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return np.ones(len(cand), dtype=bool)  # every candidate is drafted into T1; the rerank decides what is verified

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return eagle2_rerank(new, self.expanded())

    def finalize(self, tree: Rows) -> np.ndarray:
        return eagle2_rerank(tree, self.verified())  # the root has P = 1: always kept

    def worst_case(self) -> tuple[int, int]:
        """(count, depth) the live size guard can see: every offer is kept in T1, so the kept nodes grow by
        expanded·K per layer (not by the expanded nodes alone, as `Policy.worst_case` counts)."""
        total, frontier = 1, 1
        for depth in range(1, self.d_max + 1):
            if total + frontier * self.K > self.max_nodes or depth == self.d_max:
                return total + frontier * self.K, depth
            total, frontier = total + frontier * self.K, min(frontier * self.K, self.expanded())
        return total, self.d_max

    def candidates(self) -> int:
        """|T1|, the drafted nodes per tree: K at the first level, expanded·K at each later one."""
        return self.K + (self.d_max - 1) * self.expanded() * self.K


@dataclass
class Eagle2(EagleTree):
    """EAGLE-2's dynamic tree: K children offered per node and K nodes expanded per layer, depth d_max, then the
    top N − 1 of all drafted nodes by P: N tokens verified, the root among them (C2T Table 4 and EDD Table 2: K = 10,
    d_max = 6; EDD's N = 50; C2T's main tables K = 15, d_max = 10)."""

    K: int = 10  # children offered per node; nodes expanded per layer
    d_max: int = 6
    N: int = 50  # tokens verified after reranking, the root included (N − 1 draft tokens)

    name = "eagle2"

    def expanded(self) -> int:
        return self.K

    def __post_init__(self):
        super().__post_init__()
        if self.N < 1:
            raise SpectreeError(f"eagle2: N counts the root (N − 1 draft tokens are verified): it must be >= 1, got {self.N}")

    def verified(self) -> int:
        return self.N
