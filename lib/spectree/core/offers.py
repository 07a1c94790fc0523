"""The children a draft offers a frontier, read by the policy before they join the table (`Policy.limit`): live
drafting appends only those the policy lets through (`append_offers`), so that a policy with a wide K whose kept
nodes are few (DySpec's uncapped Alg. 1: at most m a tree) offers a layer what it can keep, not K per node.
"""
from __future__ import annotations

from typing import Union

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Growth, Lazy, Policy, Rows, unread

Columns = dict[str, Union[np.ndarray, Lazy]]  # a block of offered rows: NODE_FIELDS columns [c] or `Lazy`


class Offers(Rows):
    """The children a draft offers a frontier before they join the table, as `Policy.limit` reads them: their
    columns [c] (`parents`: table rows; every sibling, in offer order), with the `Rows` methods that read a row's
    parent, siblings and tree (`parent`, `parent_state`, `sibling`, `slot_value`, `top`). They have no rows yet, so
    no `state` of their own."""

    def __init__(self, growth: Growth, cols: Columns):
        super().__init__(growth, idx=np.zeros(0, dtype=np.int64))
        self._offered = cols

    @property
    def idx(self) -> np.ndarray:
        raise SpectreeError("offered children have no table rows until `limit` has passed them")

    def __len__(self) -> int:
        return len(self._offered["tokens"])

    def __getattr__(self, name: str) -> np.ndarray:
        if name.startswith("_") or name not in self._offered:
            raise unread(name)
        if name not in self._cols:
            col = self._offered[name]
            self._cols[name] = col.fn(np.arange(len(self))) if isinstance(col, Lazy) else np.asarray(col)
        return self._cols[name]

    @property
    def tree(self) -> np.ndarray:
        return self.growth.table.tree[self.parents]

    def subset(self, mask: np.ndarray) -> "Rows":
        return Offers(self.growth, picked(self._offered, mask))

    def is_leaf(self) -> np.ndarray:
        return np.ones(len(self), dtype=bool)

    def state(self, name: str, dtype=np.int64) -> np.ndarray:
        raise SpectreeError(f"offered children have no state `{name}` before they join the table")

    def set_state(self, name: str, values: np.ndarray) -> None:
        raise SpectreeError(f"offered children have no state `{name}` before they join the table (set it in select)")


def picked(cols: Columns, mask: np.ndarray) -> Columns:
    """The offered columns [c] at `mask` [c] (a `Lazy` one reads its rows through the mask)."""
    where = np.flatnonzero(mask)
    return {f: Lazy(lambda off, fn=c.fn: fn(where[off])) if isinstance(c, Lazy) else np.asarray(c)[where]
            for f, c in cols.items()}


def append_offers(frontier: Rows, policy: Policy, cols: Columns) -> np.ndarray:
    """Append to the table the children a draft offers `frontier` (columns [c], each node's in offer order) that
    `policy.limit` lets through; returns their rows, as an `Offer` does (live drafting, the tests' made-up drafts).
    Replay offers every logged child instead: `limit` passes every child `select` could keep, so trees are equal."""
    g = frontier.growth
    keep = policy.limit(Offers(g, cols), g.rows(g.grown)) if len(cols["tokens"]) else None
    if keep is not None and not keep.all():
        cols = picked(cols, keep)
    return g.table.append(cols)


__all__ = ["Columns", "Offers", "picked", "append_offers"]
