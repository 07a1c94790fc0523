"""The pure logic behind the interactive explorer (`explorer.widgets`): policies built from the widget's settings,
each scored on a logbook by replay and priced by a cost model (`pricing.price_replay`: τ, γ and the estimated speedup
vs our AR loop; `claims.names.to_hf` with our AR loop's measured ratio to HF generate states it vs HF generate, the
live tables' baseline, in `widgets.Explorer`), and the fixed frontier of other policies to compare against. A hybrid
policy (`with_retrieval`: the policy plus prompt-lookup / suffix branches) is replayed with its branches grafted: its
τ and γ count the grafted nodes, which cost target tokens but no draft forward.

C2T keeps nodes by its classifier's confidence, off the joint-probability beams a shared logbook expands, so (as
notebook 02 scores it) its settings replay on C2T's own logbook of the same prompts (`c2t_logbook_of`: its tree at
an envelope β expanded), where every β at or above that envelope, any topk, K and depth up to the logbook's replay.
"""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.explorer.branching import parse_expression, parse_table
from spectree.pricing import price_replay
from spectree.replay.forest import Forest
from spectree.replay.logbook import LogConfig, LoggedPrompt, c2t_logbook
from spectree.retrieval.proposers import Lookup, Suffix
from spectree.speed.costmodel import CostModel
from spectree.strategies import REGISTRY
from spectree.strategies.c2t import C2T, C2TClassifier
from spectree.strategies.chain import Chain
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.engines import choices_of
from spectree.strategies.gunjur import EntropyBranching
from spectree.strategies.hybrid import Hybrid
from spectree.strategies.pct import PCT

FAMILIES = {"C2T": "c2t", "EAGLE-2": "eagle2", "DySpec budget": "dyspec", "DySpec threshold": "dyspec_threshold",
            "PCT": "pct", "B(H)": "entropy", "SGLang": "sglang", "TensorRT-LLM": "trtllm",
            "vLLM": "choices"}  # explorer family → strategy name
ENGINE_OF = {"SGLang": "sglang", "TensorRT-LLM": "trtllm", "vLLM": "vllm"}  # the serving engines' families
RETRIEVAL = {"none": (), "lookup": (Lookup,), "suffix": (Suffix,), "lookup+suffix": (Lookup, Suffix)}  # → proposers


# --- policies from settings -------------------------------------------------------------------------------

def policy_for(family: str, settings: dict[str, Any], classifier: Optional[C2TClassifier] = None,
               classifier_name: str = "explorer") -> Policy:
    """The policy of one explorer family from its settings (`widgets.Explorer`'s fields, named as the policy's
    spec parameters; B(H) adds mode / expression / table)."""
    if family not in FAMILIES:
        raise SpectreeError(f"unknown family '{family}': use one of {list(FAMILIES)}")
    params = {k: v for k, v in settings.items() if k not in ("mode", "expression", "table")}
    if family == "C2T":
        if classifier is None:
            raise SpectreeError("C2T needs a classifier: pass one to the explorer")
        return C2T(**params, classifier=classifier_name, model=classifier)
    if family == "B(H)":
        text = settings[settings["mode"]]
        branching = parse_expression(text) if settings["mode"] == "expression" else parse_table(text)
        return EntropyBranching(**params, branching=branching)
    if family == "vLLM":  # num_speculative_tokens: a chain (vLLM verifies no tree)
        return choices_of((1,) * int(settings["tokens"]))
    return REGISTRY[FAMILIES[family]](**params)


def engine_text(family: str, policy: Policy) -> str:
    """The engine's config text for a serving engine's family (`policy.engine_config`), '' for a paper's family."""
    return policy.engine_config(ENGINE_OF[family]) if family in ENGINE_OF else ""


def with_retrieval(policy: Policy, retrieval: str = "none", length: Optional[int] = None) -> Policy:
    """`policy` with the retrieval branches of the explorer's choice (a key of RETRIEVAL) grafted into its trees:
    `Hybrid(policy, proposers)`, each proposer with its default settings and `length` tokens per branch
    (default: the proposer's own); 'none' returns the policy itself."""
    if retrieval not in RETRIEVAL:
        raise SpectreeError(f"unknown retrieval '{retrieval}': use one of {list(RETRIEVAL)}")
    if retrieval == "none":
        return policy
    return Hybrid(policy, tuple(kind() if length is None else kind(len=int(length)) for kind in RETRIEVAL[retrieval]))


# --- the frontier -----------------------------------------------------------------------------------------

def frontier_policies(K: int, d_max: int, depth: int, ratio: float, classifier: Optional[C2TClassifier] = None,
                      classifier_name: str = "explorer") -> list[tuple[str, Policy]]:
    """(family, policy): a fixed comparison set sized to a logbook with K children and depth d_max (`depth`: the
    EAGLE-2 / C2T depth)."""
    k8, k5, k7 = min(8, K), min(5, K), min(7, K)
    out: list[tuple[str, Policy]] = [("chain", Chain(k=k)) for k in range(1, d_max + 1)]
    out += [("EAGLE-2", Eagle2(K=min(10, K), d_max=depth, N=n)) for n in (5, 10, 20, 30, 40, 60)]
    out += [("DySpec budget", DySpec(m=m, K=k8, d_max=d_max)) for m in (4, 8, 16, 32, 64)]
    out += [("DySpec threshold", DySpecThreshold(t=t, K=k8, d_max=d_max)) for t in (0.3, 0.1, 0.05, 0.02, 0.01)]
    out += [("PCT", PCT(ratio=r, k=k5, d_max=d_max)) for r in sorted({0.3, 0.2, 0.1, 0.05, 0.02, round(ratio, 3)},
                                                                       reverse=True)]
    out += [("B(H)", EntropyBranching(d=d, k_max=k7)) for d in sorted({min(3, d_max), min(4, d_max)})]
    if classifier is not None:
        out += [("C2T", C2T(beta=b, K=min(10, K), d_max=depth, topk=0, classifier=classifier_name,
                               model=classifier))
                for b in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    return out


def frontier(forest: Forest, cost: CostModel, policies: list[tuple[str, Policy]],
             own: Optional[dict[str, Forest]] = None) -> pd.DataFrame:
    """τ, γ, τ/γ and estimated speedup vs our AR loop of every replayable policy of the list (others are left out);
    `own`: a family's own forest of the same trees, where its policies score instead (C2T's: `c2t_logbook_of`)."""
    rows = []
    for family, policy in policies:
        label = policy.spec
        mine = (own or {}).get(family)
        try:
            numbers = price_replay(forest if mine is None else mine, policy, cost)
        except SpectreeError:
            continue
        rows.append({"family": family, "label": label, **{k: numbers[k] for k in ("tau", "gamma", "tau_per_gamma",
                                                                                     "speedup")}})
    return pd.DataFrame(rows, columns=["family", "label", "tau", "gamma", "tau_per_gamma", "speedup"])


def c2t_depth(cfg: LogConfig, depth: Optional[int] = None) -> int:
    """The depth of the explorer's C2T trees on a logbook of `cfg` (`widgets.Explorer`'s `depth`, default 6, at most
    the logbook's d_max): the depth of C2T's own logbook."""
    return min(depth or 6, cfg.d_max)


def c2t_logbook_of(logbook: list[LoggedPrompt], cfg: LogConfig, classifier: str, beta: float,
                   depth: Optional[int] = None, models=None) -> list[LoggedPrompt]:
    """C2T's own logbook of the explorer's logbook (logged with `cfg`), as notebook 02 scores C2T: the same prompts
    and greedy paths with only C2T's tree at `beta` expanded, at cfg's K and the explorer's C2T depth
    (`replay.logbook.c2t_logbook`; cached, logged again when the classifier or anything else changes, which loads
    the pair unless `models` is given). C2T at every β ≥ `beta`, any topk, K ≤ cfg.K and depth ≤ that depth replays
    on it (pass it to `widgets.Explorer` as `c2t_logbook`, with `c2t_beta=beta`)."""
    from dataclasses import replace

    return c2t_logbook(logbook, replace(cfg, d_max=c2t_depth(cfg, depth)), classifier, beta, models)


def cached_tokenizer(pair: str):
    """The pair's tokenizer from the dequantised-model cache (token text in tree drawings), or None
    when the target has not been cached yet (the drawings then show token ids)."""
    from transformers import AutoTokenizer

    from spectree.core.paths import cache_dir
    from spectree.models.pairs import TARGETS, check_pair_name, target_tokenizer

    target = check_pair_name(pair).target
    if target not in TARGETS:  # a model folder or a cached hub id: its own tokenizer
        return target_tokenizer(target)[0]
    folder = cache_dir() / "models" / target
    return AutoTokenizer.from_pretrained(str(folder)) if (folder / "tokenizer.json").exists() else None
