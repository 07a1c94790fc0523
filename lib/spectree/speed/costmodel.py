"""Measured forward times of the target and the draft as a function of the number of tree tokens, cached
per machine, and the hardware-aware choice of a tree size. PCT's s_d/s_t comes from here.

A cached cost model is an internal cache keyed by what it was measured from (`cost_manifest`: pair, machine,
timed-path version, sizes, prefix; the precision and device where they are not float32 on the CPU; the identity
of a folder or hub target and of an `hf:` / `eagle:` draft), so one made from anything else is measured again, not
refused. Its file is named by `cost_key` (the pair's `Pair.tag`, then kernels / dtype / device). A pair string is
parsed once (`pairs.as_pair`) where it enters; the `Pair` value is passed down.
PCT's s_d/s_t for live rows is measured as EDD measures it (`construction_ratio`, cached beside the cost model); the
prompt-length axis (`lengths.length_table`: the same timings over longer committed prefixes) is measured on demand.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from spectree.core.errors import SpectreeError
from spectree.core.kernels import kernels_in_use
from spectree.core.machine import machine_id, smoke_timing
from spectree.core.manifest import beside, matches, reuse_or_rebuild
from spectree.core.policy import Policy
from spectree.core.paths import atomic_write_text, cache_dir
from spectree.models import loading  # loading.load_pair looked up per call (tests stand a loader in for it)
from spectree.models.pairs import Pair, as_pair
from spectree.speed.load import trusted
from spectree.speed.stepmodel import ConstructionRatio, StepFit, plain_seconds, predict_steps
from spectree.core.treeattn import (
    causal_allowed,
    forward_with_mask,
    slab_cache,
    synchronize,
    truncate,
)

SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class CostModel:
    machine: str
    prefix: int  # committed tokens in the cache while timing
    sizes: list[int]
    target_s: list[float]  # fastest of the timed repeats of one target forward over n tree tokens
    draft_s: list[float]  # the same for one draft forward
    step: Optional[StepFit] = None  # the live-step model (`speed.stepmodel`); None: the forwards alone

    def t_target(self, n: int) -> float:
        return float(np.interp(n, self.sizes, self.target_s))

    def t_draft(self, n: int) -> float:
        return float(np.interp(n, self.sizes, self.draft_s))

    @property
    def ratio(self) -> float:
        """s_d / s_t for one token: PCT expands a node only if its path confidence exceeds this."""
        return self.t_draft(1) / self.t_target(1)

    @property
    def plausible(self) -> bool:
        """False when a forward over fewer tokens took over twice as long (and 10 ms longer) as one over more —
        the mark of timings taken while other jobs competed for the CPU (a cache written then is re-measured)."""
        return all(_monotone(times) for times in (self.target_s, self.draft_s))

    def __post_init__(self):
        if isinstance(self.step, dict):  # read from JSON
            self.step = StepFit(**self.step)

    def steps_seconds(self, widths, tau, gamma, offered, prefix) -> np.ndarray:
        """Estimated seconds [steps] of decoding steps: `widths` [steps, forwards] the tokens of each draft forward
        (0: none; the catch-up over the τ tokens committed included), τ, γ, the children offered and the committed
        prefix [steps]. With a step model (`step`), every term of a live step (`stepmodel.predict_steps`); without,
        the draft forwards plus the target's forward over the tree, as the timed curves give them."""
        widths = np.atleast_2d(np.asarray(widths, dtype=float))
        if self.step is not None:
            return predict_steps(self.step, self, widths, tau, gamma, offered, prefix)
        draft = np.where(widths > 0, np.interp(widths, self.sizes, self.draft_s), 0.0).sum(1)
        return draft + np.interp(np.asarray(gamma, dtype=float) + 1, self.sizes, self.target_s)

    def step_seconds(self, layer_sizes: list[int], tree_size: int, tau: int = 1, offered: int = 0,
                     prefix: Optional[int] = None) -> float:
        """Estimated time of one decoding step: one draft forward per layer (the catch-up's among them) plus the
        tree verification over `tree_size` tokens, and with a step model the rest of a live step (`steps_seconds`)."""
        return float(self.steps_seconds([list(layer_sizes) or [0]], [tau], [tree_size - 1], [offered],
                                        [self.prefix if prefix is None else prefix])[0])

    def plain_seconds(self, prefix=None) -> np.ndarray:
        """Estimated seconds of a plain (autoregressive) step through the same loop after `prefix` committed tokens
        (an array, or None: the timing prefix): the target's forward over one token, and with a step model the rest
        of the loop's step (`stepmodel.plain_seconds`)."""
        prefix = np.atleast_1d(np.asarray(self.prefix if prefix is None else prefix, dtype=float))
        if self.step is not None:
            return plain_seconds(self.step, self, prefix)
        return np.full(prefix.shape, self.t_target(1))


def padded(times) -> list[float]:
    """The padding bound of a forward-time curve t(n) over increasing n: a forward over n tokens can always be padded
    to m > n tokens (the padding masked out), so t(n) ≤ t(m) — each time capped by every later one (a suffix
    minimum). It removes a warm-up or clock artefact from the small sizes of a curve measured on a GPU."""
    return np.minimum.accumulate(np.asarray(times, dtype=float)[::-1])[::-1].tolist()


def _monotone(times: list[float], slack: float = 2.0, jitter_s: float = 0.01) -> bool:
    """No time more than `slack` times (and `jitter_s` seconds) below a time measured for fewer tokens."""
    t = np.asarray(times)
    slowest_so_far = np.maximum.accumulate(t)
    return bool(((slowest_so_far <= slack * t) | (slowest_so_far - t <= jitter_s)).all())


REGIMES = ("eager", "graphs")  # eager PyTorch (the papers' timings) / CUDA graphs on a static slab (the engines')


@torch.inference_mode()
def time_forwards(model, sizes, prefix: int, repeats: int, regime: str = "eager") -> list[float]:
    """Seconds of a forward over n new tokens (tree mask path) after a cached prefix of `prefix` committed tokens,
    for each n in `sizes`, over one prefill (the cache trimmed back after each forward): the fastest of `repeats`
    timed runs per n, the estimate least disturbed by other work on the machine. A first, untimed round warms every
    size up, and the rounds interleave the sizes, so that a drift (a GPU's clocks, a neighbour's load) touches all of
    them alike: on an H100 the first sizes timed in a block came out 1.9x slower than the larger ones after them.
    `regime` "graphs": each size replays its padded size's CUDA graph on a static slab (`core.graphs.GraphCache`:
    the round 0 captures it; on the CPU the same static path runs eagerly)."""
    from spectree.core.graphs import GraphCache

    if regime not in REGIMES:
        raise SpectreeError(f"unknown cost regime '{regime}': use one of {', '.join(REGIMES)}")
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    # the cache the decoder uses in that regime
    cache = GraphCache(model, capacity=prefix + 2 * max(sizes)) if regime == "graphs" else slab_cache(model.config)
    forward_with_mask(model, cache, torch.randint(vocab, (prefix,), generator=gen), torch.arange(prefix),
                      None, last_only=True)  # a prefill, as the decoder's
    # the cost of attention does not depend on the mask's pattern: a causal block stands for every tree
    inputs = {n: (torch.randint(vocab, (n,), generator=gen), prefix + torch.arange(n), causal_allowed(prefix, n))
              for n in sizes}
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats + 1):  # round 0 warms up
        for n, (tokens, positions, allowed) in inputs.items():
            synchronize(model)
            start = time.perf_counter()
            forward_with_mask(model, cache, tokens, positions, allowed)
            synchronize(model)  # CUDA runs asynchronously: time the work, not its launch
            times[n].append(time.perf_counter() - start)
            truncate(cache, prefix)
    return [min(times[n][1:]) for n in sizes]


def time_forward(model, n: int, prefix: int, repeats: int, regime: str = "eager") -> float:
    """`time_forwards` of one size n."""
    return time_forwards(model, [n], prefix, repeats, regime)[0]


def regime_entries(shape: dict) -> dict[str, dict]:
    """One target shape of the GPU checklist's costmodel.json → {regime: what was measured in it}, each regime
    recorded: eager at the shape's top level (where files from before the graphs regime have it), every other
    regime under its own name; a regime that failed is {"error": ...}. `record_regime` writes that layout."""
    out = {"eager": shape} if "target_s" in shape or "error" in shape else {}
    return out | {r: shape[r] for r in REGIMES if r != "eager" and r in shape}


def record_regime(shape: dict, regime: str, measured: dict) -> None:
    """Put one regime's measurements into a shape's entry of costmodel.json (the layout `regime_entries` reads)."""
    if regime == "eager":
        shape.update(measured)
    else:
        shape[regime] = measured


PREFIX = 256  # committed tokens in the cache while timing


def measure(target, draft_model, sizes=SIZES, prefix: int = PREFIX, repeats: int = 5) -> CostModel:
    return CostModel(machine=machine_id(), prefix=prefix, sizes=list(sizes),
                     target_s=time_forwards(target, sizes, prefix, repeats),
                     draft_s=time_forwards(draft_model, sizes, prefix, repeats))


TIMED_PATH = 3  # bump when the timed forward path changes (2: slab cache, copy-free grouped attention; 3: "auto" crossovers timed on cold weights)


def _placed(dtype=None, device=None) -> dict:
    """The precision and device a cost model was timed in, where they are not float32 on the CPU (all that was
    timed before they were a choice): {'dtype': 'bfloat16', 'device': 'cuda'}. None: float32, cpu."""
    kind, name = torch.device(device).type if device is not None else "cpu", str(dtype).removeprefix("torch.")
    return {**({} if dtype is None or name == "float32" else {"dtype": name}),
            **({} if kind == "cpu" else {"device": kind})}


def cost_key(pair: "str | Pair", kernels: str = "stock", dtype=None, device=None) -> str:
    """The cost model's name in file names: the pair's tag (`Pair.tag`: a shipped pair's own name), then
    the kernels where they are not the stock ones ('-packed', '-auto': `kernels.kernels_in_use`) and the precision
    and device where they are not float32 on the CPU; "smoke" for a smoke run's (`machine.smoke_timing`)."""
    return "-".join([as_pair(pair).tag, *([kernels] if kernels != "stock" else []), *_placed(dtype, device).values(),
                     *(["smoke"] if smoke_timing() else [])])


def cache_path(pair: "str | Pair", machine: Optional[str] = None, kernels: str = "stock", dtype=None, device=None) -> Path:
    """Where the cost model of `pair` on `machine` (default: this one; a glob pattern also does) is cached."""
    key = cost_key(pair, kernels, dtype, device)
    return cache_dir() / "costmodel" / f"{key}-v{TIMED_PATH}-{machine or machine_id()}.json"


def cost_manifest(pair: "str | Pair", machine: Optional[str] = None, sizes=SIZES, prefix: int = PREFIX,
                  kernels: str = "stock", dtype=None, device=None) -> dict:
    """What a cached cost model is measured from. A trained draft's weights are not in it: a forward's time depends
    on the draft's shape, which the pair name fixes (its reduced head, the kernels) with the draft kind; the
    user's own models (folders, hub ids) are recorded by their identity (`Pair.identity`), as any other
    weights may have another shape under the same path."""
    pair = as_pair(pair)
    return {"pair": pair.name if kernels == "stock" else f"{pair}-{kernels}", "machine": machine or machine_id(),
            "timed_path": TIMED_PATH,
            "sizes": list(sizes), "prefix": prefix, **_placed(dtype, device), **pair.identity}


def read_cached(path: Path) -> Optional[CostModel]:
    """A cached cost model, or None when the file is absent or its timings are not to be trusted
    (`load.trusted`)."""
    if not path.exists():
        return None
    model = CostModel(**json.loads(path.read_text()))
    return model if trusted(model) else None


def load_or_measure(pair: "str | Pair", target, draft_model, sizes=SIZES, prefix: int = PREFIX, repeats: int = 5,
                    kernels: str = "stock") -> CostModel:
    """The cached cost model of this pair on this machine (in the target's dtype, on its device, timed on
    `kernels`: "stock", "packed" or "auto", as `kernels.kernels_in_use` names them), measured (a minute or so)
    if absent, implausible or measured from anything else (`cost_manifest`)."""
    pair = as_pair(pair)
    placed = {"kernels": kernels, "dtype": target.dtype, "device": target.device}
    path = cache_path(pair, **placed)

    def build() -> CostModel:
        model = measure(target, draft_model, sizes, prefix, 1 if smoke_timing() else repeats)
        atomic_write_text(path, json.dumps(asdict(model), indent=1))
        return model

    return reuse_or_rebuild(beside(path), cost_manifest(pair, sizes=sizes, prefix=prefix, **placed),
                            lambda: read_cached(path), build)


STEP_PATH = 2  # bump when the loop's timed terms (`core.decode.StepStats`) or the model's form change (2: m·[n > 1])


def steps_path(path: Path) -> Path:
    """Where the step model fitted over the cost model cached at `path` is cached."""
    return path.with_name(path.stem + ".steps.json")


def steps_manifest(cost: CostModel) -> dict:
    """What a cached step model is fitted from: the live steps' prompts, policies and length, and the forward
    curves it scales (refitted whenever they are measured again)."""
    from spectree.speed import stepmodel

    prompts, tokens = stepmodel.fit_plan()
    return {"step_path": STEP_PATH, "prompts": prompts, "policies": list(stepmodel.FIT_POLICIES),
            "tokens": tokens, "curves": [cost.sizes, cost.target_s, cost.draft_s]}


def load_or_fit(path: Path, cost: CostModel, models: Optional[tuple], pair: str = "") -> Optional[StepFit]:
    """The step model cached beside the cost model at `path`, fitted now on live steps (`stepmodel.live_steps`,
    half a minute to a few minutes on a CPU) when absent or fitted over other curves; None when absent and no
    `models` are given to fit it."""
    from spectree.speed import stepmodel

    out = steps_path(path)

    def read() -> Optional[StepFit]:
        fit = stepmodel.from_json(out.read_text()) if out.exists() else None
        return fit if fit is not None and trusted(fit) else None

    def build() -> Optional[StepFit]:
        if models is None:
            return None
        fit = stepmodel.measure_fit(models, cost, f"{pair} on {stepmodel.fit_plan()[0]}: "
                                                  f"{', '.join(stepmodel.FIT_POLICIES)}")
        if not fit.plausible:
            warnings.warn(f"the step model of {pair} was fitted while the machine was busy ({fit.other_cores:.2f} "
                          f"other cores) or explains its steps badly (median error "
                          f"{fit.residuals['step']['median']:.0%}): used now, fitted again next time")
        atomic_write_text(out, stepmodel.to_json(fit))
        return fit

    if models is None:
        return read() if matches(beside(out), steps_manifest(cost)) else None
    return reuse_or_rebuild(beside(out), steps_manifest(cost), read, build)


def pair_cost_model(pair: "str | Pair", models: tuple) -> CostModel:
    """`load_or_measure` for a loaded pair (target, drafter, tokenizer): the drafter's model is what is timed; with
    its step model (`load_or_fit`: live steps of the pair, fitted once per machine and kernels)."""
    from spectree.core.drafting import draft_model

    target, drafter, _ = models
    pair, kernels = as_pair(pair), kernels_in_use(target)
    cost = load_or_measure(pair, target, draft_model(drafter), kernels=kernels)
    cost.step = load_or_fit(cache_path(pair, kernels=kernels, dtype=target.dtype, device=target.device), cost,
                            models, pair)
    return cost


RATIO_PATH = 1  # bump when what `construction_ratio` averages changes


def construction_ratio(pair: "str | Pair", models: tuple, cost: CostModel) -> ConstructionRatio:
    """This machine's s_d/s_t for PCT's live rows, as EDD measures it (l.817–821): the mean of the forwards PCT
    construction makes, draft forwards over its trees' layers over target forwards over its trees
    (`stepmodel.measure_construction`, live PCT on FIT_PROMPTS from `cost`'s one-token ratio, a few seconds), not
    `cost.ratio` = t_draft(1) / t_target(1). Cached beside the pair's cost model, measured again with it."""
    from spectree.speed import stepmodel

    path = cache_path(pair, kernels=kernels_in_use(models[0]), dtype=models[0].dtype, device=models[0].device)
    out = path.with_name(path.stem + ".ratio.json")
    prompts, tokens = stepmodel.fit_plan()
    manifest = {"ratio_path": RATIO_PATH, "prompts": prompts, "tokens": 2 * tokens,
                "policy": stepmodel.RATIO_PCT, "curves": [cost.sizes, cost.target_s, cost.draft_s]}

    def read() -> Optional[ConstructionRatio]:
        found = ConstructionRatio(**json.loads(out.read_text())) if out.exists() else None
        return found if found is not None and trusted(found) else None

    def build() -> ConstructionRatio:
        measured = stepmodel.measure_construction(models, cost.ratio)
        if not measured.plausible:
            warnings.warn(f"s_d/s_t of {pair} was measured on a busy machine ({measured.other_cores:.2f} other cores)")
        atomic_write_text(out, json.dumps(asdict(measured), indent=1))
        return measured
    return reuse_or_rebuild(beside(out), manifest, read, build)


def calibrate(policies: dict[str, Policy], cost: Callable[[], "CostModel | float"]) -> dict[str, Policy]:
    """The policies with their machine-measured parameters filled in (PCT's s_d/s_t), `cost()` read (a cost model,
    cached or measured in a minute, whose one-token ratio is taken; or the ratio itself, e.g.
    `construction_ratio(...).ratio`) only if one of them needs it."""
    if not any(p.needs_calibration for p in policies.values()):
        return policies
    found = cost()
    ratio = found.ratio if isinstance(found, CostModel) else float(found)
    return {label: p.calibrate(ratio) for label, p in policies.items()}


def cached_cost_model(pair: "str | Pair", load_models: Optional[Callable[[], tuple]] = None, measure: bool = True,
                      dtype=None, device=None, kernels: Sequence[str] = ("stock",)) -> tuple[CostModel, str]:
    """The pair's cost model on this machine (`load_or_measure`'s cache, in `dtype` on `device`: None float32,
    where `load_pair` puts the pair), on the first of `kernels` that has one cached (`bench` measures it on its
    `--kernels`, auto by default); where that is missing, one cached for the pair on this host with another thread
    count (noted in the returned origin); else measured now on stock kernels (loads the pair with `load_models`),
    or with `measure` False one clear error. Its step model (`load_or_fit`) comes with it when cached; else it is
    fitted now (loading the pair), or with `measure` False the forwards alone price a step (said in the origin)."""
    from spectree.models.targets import resolve_device

    pair = as_pair(pair)  # parsed once: its tag and identity name every file below
    placed = {"dtype": dtype, "device": resolve_device(device)}
    host = machine_id().rsplit("-", 1)[0]
    for kind in kernels:
        exact = cache_path(pair, kernels=kind, **placed)
        others = sorted((p for p in exact.parent.glob(cache_path(pair, f"{host}-*", kind, **placed).name)
                         if p != exact and not p.name.endswith((".manifest.json", ".steps.json"))),
                        key=lambda p: p.stat().st_mtime)
        for path, note in [(exact, "")] + [(o, " (measured with other threads)") for o in reversed(others)]:
            machine = path.stem.removeprefix(f"{cost_key(pair, kind, **placed)}-v{TIMED_PATH}-")
            manifest = cost_manifest(pair, machine, kernels=kind, **placed)
            cached = read_cached(path) if matches(beside(path), manifest) else None
            if cached is not None:
                cached.step = load_or_fit(path, cached, None)
                if cached.step is None and measure:
                    cached.step = load_or_fit(path, cached, (load_models or _loader(pair, dtype, device, kind))(),
                                              pair)
                steps = "" if cached.step is not None else "; no step model: the forwards alone"
                return cached, f"cached {path.stem}{note}{steps}"
    if not measure:
        raise SpectreeError(f"no cost model of {pair} cached on this machine: give PCT its ratio (pct:ratio=…) or "
                            "run `python -m spectree bench` with the pair once")
    return pair_cost_model(pair, (load_models or _loader(pair, dtype, device))()), "measured on this machine"


def sd_over_st(pair: str = "smollm2-edd") -> float:
    """PCT's s_d/s_t for `pair` on this machine: one-token forward times of draft and target:
    the cached ones notebook 02 reads, else measured now (a minute; no step model, PCT needs only the forwards)."""
    from spectree.core.drafting import draft_model

    try:
        cost, _ = cached_cost_model(pair, measure=False)
    except SpectreeError:
        target, drafter, _ = loading.load_pair(pair)
        cost = load_or_measure(pair, target, draft_model(drafter))
    return round(cost.ratio, 3)


def _loader(pair: Pair, dtype, device, kernels: str = "stock") -> Callable[[], tuple]:
    def load_models():
        return loading.load_pair(pair, device=device, dtype=dtype or "float32", kernels=kernels)
    return load_models


def best_tree_size(cost: CostModel, expected_tau: dict[int, float], layers: dict[int, list[int]]) -> int:
    """The tree size maximising expected tokens per second, E[τ(n)] / step time(n).

    expected_tau: n → mean τ of trees of n draft tokens (e.g. from replay); layers: n → frontier sizes of
    the draft forwards such a tree needs."""
    return max(expected_tau, key=lambda n: expected_tau[n] / cost.step_seconds(layers[n], n + 1))
