"""HF's own decoding as reference rows: `generate` alone, with prompt lookup and with assisted generation, each on
HF's stock kernels and on the kernels our decoder uses (`core.kernels`), so that what speculation gains is read on
equal kernels. Hooks on the target (and the assistant) count and time the forwards HF actually runs, so an HF row
carries τ (tokens per target forward), γ (candidate tokens verified per forward) and its time split like ours.

HF's first forward takes the prompt and gives the first token (γ 0); every later forward verifies the candidates
after the last committed token (`input_ids` of 1 + candidates). τ = new tokens ÷ forwards: 1 for plain `generate`,
as for our loop, whose prompt forward gives no token and whose steps each give τ tokens.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

import torch
from transformers import PreTrainedModel

from spectree.core.decode import check_prompt, truncate
from spectree.core.sampling import Sampling

HF = "hf-generate"
HF_PACKED = "hf-generate-packed"  # HF generate on the (auto or) prepacked kernels our decoder uses (kernels.py)
HF_LOOKUP = "hf-prompt-lookup"  # HF prompt lookup decoding (prompt_lookup_num_tokens): n-grams of the text, no draft
HF_LOOKUP_PACKED = "hf-prompt-lookup-packed"  # the same on our kernels
HF_ASSISTED = "hf-assisted"  # HF assisted generation with the pair's standalone draft as assistant_model
HF_ASSISTED_PACKED = "hf-assisted-packed"  # the same on our kernels
REFERENCES = {HF: "HF generate", HF_PACKED: "HF generate, our kernels",
              HF_LOOKUP: "HF prompt lookup", HF_LOOKUP_PACKED: "HF prompt lookup, our kernels",
              HF_ASSISTED: "HF assisted generation", HF_ASSISTED_PACKED: "HF assisted generation, our kernels"}
STOCK = (HF, HF_LOOKUP, HF_ASSISTED)  # the rows on HF's stock kernels; every other row runs on our decoder's
ON_OUR_KERNELS = {HF: HF_PACKED, HF_LOOKUP: HF_LOOKUP_PACKED, HF_ASSISTED: HF_ASSISTED_PACKED}  # each one's twin


def standalone(draft) -> bool:
    """Whether a pair's draft is a standalone causal LM (layer-skip, VDM, `hf:`), so that HF assisted generation
    can use it as its assistant_model (EDD and EAGLE drafts read the target's hidden states)."""
    return isinstance(draft, PreTrainedModel)


@torch.inference_mode()
def hf_generate(target, ids: list[int], max_new_tokens: int, sampling: Sampling, eos_id: int,
                seed: int = 0, assistant=None, lookup: int = 0) -> list[int]:
    """The reference: HF `generate` on the target alone (greedy, or sampling with the same T / top-p);
    with `assistant`, HF's own assisted (speculative) generation; with `lookup` > 0, HF's prompt lookup decoding
    (candidates of `lookup` tokens copied from matching n-grams of the prompt and output so far)."""
    kwargs = {"do_sample": False} if sampling.greedy else {
        "do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
    if assistant is not None:
        kwargs["assistant_model"] = assistant
    if lookup > 0:
        kwargs["prompt_lookup_num_tokens"] = lookup
    ids = check_prompt(target.config, ids, max_new_tokens)
    torch.manual_seed(seed)
    out = target.generate(torch.tensor([ids], device=target.device), max_new_tokens=max_new_tokens,
                          eos_token_id=eos_id, pad_token_id=eos_id, **kwargs)
    return truncate(out[0, len(ids):].tolist(), max_new_tokens, (eos_id,))


@dataclass
class Forwards:
    """What the hooks on one model saw during one generation.

    n          forwards run (the prompt's included)
    gamma      Σ over the forwards after the first of their tokens − 1 (the candidates each verified)
    prefill_s  the first forward's seconds (the prompt)
    seconds    the later forwards' seconds
    """

    n: int = 0
    gamma: int = 0
    prefill_s: float = 0.0
    seconds: float = 0.0


def _tokens(args: tuple, kwargs: dict) -> int:
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:  # called with inputs_embeds
        return int(kwargs["inputs_embeds"].shape[1])
    return int(ids.shape[-1])


@contextmanager
def counted(model: Optional[torch.nn.Module]) -> Iterator[Forwards]:
    """Count and time `model`'s forwards in the block (a `Forwards`; None: nothing is counted). On CUDA each
    forward is timed to its end (synchronized)."""
    seen = Forwards()
    if model is None:
        yield seen
        return
    sync = torch.cuda.synchronize if next(model.parameters()).is_cuda else (lambda: None)
    started: list[tuple[float, int]] = []

    def before(module, args, kwargs):
        sync()
        started.append((time.perf_counter(), _tokens(args, kwargs)))

    def after(module, args, kwargs, output):
        sync()
        t0, tokens = started.pop()
        if seen.n == 0:
            seen.prefill_s = time.perf_counter() - t0
        else:
            seen.seconds += time.perf_counter() - t0
            seen.gamma += tokens - 1
        seen.n += 1

    hooks = [model.register_forward_pre_hook(before, with_kwargs=True),
             model.register_forward_hook(after, with_kwargs=True)]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


__all__ = ["HF", "HF_PACKED", "HF_LOOKUP", "HF_LOOKUP_PACKED", "HF_ASSISTED", "HF_ASSISTED_PACKED", "REFERENCES",
           "STOCK", "ON_OUR_KERNELS", "standalone", "hf_generate", "Forwards", "counted"]
