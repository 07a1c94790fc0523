"""PCT, the EDD paper's path-confidence tree (§3.2): expand a node only while drafting it pays off in expected
time, P(the path is accepted) ≥ s_d / s_t."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Optional

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy, Rows


def expands(joint: np.ndarray, ratio: float) -> np.ndarray:
    """EDD §3.2's rule (s3 l.395, l.403): drafting past a node pays off in expected time while its path confidence
    P = Π p along the path is ≥ s_d/s_t. joint, the P of each node: [n] → bool [n]."""
    return joint >= ratio


def keeps_leaf(joint: np.ndarray, leaf_min: float) -> np.ndarray:
    """A leaf stays in the final tree while its P ≥ `leaf_min` (EDD: 0.01, s3 l.1388). joint [n] → bool [n]."""
    return joint >= leaf_min


@dataclass
class PCT(Policy):
    """`pct_prune`, EDD §3.2: top-k children per expandable node; a node is expandable if its path confidence c = Π p
    along the path is ≥ s_d/s_t (the expected time gain s_d − c·s_t of drafting past it is < 0); leaves with
    c < leaf_min are removed at the end (EDD: k = 5, depth 10, leaf_min = 0.01, s_d/s_t measured).
    `ratio` None takes s_d/s_t from this machine's cost model (`calibrate`)."""

    ratio: Optional[float] = None  # s_d / s_t: draft forward over target forward
    k: int = 5  # children per expanded node
    d_max: int = 10
    leaf_min: float = 0.01  # finally drop leaves whose path confidence is below this

    name = "pct"
    features = frozenset({"draft_prob"})
    param_names: ClassVar[dict[str, str]] = {"K": "k"}
    probabilities = ("ratio", "leaf_min")

    @property
    def K(self) -> int:
        return self.k

    @property
    def sampling_safe(self) -> bool:
        # expanding by a node's own value is safe; removing a leaf for it is not (a sampled child dropped for being
        # unlikely leaves its siblings no longer a sample without replacement): with leaf removal on, PCT is offered
        # the draft's top-k at T > 0 and each child is verified as a fixed proposal (`drafting.offer_sampling`)
        return self.leaf_min == 0

    @property
    def needs_calibration(self) -> bool:
        return self.ratio is None

    def calibrate(self, sd_over_st: float) -> "PCT":
        return self if self.ratio is not None else replace(self, ratio=round(float(sd_over_st), 4))

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return np.ones(len(cand), dtype=bool)

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        if self.ratio is None:
            raise SpectreeError("pct: ratio (s_d/s_t) is not set: give pct:ratio=… or load a pair, whose cost "
                                "model measures it")
        return expands(new.joint, self.ratio)

    def finalize(self, tree: Rows) -> np.ndarray:
        return ~tree.is_leaf() | keeps_leaf(tree.joint, self.leaf_min)
