"""Hybrid trees: any policy's draft tree plus retrieval branches (`spectree.retrieval`) grafted onto it, as
SAM-Decoding grafts its suffix-automaton drafts next to EAGLE-2's tree.

`pct:ratio=0.2+suffix:k=2,len=8` is `Hybrid(PCT(ratio=0.2), (Suffix(k=2, len=8),))`; `ar+lookup` is prompt lookup
alone (no draft model). The base policy decides its draft nodes exactly as it does alone (every decision is its
own: this class only delegates); each proposer decides its branches from the committed text (`k`, `len`, the
shortest context it trusts, `min_n`). Live decoding grafts the branches into the finished tree
(`core.decode`), replay into the kept rows of each logged tree (`replay.replay`) — the same `graft_columns`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.retrieval.graft import Grafter
from spectree.retrieval.proposers import Retrieval


@dataclass
class Hybrid(Policy):
    """`base`'s trees with the branches of `retrieval` (one or more proposers, grafted in order) added."""

    base: Policy = field(metadata={"spec": False})  # not spec parameters: the spec is base's and the proposers'
    retrieval: tuple[Retrieval, ...] = field(metadata={"spec": False})

    def __post_init__(self):
        if self.base.retrieval:
            raise SpectreeError(f"{self.base.spec}: already a hybrid; give every proposer to one Hybrid")
        self.retrieval = tuple(self.retrieval)
        if not self.retrieval:
            raise SpectreeError(f"{self.base.spec}: a hybrid needs at least one retrieval proposer (+lookup, +suffix)")
        names = [r.name for r in self.retrieval]
        if len(set(names)) < len(names):
            raise SpectreeError(f"{self.spec}: each retrieval proposer may be named once")

    def __getattr__(self, name: str) -> Any:  # the base policy's own parameters (PCT's ratio, C2T's beta, ...)
        if name.startswith("__") or "base" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["base"], name)

    @property
    def name(self) -> str:
        return "+".join([self.base.name, *(r.name for r in self.retrieval)])

    @property
    def spec(self) -> str:
        return "+".join([self.base.spec, *(r.spec for r in self.retrieval)])

    @property
    def drafting(self) -> Policy:
        return self.base

    def grafter(self, tokens: list[int], stop: tuple[int, ...] = ()) -> Grafter:
        return Grafter(self.retrieval, tokens, stop)

    @property
    def max_depth(self) -> int:
        return max([self.base.d_max, *(r.len for r in self.retrieval)])

    @property
    def context_order(self) -> int:
        """The longest context the proposers match: the depth of their shared `ContextIndex`."""
        return max(r.n for r in self.retrieval)

    # --- everything about the draft nodes is the base policy's --------------------------------------------
    K = property(lambda self: self.base.K)
    d_max = property(lambda self: self.base.d_max)
    features = property(lambda self: self.base.features)
    probabilities = property(lambda self: self.base.probabilities)
    max_nodes = property(lambda self: self.base.max_nodes)
    size_params = property(lambda self: self.base.size_params)
    sampling_safe = property(lambda self: self.base.sampling_safe)
    param_names = property(lambda self: self.base.param_names)
    fixed_size = property(lambda self: self.base.fixed_size)
    needs_calibration = property(lambda self: self.base.needs_calibration)

    def select(self, cand, tree):
        return self.base.select(cand, tree)

    def expand(self, new, tree):
        return self.base.expand(new, tree)

    def finalize(self, tree):
        return self.base.finalize(tree)

    def width(self, frontier):
        return self.base.width(frontier)

    def limit(self, offers, tree):
        return self.base.limit(offers, tree)

    def layer_cap(self):
        return self.base.layer_cap()

    def offer_cap(self):
        return self.base.offer_cap()

    def worst_case(self):
        return self.base.worst_case()

    def oversized(self):
        return self.base.oversized()

    def calibrate(self, sd_over_st: float) -> "Hybrid":
        return Hybrid(self.base.calibrate(sd_over_st), self.retrieval)


__all__ = ["Hybrid"]
