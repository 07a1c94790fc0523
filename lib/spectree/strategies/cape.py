"""CAPE, the EDD paper's baseline: as many children as the parent's confidence bucket allows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from spectree.core.policy import Policy, Rows

BOUNDS = np.array([0.3, 0.6, 0.8], dtype=np.float32)  # confidence buckets (0, .3], (.3, .6], (.6, .8], (.8, 1]
WIDTHS = np.array([7, 5, 3, 1])


@dataclass
class CAPE(Policy):
    """Widths 7 / 5 / 3 / 1 for a parent confidence (its distribution's max probability) in (0, .3], (.3, .6],
    (.6, .8], (.8, 1], depth d."""

    d: int = 5

    name = "cape"
    K: ClassVar[int] = 7
    param_names: ClassVar[dict[str, str]] = {"d_max": "d"}
    size_params = ("d_max",)
    features = frozenset({"draft_prob"})  # its parent's confidence
    sampling_safe = True

    @property
    def d_max(self) -> int:
        return self.d

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        bucket = np.searchsorted(BOUNDS, cand.confidence.astype(np.float32), side="left")  # [c]
        return cand.sibling() < WIDTHS[bucket]  # the first offers: the top ranks when greedy, the first draws when not
