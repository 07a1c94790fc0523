"""CAPE (Du et al., GLIDE with a CAPE), the EDD paper's baseline: as many children as the parent's confidence
bucket allows, and only the top-1 node of each layer expanded (EDD §4.2, line ~614: "it only expands based on the
top-1 node each time")."""
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
    (.6, .8], (.8, 1]; of each layer only its top-1 node (largest joint P: the draft's top token under greedy
    drafting) is expanded; depth d (EDD Table 2: 5). At most 7·d draft tokens."""

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

    def layer_cap(self) -> int:
        return 1  # one node expanded per layer

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        bucket = np.searchsorted(BOUNDS, cand.confidence.astype(np.float32), side="left")  # [c]
        return cand.sibling() < WIDTHS[bucket]  # the first offers: the top ranks when greedy, the first draws when not

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return new.top(new.joint, 1)  # the layer's top-1 node (whether a node gets children may read its value)
