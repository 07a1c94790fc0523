"""A policy replayed on a logbook and priced by a cost model: the projected speed the explorer (`explorer`), the
projections (`projection`: by family, on this CPU and on the GPU checklist's shapes) and the engine-settings search
(`tune`) all read (`price_replay`). Replay (`replay.replay`) gives each step's τ and γ exactly, for greedy decoding;
the cost model (`speed.costmodel`) prices the step.

Estimated time of one step (`CostModel.steps_seconds`): one draft forward per layer — the first over the
τ tokens the previous step committed (it yields the root's distribution), then one over every node the
policy expands (before EAGLE-2's / DySpec's final reranking: the draft saw those nodes) — plus one target
forward over the tree (γ + 1 tokens), and with the cost model's step model (`speed.stepmodel`, fitted on live
steps) tree construction, keeping the path and the rest of the loop. Speedup vs our AR loop (`claims.names.VS_AR`:
plain decoding through the same loop) = Σ τ · (a plain step's time) / Σ step time. A hybrid policy (a policy plus
retrieval branches) is replayed with its branches grafted: its τ and γ count the grafted nodes, which cost target
tokens but no draft forward.
"""
from __future__ import annotations

import math
import time
from typing import Any, Optional, Union

import numpy as np
import pandas as pd

from spectree.core.policy import Growth, Policy
from spectree.replay.forest import Forest
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.replay import as_forest, grow_forest, summarize, visited_steps
from spectree.speed.costmodel import CostModel


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


def price_replay(source: Union[Forest, list[LoggedPrompt]], policy: Policy, cost: CostModel,
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
