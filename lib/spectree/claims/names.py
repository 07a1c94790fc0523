"""One name per speedup baseline, one per s_d/s_t, and row labels read off the spec that ran.

**Speedups.** The headline speedup of every table, figure and the explorer is tokens/s over HF `generate` on the
same target, machine and run (`VS_HF`); plain decoding through our own loop (`AR_LABEL`) is a second, labelled
baseline (`VS_AR`), which a cost model's projection is made against (it prices our loop's steps, not HF's) and which
`to_hf` turns into the headline one with a measured ratio of our AR loop to HF `generate`.

**s_d/s_t.** PCT expands a node while its path confidence is at least s_d/s_t, the draft's forward time over the
target's. Five values of it appear, each for one purpose (`sd_st`): the paper's 7B pair (EDD l.1388: 1.1 ms /
29.8 ms), the paper's 13B pair (1.4 ms / 50.1 ms), this machine's measured as EDD measures it for PCT (l.817–821: the
mean draft forward over PCT's tree layers over the mean target forward; `speed.stepmodel.ConstructionRatio`), one
token's forward ratio t_draft(1) / t_target(1) (`speed.costmodel.CostModel.ratio`, what a model-free replay has) and
a GPU cost model's one-token ratio (`projection.gpu_cost_models`).
"""
from __future__ import annotations

import math
from typing import Optional

from spectree.core.policy import Policy

VS_HF = "vs HF generate"  # the headline: HF `generate` on the same target, same machine, same run
VS_AR = "vs our AR loop"  # second, labelled: plain decoding through our own loop, on the same kernels as our trees
AR_LABEL = "AR (our loop)"  # the row of plain decoding through our loop in the live tables

PAPER_7B = round(1.1 / 29.8, 3)  # EDD's s_d/s_t, its 7B pair (EDD l.1388: 1.1 ms / 29.8 ms): 0.037
PAPER_13B = round(1.4 / 50.1, 3)  # EDD's s_d/s_t, its 13B pair, Fig. 3b's (EDD l.1388: 1.4 ms / 50.1 ms): 0.028
SD_ST = {"paper-7b": "s_d/s_t (paper, 7B)", "paper-13b": "s_d/s_t (paper, 13B)",
         "measured": "s_d/s_t (this machine, measured as PCT does: the draft's forwards / the target's, averaged)",
         "one-token": "s_d/s_t (one-token forward ratio t_draft(1)/t_target(1))",
         "gpu": "s_d/s_t (GPU cost model: {device}, {shape})"}  # kind → name (`sd_st`)


def speedup_name(baseline: str = VS_HF, projected: bool = False) -> str:
    """'speedup vs HF generate', 'projected speedup vs our AR loop', …: a speedup named with its baseline."""
    if baseline not in (VS_HF, VS_AR):
        raise ValueError(f"unknown speedup baseline {baseline!r}: use {VS_HF!r} or {VS_AR!r}")
    return ("projected " if projected else "") + f"speedup {baseline}"


def to_hf(speedup_vs_ar: float, ar_over_hf: Optional[float]) -> float:
    """A speedup over our AR loop as one over HF `generate`: times `ar_over_hf`, our AR loop's measured tokens/s over
    HF generate's on the same machine (NaN when it is not known)."""
    if ar_over_hf is None or not math.isfinite(ar_over_hf) or ar_over_hf <= 0:
        return math.nan
    return speedup_vs_ar * ar_over_hf


def sd_st(kind: str, value: Optional[float] = None, device: str = "", shape: str = "") -> str:
    """The name of one s_d/s_t (`SD_ST`'s kinds: paper-7b, paper-13b, measured, one-token, gpu — the last with the
    GPU `device` and target `shape` its cost model was measured for), followed by `value` (3 decimals) if given."""
    if kind not in SD_ST:
        raise ValueError(f"unknown s_d/s_t kind {kind!r}: use one of {list(SD_ST)}")
    if kind == "gpu" and not (device and shape):
        raise ValueError("a GPU cost model's s_d/s_t needs its device and target shape")
    name = SD_ST[kind].format(device=device, shape=shape)
    return name if value is None else f"{name} {value:.3f}"


def paper_kind(value: float) -> Optional[str]:
    """'paper-7b' or 'paper-13b' where `value` is that paper ratio (to its 3 decimals), else None."""
    for kind, paper in (("paper-7b", PAPER_7B), ("paper-13b", PAPER_13B)):
        if value is not None and math.isclose(round(float(value), 3), paper):
            return kind
    return None


def spec_label(policy: Policy) -> str:
    """A table row's label read off the policy that runs it, naming only the knobs its spec has: 'SpecInfer-style
    k=4 d=8' (k sequences of d tokens: γ = k·d), 'EAGLE-2 N=33 (γ 32)' (N counts the root: N − 1 drafts verified, at
    most its |T1|), 'DySpec m=32', 'Sequoia n=32', 'VCT w=3 d=5', 'chain-4'; another policy: its spec."""
    name = policy.name
    if name == "sequences":
        return f"SpecInfer-style k={policy.k} d={policy.d}"
    if name == "eagle2":
        return f"EAGLE-2 N={policy.N} (γ {min(policy.N - 1, policy.candidates())})"
    if name == "dyspec":
        return f"DySpec m={policy.m}"
    if name == "sequoia":
        return f"Sequoia n={policy.n}"
    if name == "vct":
        return f"VCT w={policy.w} d={policy.d}"
    if name == "chain" and policy.spec == f"chain:k={policy.k}":
        return f"chain-{policy.k}"
    return policy.spec


__all__ = ["VS_HF", "VS_AR", "AR_LABEL", "PAPER_7B", "PAPER_13B", "SD_ST", "speedup_name", "to_hf", "sd_st",
           "paper_kind", "spec_label"]
