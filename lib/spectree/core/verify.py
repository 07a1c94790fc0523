"""Verification of a `DraftTree` against the target's distributions at its nodes.

Letters: R = target distribution (residual, after rejections), D = draft distribution the children
were sampled from (with the rejected tokens removed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from spectree.core.metrics import gamma, tau
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree


@dataclass
class Verdict:
    accepted: list[int]  # accepted node indices, root excluded, in path order
    bonus: int  # the token the target adds after the accepted path
    tree_size: int

    @property
    def tau(self) -> int:
        return tau(len(self.accepted))

    @property
    def gamma(self) -> int:
        return gamma(self.tree_size)

    def new_tokens(self, tree: DraftTree) -> list[int]:
        return tree.tokens[self.accepted].tolist() + [self.bonus]


def _children_lists(tree: DraftTree) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(len(tree))]
    for i, p in enumerate(tree.parents.tolist()):
        if p >= 0:
            kids[p].append(i)
    return kids


def follow_argmax(tree: DraftTree, next_token: Callable[[int], int]) -> Verdict:
    """Greedy acceptance: from the root, step to the child carrying the target's next token while one does.

    next_token(u) is the target's greedy token after node u: the argmax of its logits live, or the logged
    greedy continuation in replay — the same rule, so replay and live agree by construction.
    """
    kids, tokens = _children_lists(tree), tree.tokens.tolist()
    node, accepted = 0, []
    while True:
        want = next_token(node)
        nxt = next((c for c in kids[node] if tokens[c] == want), None)
        if nxt is None:
            return Verdict(accepted, want, len(tree))
        accepted.append(nxt)
        node = nxt


def verify_greedy(tree: DraftTree, target_logits: torch.Tensor) -> Verdict:
    """target_logits: [n, V] at the tree nodes."""
    best = target_logits.argmax(-1).tolist()  # [n]
    return follow_argmax(tree, best.__getitem__)


def verify_multibranch(tree: DraftTree, target_probs: torch.Tensor, generator: Optional[torch.Generator] = None
                       ) -> Verdict:
    """Multi-branch stochastic verification (DySpec Alg. 3; SpecInfer with sampling without replacement).

    target_probs: [n, V] warped target distributions at the nodes; tree.draft_dist(u): the warped draft
    distribution the draft's children of each node were drawn from, without replacement, in index order.
    At node u, for each child y in order: accept with prob min(1, R[y] / D[y]); on rejection
    R ← norm(max(R − D, 0)), D[y] ← 0, D ← norm(D). If no child is accepted the bonus is sampled from R.
    A fixed proposal (`DraftTree.fixed_proposals`: a retrieval child, proposed from the committed text whatever the
    draft sampled, or a child of the draft's top-K offered to a policy that picks children by their values) is a
    point mass D = δ_y: accepted with prob R[y], else R ← norm(R with y removed) — lossless whatever chose y.
    Fixed children come after the sampled ones (grafting appends them) and never repeat a sibling's token.
    """
    kids, tokens, fixed = _children_lists(tree), tree.tokens.tolist(), tree.fixed_proposals().tolist()
    node, accepted = 0, []
    while True:
        R = target_probs[node].double().cpu()
        D = tree.draft_dist(node).double().cpu() if any(not fixed[c] for c in kids[node]) else None
        nxt = None
        for c in kids[node]:
            y = tokens[c]
            u = torch.rand((), generator=generator, dtype=torch.float64)
            q = 1.0 if fixed[c] else D[y]  # the proposal's probability of y
            if q > 0 and u * q < R[y]:  # u < min(1, R[y]/q)
                nxt = c
                break
            if fixed[c]:
                residual = R.clone()
                residual[y] = 0.0
            else:
                residual = (R - D).clamp_min(0.0)
                D[y] = 0.0
                if D.sum() > 0:
                    D = D / D.sum()
            if residual.sum() > 0:
                R = residual / residual.sum()
        if nxt is None:
            bonus = int(torch.multinomial(R.float(), 1, generator=generator))
            return Verdict(accepted, bonus, len(tree))
        accepted.append(nxt)
        node = nxt


def verify(tree: DraftTree, target_logits: torch.Tensor, sampling: Sampling,
           generator: Optional[torch.Generator] = None) -> Verdict:
    if sampling.greedy:
        return verify_greedy(tree, target_logits)
    return verify_multibranch(tree, sampling.probs(target_logits), generator)
