"""Where low-precision greedy decoding parts from a reference, measured against a control (issue 48): on one model
and one set of prompts, HF `generate` with SDPA attention against HF `generate` with eager attention (the control:
the same weights and the same algorithm, only the kernels' rounding differs), our AR loop against each, and our trees
against our AR loop. Each pair reads the first position where the two generations differ and the reference's top-2
logit gap there; a teacher-forced pass over the reference's tokens reads the logit noise of each path against HF
SDPA (the largest |Δ logit| at each position), so that the control's noise is a measured floor.

The rule the GPU checklist's bf16 claim reads (`within_control`): a divergence of ours is rounding when the
reference's top-2 gap there is at most twice the control's noise floor (two logits, each within the floor of where
HF's other backend puts it); a divergence past that is a difference in our path.

    python -m spectree.gpu.bf16_control --shape llama-3.2-1b     # on this CPU, into figures/bf16_control/
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Optional

import numpy as np
import torch

from spectree.core.decode import speculative_generate
from spectree.core.drafting import CachedLM
from spectree.core.sampling import Sampling

BACKENDS = ("sdpa", "eager")
TREES = {"chain-4": "chain:k=4", "k-ary 2x2": "kary:b=2,d=2"}  # small trees: every verify runs its tree's tokens
CONTROL = "HF eager vs HF sdpa"


@contextmanager
def attention(model, implementation: str):
    """The model's attention kernels switched to `implementation` (transformers' own switch), restored after."""
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        yield model
    finally:
        model.set_attn_implementation(before)


def first_divergence(a: list[int], b: list[int]) -> Optional[int]:
    """The first index where two generations differ (the shorter's length if one is a prefix of the other), or
    None when they are equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@torch.inference_mode()
def teacher_forced(model, ids: list[int], ref: list[int]) -> torch.Tensor:
    """Logits [len(ref), V] (float32) the model gives each of ref's tokens after ids + ref's earlier ones, one
    forward over the whole sequence (HF's own path, no cache)."""
    seq = torch.tensor([ids + ref[:-1]], device=model.device)
    return model(seq).logits[0, len(ids) - 1:].float().cpu()


@torch.inference_mode()
def cached(model, ids: list[int], ref: list[int], chunk: int) -> torch.Tensor:
    """The same logits through our decoder's path (`CachedLM`: the slab or graph cache, explicit tree masks): the
    prompt prefilled, then ref fed `chunk` tokens a forward with a causal mask (1: the AR loop; k: a chain verify)."""
    lm = CachedLM(model)
    out = [lm.feed_chain(torch.tensor(ids), last_only=True).logits[0, -1:].float().cpu()]
    for i in range(0, len(ref) - 1, chunk):
        piece = torch.tensor(ref[i:min(i + chunk, len(ref) - 1)])
        m = len(piece)
        out.append(lm.feed_nodes(np.arange(-1, m - 1), np.arange(m), piece, lm.committed + torch.arange(m)
                                 ).logits[0].float().cpu())
        lm.keep_path(torch.arange(m))
    return torch.cat(out)[:len(ref)]


def noise(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    """Two paths' logits over the same tokens [n, V]: the largest |Δ logit| per position (median and max), that
    relative to the position's top-1 logit (max), and the share of positions whose argmax differs."""
    delta = (a - b).abs().amax(-1)
    rel = delta / a.amax(-1).abs().clamp_min(1e-6)
    return {"median_abs": float(delta.median()), "max_abs": float(delta.max()), "max_rel": float(rel.max()),
            "argmax_differs": float((a.argmax(-1) != b.argmax(-1)).float().mean())}


def generations(models, ids: list[int], n: int) -> dict[str, list[int]]:
    """Greedy generations of `n` tokens (EOS ignored: every pair compares n tokens) by each path."""
    target, draft, _ = models
    out = {}
    for backend in BACKENDS:
        with attention(target, backend):
            seq = torch.tensor([ids], device=target.device)
            out[f"HF {backend}"] = target.generate(seq, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                                   eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    from spectree.strategies import parse_strategy

    out["our AR"] = speculative_generate(target, None, ids, None, n, Sampling()).tokens
    for name, spec in TREES.items():
        out[name] = speculative_generate(target, draft, ids, parse_strategy(spec), n, Sampling()).tokens
    return out


PAIRS = [(CONTROL, "HF eager", "HF sdpa"), ("our AR vs HF sdpa", "our AR", "HF sdpa"),
         ("our AR vs HF eager", "our AR", "HF eager")] + [(f"{t} vs our AR", t, "our AR") for t in TREES]


def characterise(models, prompts: list[list[int]], n: int, log=print) -> dict[str, Any]:
    """Every pair's first divergence and top-2 gap per prompt, and each path's teacher-forced logit noise against
    HF SDPA (on HF SDPA's own tokens), for one model in its dtype."""
    target = models[0]
    rows, noise_rows = [], []
    for p, ids in enumerate(prompts):
        t0 = time.perf_counter()
        gens = generations(models, ids, n)
        ref = gens["HF sdpa"]
        with attention(target, "sdpa"):
            sdpa = teacher_forced(target, ids, ref)
        with attention(target, "eager"):
            eager = teacher_forced(target, ids, ref)
        paths = {"HF eager": eager, "our AR": cached(target, ids, ref, 1), "chain verify (4)": cached(target, ids, ref, 4)}
        noise_rows += [{"prompt": p, "path": k, **noise(sdpa, v)} for k, v in paths.items()]
        for pair, a, b in PAIRS:
            pos = first_divergence(gens[a], gens[b])
            gap = top1 = None
            if pos is not None and pos < n:  # the reference b's logits there (HF SDPA's forward over b's tokens)
                logits = sdpa if b == "HF sdpa" else teacher_forced(target, ids, gens[b])
                top = logits[pos].topk(2).values
                top1, gap = float(top[0]), float(top[0] - top[1])
            rows.append({"prompt": p, "pair": pair, "first_divergence": pos, "top2_gap": gap, "top1": top1})
        log(f"prompt {p}: " + ", ".join(f"{r['pair']}: {r['first_divergence']}" for r in rows[-len(PAIRS):])
            + f" ({time.perf_counter() - t0:.0f} s)")
    return {"rows": rows, "noise": noise_rows, "floor": control_floor(noise_rows)}


def control_floor(noise_rows: list[dict]) -> float:
    """The control's noise floor: the largest |Δ logit| between HF's eager and SDPA backends, over every position."""
    return max((r["max_abs"] for r in noise_rows if r["path"] == "HF eager"), default=float("nan"))


def within_control(top2_gap: Optional[float], floor: float) -> bool:
    """A divergence is rounding when the reference's top-2 gap is at most twice the control's noise floor (both
    logits moved by at most the floor); a length-only difference (no gap) is not."""
    return top2_gap is not None and top2_gap <= 2 * floor


def table(result: dict[str, Any]):
    """Per pair: prompts diverged / checked, the first-divergence positions, the top-2 gaps there, and how many
    divergences fall within the control's floor."""
    import pandas as pd

    df = pd.DataFrame(result["rows"])
    out = []
    for pair, g in df.groupby("pair", sort=False):
        hit = g[g.first_divergence.notna()]
        out.append({"pair": pair, "diverged": f"{len(hit)}/{len(g)}",
                    "first divergence": ", ".join(str(int(x)) for x in hit.first_divergence) or "-",
                    "top-2 gap": ", ".join(f"{x:.3g}" for x in hit.top2_gap.dropna()) or "-",
                    "within 2x floor": int(sum(within_control(x, result["floor"]) for x in hit.top2_gap))})
    return pd.DataFrame(out)


def noise_table(result: dict[str, Any]):
    import pandas as pd

    return pd.DataFrame(result["noise"]).groupby("path", sort=False)[
        ["median_abs", "max_abs", "max_rel", "argmax_differs"]].agg(
        {"median_abs": "median", "max_abs": "max", "max_rel": "max", "argmax_differs": "mean"}).reset_index()


def run(shape: str, dtype: str, device: str, n_prompts: int, prompt_tokens: int, n: int,
        prompts_file: str = "data/prompts/gpu_check.jsonl", log=print) -> dict[str, Any]:
    """The characterisation of one random pair (`models.random_pairs`) in one dtype: tracked prompts, chat template
    applied, cut to `prompt_tokens`."""
    from spectree.core.paths import home
    from spectree.models.random_pairs import random_pair
    from spectree.prompts import chat_ids, parse_prompt_spec

    t0 = time.perf_counter()
    models = random_pair(shape, device, getattr(torch, dtype))
    prompts = [chat_ids(models[2], p.text)[:prompt_tokens]
               for p in parse_prompt_spec(f"jsonl:{home() / prompts_file}:{n_prompts}")]
    result = characterise(models, prompts, n, log)
    result.update(shape=shape, dtype=dtype, device=device, prompts=n_prompts, prompt_tokens=prompt_tokens,
                  max_new_tokens=n, seconds=round(time.perf_counter() - t0, 1))
    return result


__all__ = ["BACKENDS", "CONTROL", "PAIRS", "TREES", "attention", "cached", "characterise", "control_floor",
           "first_divergence", "noise", "noise_table", "run", "table", "teacher_forced", "within_control"]
