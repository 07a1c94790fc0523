"""The one generation loop: prefill → draft tree → one target forward over the tree (ancestor mask,
true positions, KV cache of the prefix) → verify → keep only the accepted path's KV → record stats.
"""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Optional

import torch
from transformers import PretrainedConfig, PreTrainedModel

from spectree.core.drafting import CachedLM, ModelDrafter
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree
from spectree.core.verify import verify


@dataclass
class StepStats:
    tau: int  # tokens committed by this target forward (accepted + 1)
    gamma: int  # draft tokens verified by this forward
    draft_s: float  # drafting: draft model forwards + tree construction (+ advancing the draft's cache)
    verify_s: float
    tree_s: float = 0.0  # tree construction alone: candidate features and the policy's decisions
    accepted: list[int] = field(default_factory=list)  # accepted node indices of the tree (root excluded)
    tree: Optional[DraftTree] = None  # kept when asked (replay checks, figures)
    # the step model's terms (`speed.stepmodel`), each timed where it happens
    draft_forwards: list[tuple[int, float]] = field(default_factory=list)  # (tokens, s) per draft forward, catch-up last
    verify_forward_s: float = 0.0  # the target's forward over the tree
    keep_s: float = 0.0  # keeping the accepted path's KV (the target's cache)
    offered: int = 0  # children the draft offered while growing the tree
    prefix: int = 0  # committed tokens before the step (root included)
    step_s: float = 0.0  # the whole step, catch-up included: the rest of the loop is what the terms leave
    depth: int = 0  # the tree's depth (its deepest node; 0 for the root alone): draft passes of this step


@dataclass
class Generation:
    tokens: list[int]  # new tokens only (prompt excluded), cut at max_new_tokens / after EOS
    steps: list[StepStats] = field(default_factory=list)
    wall_s: float = 0.0
    prefill_s: float = 0.0  # the prompt through the target (and the draft's start), before the first step

    @property
    def n_forwards(self) -> int:
        return len(self.steps)

    @property
    def mean_tau(self) -> float:
        return sum(s.tau for s in self.steps) / max(len(self.steps), 1)

    @property
    def mean_gamma(self) -> float:
        return sum(s.gamma for s in self.steps) / max(len(self.steps), 1)


@dataclass
class Prefill:
    """One prompt through the target (its KV cache, and the forward's hidden states for drafters that read them),
    shared by every generation of that prompt (`speed.bench.run_strategies(..., share_prefill=True)`, the lossless
    checks): each starts from it, the cache rewound to the prompt (`CachedLM.rewind`), instead of running the prompt
    again. For runs that are not timed: the shared prefill's time is in no generation."""

    ids: list[int]
    lm: CachedLM
    out: Optional[object]  # the prompt forward's output (None for a one-token prompt)

    @staticmethod
    @torch.inference_mode()
    def of(target: PreTrainedModel, ids: list[int]) -> "Prefill":
        lm = CachedLM(target)
        out = lm.feed_chain(torch.tensor(ids[:-1]), True, last_only=True) if len(ids) > 1 else None
        return Prefill(list(ids), lm, out)


def check_prompt(config: PretrainedConfig, prompt_ids, max_new_tokens: int, depth: int = 0,
                 new_tokens: str = "max_new_tokens") -> list[int]:
    """The prompt as a list of token ids, or one line saying what is wrong: an empty prompt, an id outside the
    target's vocabulary, max_new_tokens < 1, or more positions than the target's context window — the prompt
    plus max_new_tokens plus the deepest draft-tree node (`depth`) must fit in `max_position_embeddings`.
    Every path by which prompts reach a model checks here first (decoding, logging, HF generate, the CLI);
    messages call max_new_tokens `new_tokens` (the CLI: the flag its user typed)."""
    try:
        max_new_tokens, ids = operator.index(max_new_tokens), [operator.index(t) for t in prompt_ids]
    except TypeError:
        raise SpectreeError(f"max_new_tokens and the prompt's token ids must be whole numbers, got "
                            f"{max_new_tokens!r} and {type(prompt_ids).__name__}") from None
    if max_new_tokens < 1:
        raise SpectreeError(f"{new_tokens} must be >= 1, got {max_new_tokens}")
    if not ids:
        raise SpectreeError("the prompt is empty: give at least one token id")
    vocab = getattr(config, "vocab_size", None)
    bad = next((t for t in ids if t < 0 or (vocab is not None and t >= vocab)), None)
    if bad is not None:
        raise SpectreeError(f"prompt token id {bad} is outside the target's vocabulary [0, {vocab})")
    window = getattr(config, "max_position_embeddings", None)
    need = len(ids) + max_new_tokens + depth
    if window is not None and need > window:
        tree = f" + tree depth {depth}" if depth else ""
        raise SpectreeError(f"a prompt of {len(ids):,} tokens + {new_tokens} {max_new_tokens:,}{tree} = {need:,} "
                            f"positions exceeds the target's context window of {window:,} (max_position_embeddings): "
                            f"shorten the prompt or lower {new_tokens}{' or the tree depth' if depth else ''}")
    return ids


@torch.inference_mode()
def speculative_generate(target: PreTrainedModel, draft, prompt_ids: list[int],
                         policy: Optional[Policy], max_new_tokens: int, sampling: Sampling = Sampling(),
                         eos_ids: tuple[int, ...] = (), generator: Optional[torch.Generator] = None,
                         keep_trees: bool = False, prefill: Optional[Prefill] = None) -> Generation:
    """Generate up to `max_new_tokens` after `prompt_ids` with draft trees grown by `policy`.

    `draft` is a draft model (layer-skip, VDM) or a drafter (e.g. `EDDDrafter`); no policy (None) or one with
    d_max = 0 needs none: that is plain autoregressive decoding through the same loop. A `Hybrid` policy's
    retrieval branches are grafted into every tree from the committed text's suffix index (`spectree.retrieval`).
    `prefill`: the prompt already through the target (`Prefill.of(target, prompt_ids)`), reused instead of run.
    """
    seq = check_prompt(target.config, prompt_ids, max_new_tokens, policy.max_depth if policy is not None else 0)
    start = time.perf_counter()
    grafter = policy.grafter(seq, eos_ids) if policy is not None else None  # retrieval branches (a hybrid's)
    policy = policy.drafting if policy is not None else None  # what grows the draft's nodes
    drf = as_drafter(draft) if policy is not None and policy.d_max > 0 else None
    hidden_layer = drf.hidden_layer if drf is not None and drf.needs_hidden else None
    if prefill is not None and prefill.ids == seq and prefill.lm.model is target:
        tgt, out = prefill.lm, prefill.out
        tgt.rewind(len(seq) - 1)
    else:
        tgt = CachedLM(target)
        # cache every prompt token but the root (nothing to cache for a one-token prompt)
        out = tgt.feed_chain(torch.tensor(seq[:-1]), hidden_layer is not None, last_only=True) if len(seq) > 1 else None
    root_logits = drf.start(seq, _hidden(out, hidden_layer, None)) if drf else None
    gen = Generation(tokens=[], prefill_s=time.perf_counter() - start)
    tail = 1  # tokens committed by the last step (where a new EOS can be)
    while len(gen.tokens) < max_new_tokens and not any(t in eos_ids for t in gen.tokens[-tail:]):
        t0 = time.perf_counter()
        n_forwards = len(drf.lm.forwards) if drf else 0
        if drf:
            tree = drf.draft(seq[-1], root_logits, len(seq), policy, sampling, generator)
        else:
            tree = DraftTree.root(seq[-1], len(seq))
        if grafter is not None:
            tree = grafter.graft(tree, max_new_tokens - len(gen.tokens) - 1)  # the bonus token is the target's
        t1 = time.perf_counter()
        out = tgt.feed_tree(tree, torch.arange(len(tree)), hidden_layer is not None)
        verify_forward_s = tgt.forwards[-1][1]
        verdict = verify(tree, out.logits[0], sampling, generator)  # logits [n, V]
        path = torch.tensor([0] + verdict.accepted)
        k0 = time.perf_counter()
        tgt.keep_path(path)
        keep_s = time.perf_counter() - k0
        new = verdict.new_tokens(tree)
        t2 = time.perf_counter()
        step = StepStats(verdict.tau, verdict.gamma, t1 - t0, t2 - t1, 0.0, verdict.accepted,
                         tree if keep_trees else None, verify_forward_s=verify_forward_s, keep_s=keep_s,
                         offered=tree.offered, prefix=len(seq), depth=int(tree.depth.max()))
        step.tree_s = (t1 - t0) - (sum(s for _, s in drf.lm.forwards[n_forwards:]) if drf else 0.0)
        seq += new
        gen.tokens += new
        if grafter is not None:
            grafter.extend(new)
        tail = len(new)
        if drf and len(gen.tokens) < max_new_tokens:
            root_logits = drf.advance(new, _hidden(out, hidden_layer, path))
            step.draft_s += time.perf_counter() - t2
        step.draft_forwards = list(drf.lm.forwards[n_forwards:]) if drf else []
        step.step_s = time.perf_counter() - t0
        gen.steps.append(step)
    gen.tokens = truncate(gen.tokens, max_new_tokens, eos_ids)
    gen.wall_s = time.perf_counter() - start
    return gen


def greedy_continuation(target: PreTrainedModel, ids: list[int], max_new_tokens: int, extra: int,
                        eos_ids: tuple[int, ...]) -> tuple[list[int], int]:
    """The target's greedy continuation run `extra` tokens past the end (ignoring EOS, so every draft node
    up to that depth has a label), and the length of the generation proper (cut at max / after EOS)."""
    ids = check_prompt(target.config, ids, max_new_tokens, extra)
    cont = speculative_generate(target, None, ids, None, max_new_tokens + extra).tokens
    return cont, len(truncate(cont, max_new_tokens, eos_ids))


@torch.inference_mode()
def walk_continuation(target: PreTrainedModel, draft, ids: list[int], cont: list[int], n_valid: int):
    """Move a drafter along a known continuation, one committed token per step (as logging needs).

    Yields (prefix_len, root_logits [V], drafter, target_logits [T, V]) for every position of `cont` up to
    n_valid, where the committed prefix is ids + cont[:position]; target_logits are teacher-forced over
    ids + cont (row j predicts token j + 1).
    """
    drafter = as_drafter(draft)
    layer = drafter.hidden_layer if drafter.needs_hidden else None
    full = check_prompt(target.config, ids, max(len(cont), 1)) + list(cont)
    out = target(torch.tensor([full], device=target.device), output_hidden_states=layer is not None)
    hidden = out.hidden_states[layer][0] if layer is not None else None  # [T, H]
    logits = out.logits[0].float().cpu()
    root_logits = drafter.start(ids, None if hidden is None else hidden[: len(ids) - 1])
    for prefix in range(len(ids), len(ids) + n_valid):
        yield prefix, root_logits, drafter, logits
        root_logits = drafter.advance(full[prefix: prefix + 1], None if hidden is None else hidden[prefix - 1: prefix])


def as_drafter(draft):
    """A drafter object from a draft model (wrapped in `ModelDrafter`) or a drafter (returned as is)."""
    if draft is None:
        raise SpectreeError("this policy drafts tokens: pass a draft model")
    return ModelDrafter(draft) if isinstance(draft, PreTrainedModel) else draft


def _hidden(out, layer: Optional[int], rows: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The target's hidden states [k, H] of `layer` at `rows` of the last forward `out` (all rows if None); None
    without a layer or a forward."""
    if layer is None or out is None:
        return None
    h = out.hidden_states[layer][0]
    return h if rows is None else h[rows.to(h.device)]


def truncate(tokens: list[int], max_new_tokens: int, eos_ids: tuple[int, ...]) -> list[int]:
    """Cut at max_new_tokens and just after the first EOS, as HF `generate` does."""
    tokens = tokens[:max_new_tokens]
    for i, t in enumerate(tokens):
        if t in eos_ids:
            return tokens[: i + 1]
    return tokens
