"""The pure logic behind the interactive explorer (`reports.widgets`): score a policy on a logbook with replay
plus a cost-model time estimate, policies built from the widget's settings, and the fixed frontier of other
policies to compare against.

Estimated time of one step (`CostModel.steps_seconds`): one draft forward per layer — the first over the
τ tokens the previous step committed (it yields the root's distribution), then one over every node the
policy expands (before EAGLE-2's / DySpec's final reranking: the draft saw those nodes) — plus one target
forward over the tree (γ + 1 tokens), and with the cost model's step model (`speed.stepmodel`, fitted on live
steps) tree construction, keeping the path and the rest of the loop. Speedup vs our AR loop (`names.VS_AR`:
plain decoding through the same loop) = Σ τ · (a plain step's time) / Σ step time; `analysis.names.to_hf` with our AR
loop's measured ratio to HF generate states it vs HF generate, the live tables' baseline (`widgets.Explorer`).
A hybrid policy (`with_retrieval`: the policy plus prompt-lookup / suffix branches) is replayed with its
branches grafted: its τ and γ count the grafted nodes, which cost target tokens but no draft forward.

C2T keeps nodes by its classifier's confidence, off the joint-probability beams a shared logbook expands, so (as
notebook 02 scores it) its settings replay on C2T's own logbook of the same prompts (`c2t_logbook_of`: its tree at
an envelope β expanded), where every β at or above that envelope, any topk, K and depth up to the logbook's replay.
"""
from __future__ import annotations

import math
import time
from typing import Any, Optional, Union

import numpy as np
import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.core.policy import Growth, Policy
from spectree.replay.forest import Forest
from spectree.replay.logbook import LogConfig, LoggedPrompt, c2t_logbook
from spectree.replay.replay import as_forest, grow_forest, summarize, visited_steps
from spectree.reports.branching import parse_expression, parse_table
from spectree.retrieval import Lookup, Suffix
from spectree.speed.costmodel import CostModel
from spectree.strategies import (REGISTRY, C2T, PCT, Chain, DySpec, DySpecThreshold, Eagle2, EntropyBranching, Hybrid)
from spectree.strategies.c2t import C2TClassifier
from spectree.strategies.engines import choices_of

FAMILIES = {"C2T": "c2t", "EAGLE-2": "eagle2", "DySpec budget": "dyspec", "DySpec threshold": "dyspec_threshold",
            "PCT": "pct", "B(H)": "entropy", "SGLang": "sglang", "TensorRT-LLM": "trtllm",
            "vLLM": "choices"}  # explorer family → strategy name
ENGINE_OF = {"SGLang": "sglang", "TensorRT-LLM": "trtllm", "vLLM": "vllm"}  # the serving engines' families
RETRIEVAL = {"none": (), "lookup": (Lookup,), "suffix": (Suffix,), "lookup+suffix": (Lookup, Suffix)}  # → proposers


# --- scoring ----------------------------------------------------------------------------------------------

def step_times(forest: Forest, growth: Growth, steps: pd.DataFrame, cost: CostModel, K: int,
               prefix: np.ndarray) -> np.ndarray:
    """Estimated seconds of every replayed step (`steps` from `visited_steps`) under the cost model
    (`CostModel.steps_seconds`): the draft's catch-up over the τ tokens committed and its forward over each layer
    of fed nodes, the target's forward over the tree after the step's prefix, and — with a step model — tree
    construction over the K children each expanded node offers, keeping the path and the rest of the loop.
    `prefix` [steps]: the committed tokens before each step (`prefixes`)."""
    fed = growth.fed
    d_max = int(forest.cols["depth"].max(initial=0)) + 1
    width = np.zeros((forest.n_trees, d_max), dtype=np.int64)  # [trees, depth] nodes fed to the draft
    np.add.at(width, (forest.tree[fed], forest.cols["depth"][fed]), 1)
    trees = steps.tree.to_numpy()
    tau = steps.tau.to_numpy()
    widths = np.column_stack([tau, width[trees, 1:]])  # [steps, forwards]: the catch-up, then each layer
    offered = (1 + width[trees].sum(1)) * K  # the root and every fed node offer K children
    return cost.steps_seconds(widths, tau, steps.gamma.to_numpy(), offered, prefix)


def prefixes(forest: Forest, steps: pd.DataFrame) -> np.ndarray:
    """The committed tokens before each replayed step: its prompt's length plus its position."""
    prompt_len = np.array([lp.prompt_len for lp in forest.logbook])
    return prompt_len[forest.tree_prompt[steps.tree.to_numpy()]] + steps.position.to_numpy()


def score(source: Union[Forest, list[LoggedPrompt]], policy: Policy, cost: CostModel,
          growth: Optional[Growth] = None) -> dict[str, Any]:
    """τ, γ, τ/γ (from replay) and the estimated speedup vs our AR loop, plain decoding through it (Σ τ · a plain
    step's time at that prefix / Σ step time) of one policy; also the step count, estimated ms per step and per
    token, and the replay time. Raises SpectreeError where the logbook cannot replay the policy. `growth`: the
    policy's `grow_forest` on this forest, when already computed."""
    t0 = time.perf_counter()
    forest = as_forest(source)
    growth = growth if growth is not None else grow_forest(forest, policy)
    steps = visited_steps(forest, growth, policy.retrieval)
    out = summarize(steps)
    prefix = prefixes(forest, steps)
    seconds = step_times(forest, growth, steps, cost, policy.K, prefix)
    plain = float((steps.tau.to_numpy() * cost.plain_seconds(prefix)).sum())
    out.update(tau_per_gamma=out["tau"] / out["gamma"] if out["gamma"] else math.nan,
               speedup=plain / float(seconds.sum()), plain_s=plain,
               step_ms=float(1000 * seconds.mean()), ms_per_token=float(1000 * seconds.sum() / steps.tau.sum()),
               replay_ms=1000 * (time.perf_counter() - t0))
    return out


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
            numbers = score(forest if mine is None else mine, policy, cost)
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
    from spectree.drafts.pairs import TARGETS, check_pair_name, target_tokenizer

    target = check_pair_name(pair).target
    if target not in TARGETS:  # a model folder or a cached hub id: its own tokenizer
        return target_tokenizer(target)[0]
    folder = cache_dir() / "models" / target
    return AutoTokenizer.from_pretrained(str(folder)) if (folder / "tokenizer.json").exists() else None
