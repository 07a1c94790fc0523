"""Speed and losslessness, measured side by side in one run against HF `generate` on the same target.

Tokens are counted the same way for every method: new tokens after the prompt, cut at max_new_tokens
and just after EOS. Prompts are interleaved (HF, then every strategy, per prompt; with `repeats`, that pass
`repeats` times in a row per prompt) so drift in machine load hits all methods alike. The reference
`hf-generate` always runs on the stock kernels; when the pair was loaded with prepacked weights
(`load_pair(..., kernels="auto")` or "packed"), `hf-generate-packed` (HF `generate` on the same kernels as our
decoder) separates what the kernels gain from what speculation gains; HF prompt lookup and assisted generation
have the same twin (`speed.references`), and every HF row's forwards are counted, so its τ and γ are read as ours.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Union

import pandas as pd
import torch
from tqdm.auto import tqdm

from spectree.core.decode import Prefill, speculative_generate
from spectree.core.drafting import draft_model, offer_sampling
from spectree.core.errors import SpectreeError, TreeTooLarge
from spectree.core.kernels import is_packed, stock_kernels
from spectree.core.policy import Policy
from spectree.core.sampling import Sampling
from spectree.prompts import Prompt, chat_ids, check_prompts
from spectree.speed.load import OtherLoad, busy_warning
from spectree.speed.references import (HF, HF_ASSISTED, HF_LOOKUP, HF_PACKED, ON_OUR_KERNELS, REFERENCES, STOCK,
                                       counted, hf_generate, standalone)
from spectree.speed.stepmodel import live_terms, plain_seconds, predict_live

@dataclass
class Run:
    strategy: str
    prompt: str
    category: str
    tokens: list[int]
    seconds: float
    forwards: int
    tau_sum: int
    gamma_sum: int
    draft_s: float
    verify_s: float
    tree_s: float = 0.0
    sampled: bool = False  # decoded at temperature > 0: outputs match HF's only by chance (no `exact` column)
    synthetic: bool = False  # drafted by a synthetic draft (`drafts.mix`): its wall time is no draft's, τ/γ only
    other_cores: float = math.nan  # cores other processes used meanwhile (`speed.load`; NaN: unknown)
    repeat: int = 0  # which of the `repeats` timed passes over this prompt (`run_strategies`)
    projected_s: float = math.nan  # the step model's seconds for this run's own steps, its measured prefill added
    plain_s: float = math.nan  # the step model's seconds for plain decoding of the same tokens, the prefill added
    prefill_s: float = math.nan  # the prompt through the target and the draft's start (our loop's runs)
    depth_sum: float = math.nan  # Σ over steps of the tree's depth (our loop's runs; NaN: not recorded)
    priced_s: float = math.nan  # the run's own steps priced on another machine's cost model (`priced_on`), no prefill
    priced_draft_s: float = math.nan  # its draft, verify and tree terms (`stepmodel.live_terms`; keep and rest: the
    priced_verify_s: float = math.nan  # remainder of priced_s)
    priced_tree_s: float = math.nan
    keep_s: float = math.nan  # keeping the accepted path's KV, part of verify_s (our loop's runs)


Policies = Union[Sequence[Policy], Mapping[str, Policy]]  # policies, or {label: policy}


def labelled(policies: Policies) -> dict[str, Policy]:
    """{label: policy}: the given labels, or each policy's spec."""
    items = list(policies.items()) if isinstance(policies, Mapping) else [(None, p) for p in policies]
    for label, policy in items:
        if not callable(getattr(policy, "select", None)):
            raise SpectreeError(f"{label or policy!r}: expected a Policy (parse a spec with strategies.parse_strategy), "
                                f"got {type(policy).__name__}")
    return {label or policy.spec: policy for label, policy in items}


def run_strategies(models, prompts: list[Prompt], policies: Policies, max_new_tokens: int,
                   sampling: Sampling = Sampling(), seed: int = 0, warmup: bool = True,
                   hf_assisted: bool = False, skipped: Optional[dict[str, str]] = None,
                   hf_packed: Optional[bool] = None, hf_lookup: int = 0, repeats: int = 1,
                   drafts: Optional[Mapping[str, object]] = None, cost=None,
                   share_prefill: bool = False, priced_on=None, assistant=None) -> list[Run]:
    """Decode every prompt with HF `generate` (and, if asked, HF assisted generation with the pair's
    standalone draft, and HF prompt lookup decoding with `hf_lookup` candidate tokens: reference rows) and each
    policy; one `Run` per (prompt, method, repeat), named by the policy's label. Each prompt is decoded by every
    method once per pass, `repeats` passes in a row (`Run.repeat`), so load drift hits all methods alike; under
    greedy decoding the passes must give the same tokens (a warning says where they do not). With packed
    models, `hf_packed` (default: yes) also times each HF row on the same kernels (`references.ON_OUR_KERNELS`). A policy whose trees
    outgrow `Policy.max_nodes` is dropped from every prompt, with the reason in `skipped` (before decoding when
    its setting alone does, `Policy.oversized`). Every prompt is checked against the target first (`check_prompt`:
    its tokens, max_new_tokens and the deepest tree must fit the context window). `drafts` gives some labels
    another drafter of the same target (e.g. the full-head draft beside a reduced head), timed in the same run.
    With `cost` (a `CostModel` with its step model, `costmodel.pair_cost_model`), each policy's run also carries
    `projected_s`: the step model's seconds for the run's own steps (`stepmodel.predict_live`) plus its prefill,
    and `plain_s`, its seconds for plain decoding of the same tokens at the same prefixes (`summarize_runs`).
    `share_prefill`: every policy starts from one prefill of each prompt (`core.decode.Prefill`): for checks that
    read tokens, τ and γ, not time (its runs' seconds leave the prompt out, and a busy machine is not warned of).
    `priced_on` (a `CostModel` with its step model, e.g. the GPU checklist's, `projection.gpu_cost_models`):
    each policy's run also carries `priced_s`, its own decoding steps priced there (`stepmodel.predict_live`; the
    prompt's prefill, the same for every method, left out). `assistant`: the standalone draft LM of the same target
    HF assisted generation uses (`hf_assisted`; default: the pair's draft), e.g. a VDM beside an EDD pair."""
    target, draft, tok = models
    drafts = dict(drafts or {})
    assistant = (assistant if assistant is not None else draft) if hf_assisted else None
    if hf_assisted and not standalone(assistant):
        raise SpectreeError("HF assisted generation needs a standalone draft model (hf:, VDM or layer-skip), "
                            "not a drafter that reads the target's hidden states")
    policies = labelled(policies)
    for name, policy in list(policies.items()):
        # a static shape offered its top-K: every tree that large
        why = policy.oversized() if policy.fixed_size and offer_sampling(policy, sampling).greedy else None
        if why:
            warnings.warn(f"skipping {name}: {why}")
            del policies[name]
            if skipped is not None:
                skipped[name] = why
    if not prompts:
        raise SpectreeError("no prompts to decode: give at least one")
    if not isinstance(repeats, int) or repeats < 1:
        raise SpectreeError(f"repeats must be a whole number >= 1, got {repeats!r}")
    depth = max((p.max_depth for p in policies.values()), default=0)
    check_prompts(prompts, tok, target.config, max_new_tokens, depth)
    hf_packed = is_packed(target) if hf_packed is None else hf_packed and is_packed(target)
    eos = tok.eos_token_id
    gen = torch.Generator().manual_seed(seed)
    runs: list[Run] = []
    if set(drafts) - set(policies):
        raise SpectreeError(f"drafts for labels that are no policy's: {sorted(set(drafts) - set(policies))}")

    def drafter(name: str):
        return drafts.get(name, draft)

    def decode(name: str, ids: list[int], n: int, prefill: Optional[Prefill] = None):
        try:
            return speculative_generate(target, drafter(name), ids, policies[name], n, sampling, (eos,), gen,
                                        prefill=prefill)
        except TreeTooLarge as err:
            warnings.warn(f"skipping {name}: {err}")
            del policies[name]
            runs[:] = [r for r in runs if r.strategy != name]
            if skipped is not None:
                skipped[name] = str(err)
            return None

    if warmup and prompts:
        ids = chat_ids(tok, prompts[0].text)
        hf_generate(target, ids, 4, sampling, eos)
        for name in list(policies):
            decode(name, ids, 4)

    def reference(name: str, prompt: Prompt, ids: list[int], repeat: int, **kwargs) -> None:
        with OtherLoad() as load, counted(target) as forwards, counted(kwargs.get("assistant")) as drafted:
            t0 = time.perf_counter()
            out = hf_generate(target, ids, max_new_tokens, sampling, eos, seed, **kwargs)
            seconds = time.perf_counter() - t0
        runs.append(Run(name, prompt.key, prompt.category, out, seconds, forwards.n, len(out), forwards.gamma,
                        drafted.prefill_s + drafted.seconds, forwards.seconds, other_cores=load.cores, repeat=repeat,
                        prefill_s=forwards.prefill_s))

    def references(prompt: Prompt, ids: list[int], repeat: int, packed: bool) -> None:
        """HF generate, then (where asked) HF assisted generation and HF prompt lookup, on our kernels' rows when
        `packed`."""
        names = {HF: {}, **({HF_ASSISTED: {"assistant": assistant}} if assistant is not None else {}),
                 **({HF_LOOKUP: {"lookup": hf_lookup}} if hf_lookup > 0 else {})}
        for name, kwargs in names.items():
            reference(ON_OUR_KERNELS[name] if packed else name, prompt, ids, repeat, **kwargs)

    def one_pass(prompt: Prompt, ids: list[int], repeat: int) -> None:
        """Every method once on one prompt: the references, then each policy in order."""
        with stock_kernels(target, *{id(d): draft_model(d) for d in [draft, *drafts.values(), assistant]}.values()):
            references(prompt, ids, repeat, packed=False)
        if hf_packed:
            references(prompt, ids, repeat, packed=True)
        shared = Prefill.of(target, ids) if share_prefill else None
        for name in list(policies):
            with OtherLoad() as load:
                g = decode(name, ids, max_new_tokens, shared)
            if g is None:
                continue
            runs.append(Run(name, prompt.key, prompt.category, g.tokens, g.wall_s, g.n_forwards,
                            sum(s.tau for s in g.steps), sum(s.gamma for s in g.steps),
                            sum(s.draft_s for s in g.steps), sum(s.verify_s for s in g.steps),
                            sum(s.tree_s for s in g.steps),
                            synthetic=bool(getattr(drafter(name), "synthetic", False)) and policies[name].d_max > 0,
                            other_cores=load.cores, repeat=repeat, projected_s=projected_seconds(g, cost),
                            plain_s=plain_projected_seconds(g, cost),
                            prefill_s=g.prefill_s, depth_sum=sum(s.depth for s in g.steps),
                            **priced(g, priced_on),
                            keep_s=sum(s.keep_s for s in g.steps)))

    for prompt in tqdm(prompts, desc="bench", unit="prompt"):
        ids = chat_ids(tok, prompt.text)
        for repeat in range(repeats):
            one_pass(prompt, ids, repeat)
    why = None if share_prefill else busy_warning([r.other_cores for r in runs], [r.seconds for r in runs])
    for message in ([why] if why else []) + (unsteady_outputs(runs) if sampling.greedy else []):
        warnings.warn(message)
    for run in runs:
        run.sampled = not sampling.greedy
    return runs


def projected_seconds(g, cost) -> float:
    """The step model's seconds for a generation's own steps plus its measured prefill (NaN without a step model)."""
    if cost is None or cost.step is None:
        return math.nan
    return g.prefill_s + float(predict_live(cost.step, cost, g.steps).sum()) if g.steps else g.prefill_s


def priced(g, cost) -> dict[str, float]:
    """A generation's decoding steps priced on `cost` and its step model, the prefill left out: {priced_s, and its
    priced_draft_s, priced_verify_s, priced_tree_s terms (`stepmodel.live_terms`; keep and rest the remainder)}, all
    NaN without a step model."""
    names = ("priced_draft_s", "priced_verify_s", "priced_tree_s")
    if cost is None or cost.step is None:
        return dict.fromkeys(("priced_s", *names), math.nan)
    terms = live_terms(cost.step, cost, g.steps) if g.steps else {}
    return {"priced_s": float(sum(t.sum() for t in terms.values())),
            **{name: float(terms[name.split("_")[1]].sum()) if terms else 0.0 for name in names}}


def plain_projected_seconds(g, cost) -> float:
    """The step model's seconds for plain decoding of a generation's committed tokens, one step per token at its own
    prefix, plus the measured prefill (NaN without a step model)."""
    if cost is None or cost.step is None:
        return math.nan
    prefixes = [s.prefix + j for s in g.steps for j in range(s.tau)]  # [Σ τ]: each committed token's prefix
    return g.prefill_s + (float(plain_seconds(cost.step, cost, prefixes).sum()) if prefixes else 0.0)


def unsteady_outputs(runs: list[Run]) -> list[str]:
    """One line per (method, prompt) whose repeats gave different tokens: under greedy decoding they must not
    (nondeterministic kernels, or a bug)."""
    seen: dict[tuple[str, str], list[int]] = {}
    out = []
    for r in runs:
        first = seen.setdefault((r.strategy, r.prompt), r.tokens)
        if r.tokens != first:
            out.append(f"{r.strategy} gave other tokens on {r.prompt} in repeat {r.repeat} than in its first repeat")
    return out


def repeat_speedups(df: pd.DataFrame, reference: str) -> pd.DataFrame:
    """[strategy × repeat] speedups: a method's tokens/s over `reference`'s in the same repeat, each summed over
    the prompts (Σ tokens / Σ seconds); all NaN without `reference` rows. `df`: runs as rows, n_tokens added."""
    sums = df.groupby(["strategy", "repeat"], sort=False)[["n_tokens", "seconds"]].sum(min_count=1)
    rate = (sums.n_tokens / sums.seconds).unstack("repeat")
    return rate / rate.loc[reference] if reference in rate.index else rate * float("nan")


def summarize_runs(runs: list[Run], sampled: Optional[bool] = None) -> pd.DataFrame:
    """One row per method: tokens/s, speedup vs HF generate, mean τ and γ per target forward, time split,
    and, unless the runs were `sampled` (T > 0, where it means nothing; None: any run says so, `Run.sampled`),
    `exact`: the fraction of runs whose output equals HF's in the same repeat exactly, lengths included.
    Everything is pooled over prompts and repeats, except the speedups: `speedup` (= `speedup_median`) is the
    median over repeats of each repeat's speedup (`repeat_speedups`), `speedup_min` the smallest, and
    `speedup_same_kernels` the median against HF generate on the row's own kernels (our kernels' rows against
    HF generate on them, HF's stock rows against HF generate; NaN without HF on our kernels); one repeat: the pooled
    ratio. Every row has τ and γ: HF's rows from the forwards HF ran (`references.counted`). The time split sums to 1:
    draft_frac (tree building included: tree_frac), verify_frac (the target's forward, verification and keeping the
    path's KV: keep_frac), prefill_frac (the prompt) and rest_frac (the loop around them); HF's rows: the
    assistant's forwards, the target's forwards after the first, the first."""
    sampled = any(r.sampled for r in runs) if sampled is None else sampled
    df = pd.DataFrame([r.__dict__ for r in runs])
    df["n_tokens"] = df.tokens.map(len)
    ref = df[df.strategy == HF].set_index(["prompt", "repeat"]).tokens
    df["exact"] = [t == ref[p, r] for t, p, r in zip(df.tokens, df.prompt, df.repeat)]
    agg = df.groupby("strategy", sort=False).agg(
        tokens=("n_tokens", "sum"), seconds=("seconds", "sum"), forwards=("forwards", "sum"),
        tau_sum=("tau_sum", "sum"), gamma_sum=("gamma_sum", "sum"), draft_s=("draft_s", "sum"),
        verify_s=("verify_s", "sum"), tree_s=("tree_s", "sum"), prefill_s=("prefill_s", lambda x: x.sum(min_count=1)),
        keep_s=("keep_s", lambda x: x.sum(min_count=1)),
        exact=("exact", "mean"),
        other_cores=("other_cores", "mean"))
    agg["tokens_per_s"] = agg.tokens / agg.seconds
    speedups = repeat_speedups(df, HF)
    agg["speedup"] = agg["speedup_median"] = speedups.median(axis=1)
    agg["speedup_min"] = speedups.min(axis=1)
    # the step model's speedup over our plain loop for each row's own steps (`Run.projected_s` over `Run.plain_s`,
    # so a change of the machine's speed since the fit cancels), times the measured speedup of the reference closest
    # to our plain loop: HF generate on our kernels where it ran, else HF generate
    anchor = HF_PACKED if (df.strategy == HF_PACKED).any() else HF
    anchor_s = df[df.strategy == anchor].set_index(["prompt", "repeat"]).seconds
    at_anchor = anchor_s.reindex(pd.MultiIndex.from_arrays([df.prompt, df.repeat])).to_numpy()
    projected = df.assign(seconds=df.seconds.where(df.strategy.isin(list(REFERENCES)),
                                                   df.projected_s / df.plain_s * at_anchor))
    agg["projected"] = repeat_speedups(projected, HF).median(axis=1).where(~agg.index.isin(list(REFERENCES)))
    agg["projected_error"] = agg.projected / agg.speedup - 1
    # against HF generate on the same kernels: what speculation gains beyond the kernels (HF's stock rows against
    # HF generate, every other row against HF generate on our kernels; NaN without that row)
    same = repeat_speedups(df, HF_PACKED).median(axis=1).reindex(agg.index)
    agg["speedup_same_kernels"] = same.where(~agg.index.isin(STOCK) | same.isna(), agg.speedup)
    agg["tau"] = agg.tau_sum / agg.forwards
    agg["gamma"] = agg.gamma_sum / agg.forwards
    agg["draft_frac"] = agg.draft_s / agg.seconds
    agg["verify_frac"] = agg.verify_s / agg.seconds
    agg["tree_frac"] = agg.tree_s / agg.seconds  # tree construction's share of the decoding time
    agg["keep_frac"] = agg.keep_s / agg.seconds  # the accepted path's KV kept (within verify; NaN: HF's rows)
    agg["prefill_frac"] = agg.prefill_s / agg.seconds  # the prompt's share (no tree changes it)
    # what the terms above leave: the loop around them (ours: sampling, bookkeeping; HF's: its candidate generator,
    # logits processors, cache cropping); our draft_s holds tree_s
    agg["rest_frac"] = 1 - (agg.draft_s + agg.verify_s + agg.prefill_s.fillna(0)) / agg.seconds
    agg["ms_per_token"] = 1000 * agg.seconds / agg.tokens
    agg["synthetic"] = df.groupby("strategy", sort=False).synthetic.any()
    agg.loc[agg.synthetic, ["tokens_per_s", "speedup", "speedup_min", "speedup_median", "speedup_same_kernels",
                            "projected", "projected_error", "seconds", "ms_per_token", "draft_frac", "verify_frac",
                            "tree_frac", "keep_frac", "prefill_frac", "rest_frac"]] = float("nan")
    agg = agg.reset_index()  # a synthetic draft above: τ, γ only
    return agg[["strategy", "tokens_per_s", "speedup", "projected", "projected_error", "speedup_min",
                "speedup_median", "speedup_same_kernels", "tau", "gamma", "tokens", "forwards", "seconds",
                "ms_per_token", "draft_frac", "verify_frac", "tree_frac", "keep_frac", "prefill_frac", "rest_frac",
                "other_cores"]
               + ([] if sampled else ["exact"])
               + (["synthetic"] if agg.synthetic.any() else [])]


@dataclass
class Mismatch:
    prompt: str
    strategy: str
    position: int  # first differing index (or the shorter length)
    ref_len: int
    out_len: int
    top2_gap: float  # AR top-1 minus top-2 logit at that position
    tie: bool
    top1: float = float("nan")  # the AR top-1 logit there (the near-tie rule's relative term reads it)


# The near-tie rule: a mismatch is explained by rounding when the AR top-2 logit gap there is below
# max(absolute, relative * |top-1 logit|) for the target's dtype. Tree attention and sequential decoding add the
# same numbers in another order (other kernels, other shapes), so their logits differ by rounding noise:
# - float32: measured ~4e-5 (packed kernels vs HF's stock ones, SmolLM2); 1e-4 absolute, as before.
# - bfloat16: 8 mantissa bits, unit roundoff 2^-8 ≈ 4e-3; hidden states rounded at every layer leave logit noise
#   ~1e-2 relative (one ulp of a logit of 16–32 is already 0.125): 2e-2 relative (twice that), at least 5e-2.
# - float16: 11 bits, unit roundoff 2^-11 ≈ 5e-4, ~4x less noise than bf16's per op: 3e-3 relative, at least 1e-2.
TIE_GAP = {torch.float32: (1e-4, 0.0), torch.bfloat16: (5e-2, 2e-2), torch.float16: (1e-2, 3e-3)}


def tie_gap(dtype: torch.dtype, top1: float) -> float:
    """The largest top-2 logit gap rounding noise explains in `dtype` with a top-1 logit `top1` (TIE_GAP)."""
    absolute, relative = TIE_GAP.get(dtype, TIE_GAP[torch.float32])
    return max(absolute, relative * abs(top1))


@torch.inference_mode()
def top2(target, ids: list[int], ref: list[int], position: int) -> tuple[float, float]:
    """(top-1 logit, top-1 minus top-2 logit) of the AR target where the reference chose ref[position]."""
    seq = torch.tensor([ids + ref[:position]], device=target.device)
    top = target(seq).logits[0, -1].float().topk(2).values
    return float(top[0]), float(top[0] - top[1])


def top2_gap(target, ids: list[int], ref: list[int], position: int) -> float:
    """The AR logit margin between the top-2 tokens where the reference chose ref[position]."""
    return top2(target, ids, ref, position)[1]


def find_mismatches(models, runs: list[Run], prompts: list[Prompt]) -> list[Mismatch]:
    """Every run whose tokens differ from HF generate's (in the same repeat; a mismatch that repeats is listed
    once), with the AR top-2 gap where they first differ and whether rounding in the target's dtype explains it
    (`tie_gap`)."""
    target, _, tok = models
    texts = {p.key: p.text for p in prompts}
    ref = {(r.prompt, r.repeat): r.tokens for r in runs if r.strategy == HF}
    out, seen = [], set()
    for r in runs:
        a, b = ref[r.prompt, r.repeat], r.tokens
        if r.strategy == HF or a == b or (r.strategy, r.prompt, tuple(a), tuple(b)) in seen:
            continue
        seen.add((r.strategy, r.prompt, tuple(a), tuple(b)))
        pos = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        top1, gap = top2(target, chat_ids(tok, texts[r.prompt]), a, pos) if pos < len(a) else (0.0, float("nan"))
        out.append(Mismatch(r.prompt, r.strategy, pos, len(a), len(b), gap, bool(gap < tie_gap(target.dtype, top1)),
                            top1))
    return out


def format_table(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda x: f"{x:.3f}")
