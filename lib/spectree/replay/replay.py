"""Replay: score any subtree policy on a logbook without running a model.

With greedy verification the output is the target's greedy continuation g whatever the policy, and the
draft's distributions at position i depend only on the committed prefix g[:i]. So replaying the policy
on the logged full tree at i gives the live tree; its accepted length is τ_i = 1 + (on-path nodes kept),
γ_i = its size − 1, and the next step starts at i + τ_i — exactly the live sequence of τ and γ.
"""
from __future__ import annotations

import pandas as pd
import torch

from spectree.core.drafting import grow_tree
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes
from spectree.core.verify import Verdict, follow_argmax
from spectree.replay.logbook import LoggedPrompt


class LogOffer:
    """Offers a policy the logged children (first K by rank) of its frontier nodes."""

    def __init__(self, logged: DraftTree, K: int):
        self.logged, self.K = logged, K
        self.kids: list[list[int]] = [[] for _ in range(len(logged))]
        for i, p in enumerate(logged.parents.tolist()):
            if p >= 0:
                self.kids[p].append(i)
        self.log_of = [0]  # replay-tree node → logged node
        self.offered: dict[tuple[int, int], int] = {}  # (replay parent, token) → logged node

    def __call__(self, tree: DraftTree, frontier: torch.Tensor) -> Nodes:
        for j in range(len(self.log_of), len(tree)):  # nodes the policy kept since the last offer
            self.log_of.append(self.offered[(int(tree.parents[j]), int(tree.tokens[j]))])
        idx, parents = [], []
        for f in frontier.tolist():
            kids = self.kids[self.log_of[f]]
            if not kids:
                raise SpectreeError(f"replay: node at depth {int(tree.depth[f])} was not expanded in the logbook; "
                                    "log with a larger beam / envelope for this policy")
            idx += kids[: self.K]
            parents += [f] * len(kids[: self.K])
        cand = self.logged.take(torch.tensor(idx, dtype=torch.long))
        cand.parents = torch.tensor(parents, dtype=torch.long)
        self.offered = {(p, int(t)): i for p, t, i in zip(parents, cand.tokens.tolist(), idx)}
        return cand


def replay_step(logged: DraftTree, continuation: list[int], policy: Policy) -> tuple[DraftTree, Verdict]:
    """The tree `policy` builds from one logged tree, and its greedy verdict against the continuation."""
    tree = grow_tree(DraftTree.root(int(logged.tokens[0]), logged.prefix_len), policy, LogOffer(logged, policy.K))
    tree = tree.subtree(policy.finalize(tree))
    depth = tree.depth.tolist()
    return tree, follow_argmax(tree, lambda u: continuation[depth[u]])


def check_replayable(lp: LoggedPrompt, policy: Policy) -> None:
    if policy.K > lp.K or policy.d_max > lp.d_max:
        raise SpectreeError(f"policy {policy.name} needs K={policy.K}, d_max={policy.d_max} but the logbook "
                            f"holds K={lp.K}, d_max={lp.d_max}: log with larger --K / --d-max")


def replay_prompt(lp: LoggedPrompt, policy: Policy) -> pd.DataFrame:
    """Per-step τ and γ of `policy` on one logged prompt (columns: position, tau, gamma, depth = the
    verified tree's depth, which EDD's α divides by)."""
    check_replayable(lp, policy)
    rows, pos = [], 0
    while pos < lp.n_valid:
        tree, verdict = replay_step(lp.tree(pos), lp.continuation[pos:], policy)
        rows.append((pos, verdict.tau, verdict.gamma, int(tree.depth.max())))
        pos += verdict.tau
    return pd.DataFrame(rows, columns=["position", "tau", "gamma", "depth"])


def replay(logbook: list[LoggedPrompt], policy: Policy) -> pd.DataFrame:
    """Per-step τ and γ over a whole logbook (adds `prompt`, `dataset` and `category` columns)."""
    frames = [replay_prompt(lp, policy).assign(prompt=lp.prompt.id, dataset=lp.prompt.dataset,
                                               category=lp.prompt.category) for lp in logbook]
    return pd.concat(frames, ignore_index=True)


def summarize(steps: pd.DataFrame) -> dict:
    """Totals and per-forward means of τ and γ for a per-step table (replay or live). `tokens` is Σ τ: it
    can exceed the generation by the tokens the last forward committed past max_new_tokens / EOS."""
    return {"steps": int(len(steps)), "tokens": int(steps.tau.sum()), "candidates": int(steps.gamma.sum()),
            "tau": float(steps.tau.mean()), "gamma": float(steps.gamma.mean())}
