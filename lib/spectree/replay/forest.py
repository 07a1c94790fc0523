"""A logbook as one node table (`Forest`): every logged tree at once, so that `core.policy.grow` runs a policy
over all of them in one layer loop (each layer a handful of numpy operations over every tree)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from spectree.core.errors import SpectreeError
from spectree.core.policy import NodeTable, Offer, Rows
from spectree.core.tree import LONG_FIELDS, NODE_FIELDS, Nodes
from spectree.replay.logbook import LoggedPrompt


@dataclass
class Forest(NodeTable):
    """Every logged node of a logbook: NODE_FIELDS columns [N] (parents as global row indices, −1 at roots),
    `on_path` [N], the tree of each row, and each tree's (prompt, position)."""

    on_path: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [N] the node's path is the greedy output
    tree_prompt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [n_trees] index into the logbook
    tree_position: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [n_trees]
    logbook: list[LoggedPrompt] = field(default_factory=list)

    def __post_init__(self):
        depth, parents = self.cols["depth"], self.cols["parents"]
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
        self.layers = [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]  # rows at each depth
        self.layer_cols = [(parents[rows], self.cols["rank"][rows]) for rows in self.layers]
        self.has_kids = np.bincount(parents[parents >= 0], minlength=len(parents)) > 0  # [N] expanded when logged

    @staticmethod
    def of(logbook: list[LoggedPrompt]) -> "Forest":
        frames = [lp.nodes.assign(prompt=i) for i, lp in enumerate(logbook) if len(lp.nodes)]
        df = pd.concat(frames, ignore_index=True)
        is_root = df["parents"].to_numpy() < 0
        tree = np.cumsum(is_root) - 1  # nodes of a tree are contiguous, root first
        start = np.flatnonzero(is_root)
        parents = df["parents"].to_numpy()
        cols = {f: df[f].to_numpy() for f in NODE_FIELDS}
        cols["parents"] = np.where(parents >= 0, parents + start[tree], -1)
        return Forest(cols, tree, len(start), df["on_path"].to_numpy(dtype=bool), df["prompt"].to_numpy()[start],
                      df["position"].to_numpy()[start], logbook)

    def offering(self, K: int) -> Offer:
        """The logged children (the first K by rank) of a frontier, for `grow`."""
        def offer(rows: Rows) -> np.ndarray:
            frontier, depth = rows.idx, int(rows.depth[0]) + 1
            if not self.has_kids[frontier].all():
                raise SpectreeError(f"replay: a node at depth {depth - 1} was not expanded in the logbook; log "
                                    "with a larger beam / envelope for this policy")
            if depth >= len(self.layers):
                return np.zeros(0, dtype=np.int64)
            parents, rank = self.layer_cols[depth]
            is_open = np.zeros(len(self), dtype=bool)
            is_open[frontier] = True
            return self.layers[depth][is_open[parents] & (rank < K)]
        return offer

    def nodes(self, rows: np.ndarray) -> Nodes:
        return Nodes(**{f: torch.from_numpy(np.ascontiguousarray(self.cols[f][rows])).to(
            torch.long if f in LONG_FIELDS else torch.float32) for f in NODE_FIELDS})


def tile(logbook: list[LoggedPrompt], n_trees: int) -> list[LoggedPrompt]:
    """The logbook repeated (prompt ids suffixed #1, #2, …) until it holds at least n_trees trees — for
    timing replay at a given scale on a small logbook."""
    out, have, k = list(logbook), sum(lp.nodes.position.nunique() for lp in logbook), 1
    per_copy = max(have, 1)
    while have < n_trees:
        out += [replace(lp, prompt=replace(lp.prompt, id=f"{lp.prompt.id}#{k}")) for lp in logbook]
        have, k = have + per_copy, k + 1
    return out


__all__ = ["Forest", "tile"]
