"""Replay: score any subtree policy on a logbook without running a model.

With greedy verification the output is the target's greedy continuation g whatever the policy, and the draft's
distributions at position i depend only on the committed prefix g[:i]. So growing the policy's tree from the
logged full tree at i gives the live tree; its accepted length is τ_i = 1 + (on-path nodes kept), γ_i = its
size − 1, and the next step starts at i + τ_i — exactly the live sequence of τ and γ. The policy runs over every
logged tree at once (`core.policy.grow` on a `Forest`): the same code that decides live, one tree at a time.
"""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.core.metrics import tau as tau_of
from spectree.core.policy import Growth, Policy, grow
from spectree.replay.forest import Forest
from spectree.retrieval.graft import Grafter, graft_columns
from spectree.retrieval.proposers import Retrieval
from spectree.replay.logbook import LoggedPrompt

STEP_COLUMNS = ["position", "tau", "gamma", "depth", "prompt", "dataset", "category"]  # a row per target forward


def check_replayable(lp: LoggedPrompt, policy: Policy) -> None:
    if policy.K > lp.K or policy.d_max > lp.d_max:
        raise SpectreeError(f"policy {policy.name} needs K={policy.K}, d_max={policy.d_max} but the logbook "
                            f"holds K={lp.K}, d_max={lp.d_max}: log with larger --K / --d-max")
    if policy.retrieval and (lp.prompt_ids is None or policy.max_depth > lp.d_max):
        why = ("holds no prompt ids (logged before retrieval)" if lp.prompt_ids is None else
               f"labels {lp.d_max} tokens past each position, its branches reach {policy.max_depth}")
        raise SpectreeError(f"{policy.spec}: the logbook {why}: log again (with --d-max >= the branches' len) "
                            "or lower len")


def as_forest(source: Union[Forest, list[LoggedPrompt]]) -> Forest:
    return source if isinstance(source, Forest) else Forest.of(source)


def grow_forest(forest: Forest, policy: Policy) -> Growth:
    """The policy's trees over every logged tree (`Growth`: grown, kept and fed nodes)."""
    for lp in forest.logbook:
        check_replayable(lp, policy)
    return grow(forest, policy.drafting, forest.offering(policy.K))


def visited_steps(forest: Forest, growth: Growth, retrieval: Sequence[Retrieval] = ()) -> pd.DataFrame:
    """Per-step τ and γ of grown trees: from position 0 of every prompt, the tree at each position reached
    (columns STEP_COLUMNS plus `tree`, the forest's tree id; `depth` = the verified tree's depth, which EDD's α
    divides by). With `retrieval` (a hybrid policy's proposers), each visited tree gets their branches grafted
    first, from the prompt's ids and the continuation up to that position, as live decoding does."""
    kept = growth.kept
    n_kept = np.bincount(forest.tree[kept], minlength=forest.n_trees)
    accepted = np.bincount(forest.tree[kept & forest.on_path], minlength=forest.n_trees) - 1  # the root is on path
    depth = np.zeros(forest.n_trees, dtype=np.int64)
    np.maximum.at(depth, forest.tree[kept], forest.cols["depth"][kept])
    tree_at = {(int(p), int(q)): t for t, (p, q) in enumerate(zip(forest.tree_prompt, forest.tree_position))}
    hybrid = HybridSteps(forest, kept, retrieval) if retrieval else None
    rows = []
    for i, lp in enumerate(forest.logbook):
        pos = 0
        if hybrid is not None:
            hybrid.start(lp)
        while pos < lp.n_valid:
            t = tree_at[(i, pos)]
            a, n, d = int(accepted[t]), int(n_kept[t]), int(depth[t])
            if hybrid is not None:
                a, n, d = hybrid.step(lp, t, pos)
            tau = tau_of(a)
            rows.append((pos, tau, n - 1, d, lp.prompt.id, lp.prompt.dataset, lp.prompt.category, t))
            pos += tau
    return pd.DataFrame(rows, columns=STEP_COLUMNS + ["tree"])


def logged_grafter(lp: LoggedPrompt, retrieval: Sequence[Retrieval]) -> tuple[Grafter, int]:
    """A `Grafter` over a logged prompt that cuts branches as live decoding did (`core.decode`), and the generation's
    max_new_tokens (the continuation runs d_max past it): a step at position `pos` grafts `proposals(max_new - pos -
    1)`; the stop token is the EOS that ended the generation, where one did (a logbook keeps no EOS ids: an EOS in a
    branch of a generation cut by length is kept, which only its step's γ sees)."""
    max_new = len(lp.continuation) - lp.d_max
    stop = (lp.continuation[lp.n_valid - 1],) if lp.n_valid < max_new else ()
    return Grafter(retrieval, lp.prompt_ids, stop), max_new


class HybridSteps:
    """Replay of a hybrid's steps: each visited tree's kept rows with the proposers' branches grafted
    (`retrieval.graft_columns`, as live), from a `Grafter` over the prompt and the continuation so far."""

    def __init__(self, forest: Forest, kept: np.ndarray, retrieval: Sequence[Retrieval]):
        self.forest, self.retrieval = forest, tuple(retrieval)
        self.rows = np.flatnonzero(kept)  # kept rows, tree after tree (a tree's rows are contiguous)
        self.bounds = np.searchsorted(forest.tree[self.rows], np.arange(forest.n_trees + 1))

    def start(self, lp: LoggedPrompt) -> None:
        self.grafter, self.max_new = logged_grafter(lp, self.retrieval)
        self.at = 0

    def step(self, lp: LoggedPrompt, t: int, pos: int) -> tuple[int, int, int]:
        """(accepted, size, depth) of the hybrid tree at position `pos` (forest tree `t`)."""
        self.grafter.extend(lp.continuation[self.at:pos])
        self.at = pos
        rows, cols = self.rows[self.bounds[t]:self.bounds[t + 1]], self.forest.cols
        parents = np.where(cols["parents"][rows] >= 0, np.searchsorted(rows, cols["parents"][rows]), -1)
        tokens, depth = cols["tokens"][rows], cols["depth"][rows]
        proposed = self.grafter.proposals(self.max_new - pos - 1)  # cut to the tokens left, as live
        new = graft_columns(parents, tokens, depth, cols["joint"][rows], proposed)
        parents, tokens = np.concatenate([parents, new["parents"]]), np.concatenate([tokens, new["tokens"]])
        kids = {(p, tok): c for c, (p, tok) in enumerate(zip(parents.tolist(), tokens.tolist())) if p >= 0}
        node, a, cont = 0, 0, lp.continuation[pos:]
        while a < len(cont) and (node, cont[a]) in kids:  # the target's greedy tokens, as `follow_argmax`
            node, a = kids[(node, cont[a])], a + 1
        return a, len(parents), int(max(depth.max(), new["depth"].max(initial=0)))


def replay(source: Union[Forest, list[LoggedPrompt]], policy: Policy) -> pd.DataFrame:
    """Per-step τ and γ of `policy` over a logbook (or its prebuilt `Forest`, to score many policies on it):
    columns STEP_COLUMNS, one row per target forward, prompt after prompt."""
    forest = as_forest(source)
    return visited_steps(forest, grow_forest(forest, policy), policy.retrieval)[STEP_COLUMNS]


def summarize(steps: pd.DataFrame) -> dict:
    """Totals and per-forward means of τ and γ for a per-step table (replay or live). `tokens` is Σ τ: it
    can exceed the generation by the tokens the last forward committed past max_new_tokens / EOS."""
    return {"steps": int(len(steps)), "tokens": int(steps.tau.sum()), "candidates": int(steps.gamma.sum()),
            "tau": float(steps.tau.mean()), "gamma": float(steps.gamma.mean())}


__all__ = ["STEP_COLUMNS", "check_replayable", "as_forest", "grow_forest", "visited_steps", "logged_grafter", "HybridSteps", "replay",
           "summarize"]
