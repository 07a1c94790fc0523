"""The step model: the seconds of one live decoding step, term by term, fitted on live steps of this machine.

A step of `core.decode.speculative_generate` is timed where each part happens (`core.decode.StepStats`):

    draft forwards   one per layer of fed nodes, then the catch-up over the tokens the step committed
    verify forward   the target over the tree (γ + 1 tokens) after `prefix` committed tokens
    tree             tree construction: the offered children's features and the policy's decisions
    keep             keeping the accepted path's KV in the target's cache
    rest             what the terms leave of the step: verification's sampling, bookkeeping, the loop

Each term is a non-negative linear function of its sizes, fitted by `scipy.optimize.nnls` on live steps
(`fit_steps`); the forward terms scale the cost model's timed curves (`CostModel.t_draft` / `t_target`, taken
at one prefix) to live forwards, add what a forward over more than one token pays in the loop (its tree mask and
positions: `m`, measured at ~15 ms per verify forward on a 2-core CPU, where a line through t_target(n) alone
priced a plain step 20% high and overstated every tree's speedup by as much) and the attention that grows with the
prefix:

    draft forward(n, L)   = a + m·[n > 1] + b·t_draft(n)  + c·n·L/1000
    verify forward(n, L)  = a + m·[n > 1] + b·t_target(n) + c·n·L/1000
    tree(offered, γ)      = a + b·drafted + c·offered + d·γ        (drafted: 1 when the step drafted a tree)
    keep(τ)               = a + b·τ
    rest(γ)               = a + b·(γ + 1)

A plain (autoregressive) step through the same loop is verify forward(1, L) + tree(0, 0) (its root alone) +
keep(1) + rest(0). The fit is
cached per pair, machine and kernels beside the cost model (`load_or_fit`), measured on prompts of its own
(FIT_PROMPTS) with policies of every tree size (FIT_POLICIES), and carries its residuals per term.

The same live steps give PCT's s_d/s_t as EDD measures it (`measure_construction`: the mean draft forward over PCT's
tree layers over the mean target forward over its trees), which `costmodel.construction_ratio` caches.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import nnls

from spectree.core.machine import smoke_timing

TERMS = ("draft", "verify", "tree", "keep", "rest")
# live steps the fit is made from: every tree size from a chain to a wide EAGLE-2 tree, and plain decoding
FIT_POLICIES = ("ar", "chain:k=1", "chain:k=3", "kary:b=2,d=3", "eagle2:K=8,d_max=5,N=16",
                "eagle2:K=8,d_max=6,N=48", "dyspec:m=32,K=8,d_max=8")
FIT_PROMPTS = "sharegpt:2"  # prompts of their own: the checks that read the model run on others (a fit records their ids)
FIT_TOKENS = 24  # ~300 live steps over 7 policies: half a minute to a minute on a 2-core CPU
MAX_MEDIAN_ERROR = 0.35  # a fit whose median |predicted / measured − 1| over its own steps is larger is not kept

SMOKE_FIT = ("sharegpt:1", 8)  # a smoke run's fit (`core.machine.smoke_timing`): one fit prompt, 8 tokens a policy


def fit_plan() -> tuple[str, int]:
    """(prompt spec, tokens per policy) of the step model's live steps: (FIT_PROMPTS, FIT_TOKENS), or SMOKE_FIT in
    smoke mode. PCT's s_d/s_t decodes the same prompts for twice the tokens."""
    return SMOKE_FIT if smoke_timing() else (FIT_PROMPTS, FIT_TOKENS)


def _design(term: str, steps: dict, cost) -> np.ndarray:
    """The features [rows, k] of one term (`steps`: `step_arrays`' columns, or one forward per row for the
    forward terms)."""
    one = np.ones(len(next(iter(steps.values()))))
    if term in ("draft", "verify"):  # a forward over n tokens after L: the tree path's price, the timed curve
        n, L = np.asarray(steps["n"]), steps["L"]  # scaled, plus attention
        curve = cost.draft_s if term == "draft" else cost.target_s
        return np.column_stack([one, n > 1, np.interp(n, cost.sizes, curve), n * L / 1000])
    if term == "tree":
        return np.column_stack([one, steps["drafted"], steps["offered"], steps["gamma"]])
    if term == "keep":
        return np.column_stack([one, steps["tau"]])
    return np.column_stack([one, steps["gamma"] + 1])


@dataclass
class StepFit:
    """The fitted terms of a live step (coefficients in TERMS order of `_design`'s features) and their residuals:
    per term and for the whole step, the median and 90th percentile of |predicted / measured − 1| over the fit's
    steps, and `total`, Σ predicted / Σ measured − 1 (what a speedup's error is made of)."""

    machine: str
    coef: dict[str, list[float]]
    residuals: dict[str, dict[str, float]] = field(default_factory=dict)
    n_steps: int = 0
    source: str = ""  # what the steps were decoded from (pair, prompts, policies)
    other_cores: float = math.nan  # cores other processes used while the steps were timed (`speed.load`)
    prompts: list[str] = field(default_factory=list)  # the ids (`Prompt.key`) of the prompts the steps were decoded on

    def __post_init__(self):
        # a fit of the first form (a forward without the tree path's term, e.g. a GPU checklist's committed
        # costmodel.json) is the present form with m = 0
        self.coef = {term: (c[:1] + [0.0] + c[1:] if term in ("draft", "verify") and len(c) == 3 else c)
                     for term, c in self.coef.items()}

    @property
    def plausible(self) -> bool:
        """False for a fit timed while other processes took CPU (over `load.BUSY_CORES`) or one whose steps it does
        not explain (median step error over MAX_MEDIAN_ERROR: 9% on a quiet 2-core host, 149% under a test run):
        a cached one is fitted again."""
        from spectree.speed.load import BUSY_CORES

        step = self.residuals.get("step", {})
        return not self.other_cores > BUSY_CORES and step.get("median", 0.0) <= MAX_MEDIAN_ERROR

    def term(self, name: str, cost, **sizes) -> np.ndarray:
        arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in sizes.items()}
        return _design(name, arrays, cost) @ np.asarray(self.coef[name])


def step_arrays(steps: Sequence) -> dict[str, np.ndarray]:
    """The per-step columns of live `StepStats`: tau, gamma, offered, drafted, L (prefix), measured seconds of
    every term (draft_s: Σ draft forwards), and the draft forwards one per row (fwd_step, n, L, seconds)."""
    fwd = [(i, n, s.prefix, sec) for i, s in enumerate(steps) for n, sec in s.draft_forwards]
    f = np.array(fwd, dtype=float).reshape(-1, 4)
    draft_fwd = np.bincount(f[:, 0].astype(int), weights=f[:, 3], minlength=len(steps))
    col = {k: np.array([getattr(s, k) for s in steps], dtype=float)
           for k in ("tau", "gamma", "offered", "prefix", "verify_forward_s", "tree_s", "keep_s", "step_s")}
    drafted = np.array([bool(s.draft_forwards) or s.offered > 0 for s in steps], dtype=float)
    rest = col["step_s"] - draft_fwd - col["verify_forward_s"] - col["tree_s"] - col["keep_s"]
    return {"tau": col["tau"], "gamma": col["gamma"], "offered": col["offered"], "drafted": drafted,
            "L": col["prefix"], "n": col["gamma"] + 1, "draft_s": draft_fwd, "verify_s": col["verify_forward_s"],
            "tree_s": col["tree_s"], "keep_s": col["keep_s"], "rest_s": rest, "step_s": col["step_s"],
            "fwd_n": f[:, 1], "fwd_L": f[:, 2], "fwd_s": f[:, 3], "fwd_step": f[:, 0].astype(int)}


def _errors(pred: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    rel = np.abs(pred / np.maximum(measured, 1e-9) - 1)
    return {"median": float(np.median(rel)), "p90": float(np.quantile(rel, 0.9)),
            "total": float(pred.sum() / measured.sum() - 1)} if len(rel) else {}


def fit_steps(steps: Sequence, cost, source: str = "", other_cores: float = math.nan) -> StepFit:
    """The step model fitted on live `StepStats` (of several policies, plain decoding among them) and the cost
    model `cost` whose forward curves it scales: each term by non-negative least squares on seconds, so that
    its pooled time is right (what a speedup is made of)."""
    a = step_arrays(steps)
    rows = {"draft": ({"n": a["fwd_n"], "L": a["fwd_L"]}, a["fwd_s"]),
            "verify": ({"n": a["n"], "L": a["L"]}, a["verify_s"]),
            "tree": (a, a["tree_s"]), "keep": (a, a["keep_s"]), "rest": (a, np.maximum(a["rest_s"], 0.0))}
    coef, residuals = {}, {}
    for term, (sizes, y) in rows.items():
        X = _design(term, sizes, cost)
        coef[term] = nnls(X, y)[0].tolist() if len(y) else [0.0] * X.shape[1]
        residuals[term] = _errors(X @ np.asarray(coef[term]), y)
    fit = StepFit(cost.machine, coef, residuals, len(steps), source, other_cores)
    residuals["step"] = _errors(_predict(fit, cost, a), a["step_s"])
    return fit


def predict_live(fit: StepFit, cost, steps: Sequence) -> np.ndarray:
    """Predicted seconds [steps] of live steps from their own sizes (forward widths, tree, τ, prefix)."""
    return _predict(fit, cost, step_arrays(steps))


def live_terms(fit: StepFit, cost, steps: Sequence) -> dict[str, np.ndarray]:
    """`predict_live` term by term: {draft, verify, tree, keep, rest: predicted seconds [steps]}, which sum to it."""
    return _terms(fit, cost, step_arrays(steps))


def _predict(fit: StepFit, cost, a: dict[str, np.ndarray]) -> np.ndarray:
    return sum(_terms(fit, cost, a).values())


def _terms(fit: StepFit, cost, a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    n_steps = len(a["tau"])
    draft = np.bincount(a["fwd_step"], weights=fit.term("draft", cost, n=a["fwd_n"], L=a["fwd_L"]),
                        minlength=n_steps) if len(a["fwd_n"]) else np.zeros(n_steps)
    return {"draft": draft, **_non_draft_terms(fit, cost, a["tau"], a["gamma"], a["offered"], a["drafted"], a["L"])}


def _non_draft(fit: StepFit, cost, tau, gamma, offered, drafted, L) -> np.ndarray:
    return sum(_non_draft_terms(fit, cost, tau, gamma, offered, drafted, L).values())


def _non_draft_terms(fit: StepFit, cost, tau, gamma, offered, drafted, L) -> dict[str, np.ndarray]:
    sizes = {"tau": tau, "gamma": gamma, "offered": offered, "drafted": drafted}
    return {"verify": fit.term("verify", cost, n=np.asarray(gamma) + 1, L=L), "tree": fit.term("tree", cost, **sizes),
            "keep": fit.term("keep", cost, **sizes), "rest": fit.term("rest", cost, **sizes)}


def predict_steps(fit: StepFit, cost, widths: np.ndarray, tau, gamma, offered, L) -> np.ndarray:
    """Predicted seconds [steps] of steps described by their draft forwards' widths [steps, forwards] (0: none;
    the catch-up included), τ, γ, offered children and prefix [steps] (replay, `pricing.step_times`)."""
    widths = np.asarray(widths, dtype=float)
    L = np.broadcast_to(np.asarray(L, dtype=float), (len(widths),))
    per = fit.term("draft", cost, n=widths.ravel(), L=np.repeat(L, widths.shape[1])).reshape(widths.shape)
    draft = np.where(widths > 0, per, 0.0).sum(1)
    drafted = (np.asarray(offered) > 0).astype(float)
    return draft + _non_draft(fit, cost, tau, gamma, offered, drafted, L)


def plain_seconds(fit: StepFit, cost, L) -> np.ndarray:
    """Predicted seconds of a plain (autoregressive) step through the same loop after L committed tokens."""
    L = np.atleast_1d(np.asarray(L, dtype=float))
    zero = np.zeros_like(L)
    return _non_draft(fit, cost, zero + 1, zero, zero, zero, L)


def live_steps(models, prompts=None, policies: Sequence[str] = (), max_new_tokens: int = 0, seed: int = 0,
               load=None) -> list:
    """Live `StepStats` of every policy on every prompt (a prompt spec or `Prompt`s; greedy, EOS ignored so that
    every decode is as long), after one untimed warm-up decode per policy: the steps a fit is made from (defaults:
    FIT_PROMPTS, FIT_POLICIES, FIT_TOKENS). `load`: a `speed.load.OtherLoad` the decoding runs inside (it reads what
    other processes took meanwhile)."""
    from contextlib import nullcontext

    import torch

    from spectree.core.decode import speculative_generate
    from spectree.prompts import chat_ids, parse_prompt_spec
    from spectree.strategies import parse_strategy

    target, draft, tok = models
    prompts, max_new_tokens = prompts or fit_plan()[0], max_new_tokens or fit_plan()[1]
    parsed = [parse_strategy(p) for p in policies or FIT_POLICIES]
    gen = torch.Generator().manual_seed(seed)
    window = getattr(target.config, "max_position_embeddings", None) or 1 << 30
    room = window - max_new_tokens - max(p.max_depth for p in parsed)  # a prompt's last tokens fit any target
    steps = []
    with load if load is not None else nullcontext():
        for i, prompt in enumerate(parse_prompt_spec(prompts) if isinstance(prompts, str) else prompts):
            ids = chat_ids(tok, prompt.text)[-room:]
            if i == 0:
                for policy in parsed:
                    speculative_generate(target, draft, ids, policy, 4, generator=gen)
            for policy in parsed:
                steps += speculative_generate(target, draft, ids, policy, max_new_tokens, generator=gen).steps
    return steps


def measure_fit(models, cost, source: str = "", **kwargs) -> StepFit:
    """`fit_steps` over `live_steps(models, **kwargs)`, with the load other processes put on the machine meanwhile
    (a fit taken on a busy machine is marked, and not kept in a cache: `StepFit.plausible`)."""
    from spectree.prompts import parse_prompt_spec
    from spectree.speed.load import OtherLoad

    load = OtherLoad()
    prompts = kwargs.pop("prompts", None) or fit_plan()[0]
    prompts = parse_prompt_spec(prompts) if isinstance(prompts, str) else list(prompts)
    steps = live_steps(models, prompts, load=load, **kwargs)
    fit = fit_steps(steps, cost, source, load.cores)
    fit.prompts = [p.key for p in prompts]  # the fit's own prompts, which no check that reads it may score
    return fit


RATIO_PCT = "pct:ratio={:.4g},k=5,d_max=10"  # EDD's PCT: expansion width 5, maximum depth 10 (l.815–817)
RATIO_ROUNDS, RATIO_TOLERANCE = 3, 0.05  # PCT rerun at the measured ratio until it moves less than this


@dataclass
class ConstructionRatio:
    """s_d/s_t as EDD measures it (l.817–821: "the average time required for one forward pass of both target models
    and draft models for PCT construction", 1.1 ms / 29.8 ms for its 7B pair): `draft_s`, the mean seconds of the
    draft's forwards over the layers of live PCT trees, over `target_s`, the mean seconds of the target's forward
    over those trees (`construction_forwards`); not t_draft(1) / t_target(1), one token each."""

    ratio: float
    draft_s: float
    target_s: float
    layers: int  # draft forwards averaged
    trees: int  # target forwards averaged
    rounds: list[float] = field(default_factory=list)  # the s_d/s_t PCT ran at in each round (first: one token's)
    prompts: list[str] = field(default_factory=list)  # the ids (`Prompt.key`) of the prompts decoded
    other_cores: float = math.nan  # cores other processes used meanwhile (`speed.load`)

    @property
    def plausible(self) -> bool:
        """False when timed while other processes took CPU (over `load.BUSY_CORES`) or with nothing to average."""
        from spectree.speed.load import BUSY_CORES

        return not self.other_cores > BUSY_CORES and self.layers > 0 and self.trees > 0


def construction_forwards(generations: Sequence[Sequence]) -> tuple[list[float], list[float]]:
    """(seconds of every draft forward over a tree layer, of every target forward over a tree) in live generations
    (each a list of `StepStats`), from every step but a generation's last: a step's draft forwards are its tree's
    layers and then the catch-up over the tokens it committed (`StepStats.draft_forwards`, catch-up last), which
    the last step does not make."""
    layers: list[float] = []
    trees: list[float] = []
    for steps in generations:
        for s in list(steps)[:-1]:
            layers += [seconds for _, seconds in s.draft_forwards[:-1]]
            trees.append(s.verify_forward_s)
    return layers, trees


def measure_construction(models, start: float, prompts=None, max_new_tokens: int = 0, seed: int = 0
                         ) -> ConstructionRatio:
    """EDD's s_d/s_t on this machine (`ConstructionRatio`): PCT (RATIO_PCT) decodes `prompts` (the fit's, `fit_plan`:
    prompts of their own) live for `max_new_tokens` (twice the fit's tokens) at s_d/s_t `start` (the cost model's
    one-token ratio), then again at each measured ratio, since PCT's trees depend on it, until it moves less than
    RATIO_TOLERANCE or after RATIO_ROUNDS rounds (one in smoke mode): the last ratio measured, with the load other
    processes put on the machine."""
    from spectree.prompts import parse_prompt_spec
    from spectree.speed.load import OtherLoad

    prompts = prompts or fit_plan()[0]
    prompts = parse_prompt_spec(prompts) if isinstance(prompts, str) else list(prompts)
    rounds, ratio, out = [], float(start), None
    with OtherLoad() as load:
        for _ in range(1 if smoke_timing() else RATIO_ROUNDS):
            rounds.append(round(ratio, 4))
            spec = RATIO_PCT.format(ratio)
            layers, trees = construction_forwards(
                [live_steps(models, [p], [spec], max_new_tokens or 2 * fit_plan()[1], seed) for p in prompts])
            draft_s, target_s = (float(np.mean(x)) if x else math.nan for x in (layers, trees))
            out = ConstructionRatio(draft_s / target_s, draft_s, target_s, len(layers), len(trees))
            if not math.isfinite(out.ratio) or abs(out.ratio / ratio - 1) < RATIO_TOLERANCE:
                break
            ratio = out.ratio
    out.rounds, out.prompts, out.other_cores = rounds, [p.key for p in prompts], load.cores
    if not math.isfinite(out.ratio):  # no tree layer to average (PCT grew no tree past its root): one token's stands
        warnings.warn(f"s_d/s_t: no PCT tree layer was timed ({out.layers} draft, {out.trees} target forwards); "
                      f"the one-token ratio {start:.3g} stands")
        out.ratio = float(start)
    return out


def to_json(fit: StepFit) -> str:
    return json.dumps(asdict(fit), indent=1)


def from_json(text: str) -> StepFit:
    return StepFit(**json.loads(text))


def residual_lines(fit: StepFit) -> list[str]:
    """One line per term: median / p90 |predicted / measured − 1| and the pooled error."""
    return [f"{term:<7} median {r['median']:.1%}  p90 {r['p90']:.1%}  pooled {r['total']:+.1%}"
            for term, r in fit.residuals.items() if r and not math.isnan(r["median"])]
