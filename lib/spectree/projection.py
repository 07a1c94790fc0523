"""Projected speed from replay, behind notebook 11 (and the GPU checklist's cost models that notebooks 03 and 13 and
`tune` read, `gpu_cost_models`): each policy family's replayed trees and τ priced by a cost model
(`pricing.price_replay`), on this machine and on the GPU checklist's measured target shapes, and the projection's
check against live decoding over several runs.

One speedup baseline: a cost model prices our loop's steps, so a projection is a speedup vs our AR loop
(`names.VS_AR`, plain decoding through our loop on the same kernels); `to_hf` with our AR loop's live ratio to HF
generate on this machine (`ar_over_hf`, the live check's runs) states it vs HF generate (`names.VS_HF`), the
headline baseline of every live table (`best_projected`).

One s_d/s_t per purpose (`names.sd_st`): a GPU shape's projection prices PCT with that cost model's one-token forward
ratio (`sd_st("gpu", …)`); the CPU's with the ratio the notebook passes (`projection_policies`); the paper's own
ratio serves only the hardware-free claims (`quality.quality`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from spectree.claims.claims import Evidence, claim, interval_rule
from spectree.claims.verdicts import BAR, INCONCLUSIVE
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.replay import as_forest
from spectree.pricing import price_replay
from spectree.claims.names import AR_LABEL, VS_AR, VS_HF, to_hf
from spectree.strategies import parse_strategy
from spectree.strategies.c2t import C2T
from spectree.strategies.chain import Chain, autoregressive
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.pct import PCT
from spectree.strategies.static import Kary

SPEED_LINES = (1.3, 2.0)  # the issue's goal and the papers' regime
AR = AR_LABEL  # the live check's plain decoding through our loop
MIN_RUNS = 3  # the projection check reads at least this many live runs (or prompt sets), and reports the worst
REGIME_WORDS = {"eager": "eager PyTorch", "graphs": "CUDA graphs"}  # `speed.costmodel.REGIMES`, as lines name them


def projection_policies(K: int, d_max: int, classifier: Optional[str], pct_ratio: float) -> dict[str, list[Policy]]:
    """family → policies of growing tree size, replayable on a logbook of children K and depth d_max, to project;
    PCT at `pct_ratio`, the s_d/s_t of the cost model that prices it."""
    k, d = min(8, K), d_max
    families = {"chain": [Chain(k=n) for n in range(1, min(8, d) + 1)],
                "static k-ary": [Kary(b=2, d=n) for n in range(2, min(4, d) + 1)],
                # at the logbook's K: its own top-K expansion is logged (`replay.logtree`), so it always replays
                "EAGLE-2": [Eagle2(K=K, d_max=min(6, d), N=n) for n in (4, 8, 16, 32, 64)],
                "DySpec": [DySpec(m=m, K=k, d_max=d) for m in (4, 8, 16, 32, 64)],
                "DySpec threshold": [DySpecThreshold(t=t, K=k, d_max=d) for t in (0.4, 0.2, 0.1, 0.05, 0.02)],
                "PCT": [PCT(ratio=round(pct_ratio, 3), k=w, d_max=d) for w in (1, 2, 3, 5)]}
    if classifier:
        families["C2T"] = [C2T(beta=b, K=k, d_max=min(6, d), topk=t, classifier=classifier)
                           for b in (0.3, 0.5, 0.7) for t in (4, 8)]
    return families


def projected(logbook: list[LoggedPrompt], families: dict[str, list[Policy]], cost) -> pd.DataFrame:
    """One row per replayable policy: family, spec, τ, γ and the projected speedup (`pricing.price_replay`)."""
    forest, rows = as_forest(logbook), []
    for family, policies in families.items():
        for policy in policies:
            try:
                s = price_replay(forest, policy, cost)
            except SpectreeError:  # not replayable on this logbook's trees
                continue
            rows.append({"family": family, "spec": policy.spec, "tau": s["tau"], "gamma": s["gamma"],
                         "speedup": s["speedup"]})
    return pd.DataFrame(rows, columns=["family", "spec", "tau", "gamma", "speedup"])


def best_by_family(results: Sequence[Any]) -> pd.DataFrame:
    """Per λ and family (`results`: `quality.Quality`s), the policy of the highest projected speedup: λ, agreement,
    family, spec, τ, γ, speedup."""
    frames = []
    for q in results:
        if len(q.projected):
            best = q.projected.loc[q.projected.groupby("family").speedup.idxmax()]
            frames.append(best.assign(weight=q.weight, agreement=q.agreement["agreement"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def agreement_needed(best: pd.DataFrame, speedup: float, ar_over_hf: Optional[float] = None) -> dict[str, Any]:
    """The top-1 agreement at which the best projected speedup (over every family) first reaches `speedup`,
    linearly interpolated between the measured agreements; None where it is never reached in range. The projection
    is vs our AR loop; with `ar_over_hf` (our AR loop's live tokens/s over HF generate's, `ar_over_hf`) `speedup` is
    read vs HF generate. `baseline` names which."""
    scale = to_hf(1.0, ar_over_hf) if ar_over_hf is not None else 1.0
    baseline = VS_HF if ar_over_hf is not None else VS_AR
    top = best.groupby("agreement").speedup.max().sort_index() * scale
    x, y = top.index.to_numpy(float), top.to_numpy(float)
    above = np.flatnonzero(y >= speedup)
    if len(above) == 0:
        return {"speedup": speedup, "agreement": None, "baseline": baseline,
                "text": f"not reached in range (best {y.max():.2f}× {baseline} at agreement {x[y.argmax()]:.2f})"
                if len(y) else "no projection"}
    i = int(above[0])
    if i == 0:
        return {"speedup": speedup, "agreement": float(x[0]), "baseline": baseline,
                "text": f"≤ {x[0]:.2f} (already at the lowest)"}
    a = float(np.interp(speedup, [y[i - 1], y[i]], [x[i - 1], x[i]]))
    return {"speedup": speedup, "agreement": a, "baseline": baseline, "text": f"≥ {a:.2f}"}


def ar_over_hf(live: pd.DataFrame) -> float:
    """Our AR loop's tokens/s over HF generate's in live runs on this machine (`speed.bench.summarize_runs` frames,
    one or several with a `run` column, `live_by_run`): the median over runs of its `speedup`; NaN without the row."""
    if not {"strategy", "speedup"} <= set(live.columns):
        return math.nan
    rows = live[live.strategy == AR]
    return float(rows.speedup.median()) if len(rows) else math.nan


def best_projected(table: pd.DataFrame, ar_hf: float = math.nan) -> str:
    """The best row of a projection (`projected`'s: spec, speedup vs our AR loop) in words, both baselines named:
    "1.77× vs HF generate (1.39× vs our AR loop × our AR loop's live 1.27×; dyspec:m=4,d_max=8)"; vs our AR loop
    alone when `ar_hf` (`ar_over_hf`) is unknown."""
    if not len(table):
        return "no projection"
    row = table.loc[table.speedup.idxmax()]
    hf = to_hf(float(row.speedup), ar_hf)
    if not math.isfinite(hf):
        return f"{row.speedup:.2f}× {VS_AR} ({row.spec})"
    return f"{hf:.2f}× {VS_HF} ({row.speedup:.2f}× {VS_AR} × our AR loop's live {ar_hf:.2f}×; {row.spec})"


# --- the GPU checklist's cost models ------------------------------------------------------------------------

def gpu_cost_models(path: Path) -> tuple[dict[tuple[str, str], Any], str]:
    """((shape, regime) → the cost model the GPU checklist measured for it, the device's name) from its
    costmodel.json (`gpu.gpu_check`, committed under figures/gpu_check/), for each regime it measured: "eager"
    (eager PyTorch, the papers' timings: the shape's top-level numbers) and "graphs" (CUDA graphs on a static slab,
    the engines': its "graphs" entry). Each holds the target's forward times after the first committed prefix, and
    one draft layer's as the draft's (an EAGLE- or EDD-sized draft), each under its padding bound
    (`speed.costmodel.padded`: the first H100 run timed small trees slower than larger ones), with the step model
    fitted on that machine's live steps in that regime where the checklist recorded one; ({}, "") without the file."""
    import json

    from spectree.speed.costmodel import CostModel, padded, regime_entries

    if not path.exists():
        return {}, ""
    data = json.loads(path.read_text())
    prefix = str(data["prefixes"][0])
    costs = {}
    for shape, m in data["shapes"].items():
        for regime, r in regime_entries(m).items():
            if "target_s" in r:
                costs[shape, regime] = CostModel(machine=f"{data['machine']} ({shape}, {regime})", prefix=int(prefix),
                                                 sizes=list(data["sizes"]), target_s=padded(r["target_s"][prefix]),
                                                 draft_s=padded(r["draft_s"]), step=r.get("step"))
    return costs, str(data.get("device", data["machine"]))


def gpu_projection(results: Sequence[Any], logbooks: dict[float, list[LoggedPrompt]], K: int, d_max: int,
                   costs: dict[tuple[str, str], Any]) -> pd.DataFrame:
    """The best projected speedup of every family per GPU shape and λ, with the same replayed trees as the CPU's
    projection (`logbooks`: λ → the scored prompts' logbook) and each shape's measured cost model (PCT's s_d/s_t: its
    one-token forward ratio), the CPU's projection beside: shape, regime, λ, agreement, family, spec, τ, γ, speedup, cpu_speedup
    (`costs`: `gpu_cost_models`'; `results`: `quality.Quality`s, whose logbook names their C2T classifier)."""
    rows = []
    for q in results:
        cpu = q.projected.groupby("family").speedup.max() if len(q.projected) else pd.Series(dtype=float)
        for (shape, regime), cost in costs.items():
            table = projected(logbooks[q.weight], projection_policies(K, d_max, q.logbook, cost.ratio), cost)
            if not len(table):
                continue
            best = table.loc[table.groupby("family").speedup.idxmax()]
            rows += [{"shape": shape, "regime": regime, "weight": q.weight, "agreement": q.agreement["agreement"],
                      "family": r.family, "spec": r.spec, "tau": r.tau, "gamma": r.gamma, "speedup": r.speedup,
                      "cpu_speedup": float(cpu.get(r.family, math.nan))} for r in best.itertuples()]
    return pd.DataFrame(rows)


def gpu_lines(table: pd.DataFrame, device: str, families: Sequence[str] = ("DySpec", "EAGLE-2", "C2T", "PCT")
              ) -> list[str]:
    """One sentence per shape, regime and agreement: "on DEVICE with a SHAPE-shaped target (REGIME), at top-1
    agreement X, DySpec / EAGLE-2 / C2T / PCT project Y× vs our AR loop there" (the families measured; no HF
    generate ran on that GPU beside the cost model, so no ratio to it)."""
    out = []
    for (shape, regime, agreement), group in table.groupby(["shape", "regime", "agreement"], sort=False):
        best = group.set_index("family").speedup
        named = [f for f in families if f in best.index]
        out.append(f"on {device} with a {shape}-shaped target ({REGIME_WORDS.get(regime, regime)}), at top-1 "
                   f"agreement {agreement:.2f}, {' / '.join(named)} project "
                   f"{' / '.join(f'{best[f]:.2f}' for f in named)}× {VS_AR} there")
    return out


# --- the projection against live decoding --------------------------------------------------------------------

def residual_rows(cost) -> list[dict[str, Any]]:
    """The step model's residuals on its own live steps (`speed.stepmodel.StepFit.residuals`), one row per term and
    one for the whole step; [] without a step model."""
    if cost.step is None:
        return []
    return [{"term": term, "median": r["median"], "p90": r["p90"], "pooled": r["total"],
             "live steps": cost.step.n_steps} for term, r in cost.step.residuals.items() if r]


def live_check_policies(best: pd.DataFrame, K: int, d_max: int, depth: int, pct_ratio: float,
                        classifier: Optional[str]) -> dict[str, Policy]:
    """Notebook 11's live check at λ = 0, label → policy: our AR loop, chain-2, PCT (at `pct_ratio`, this machine's
    s_d/s_t), DySpec's threshold tree, EAGLE-2 at the logbook's K, SGLang's rule and C2T (with `classifier`, the
    λ 0 logbook's). C2T is the setting the projection ranks best at λ 0 (`best`: `best_by_family`), so one that
    replays: C2T keeps nodes by its classifier, not by P, so a fixed setting can keep a node the logbook's beam did
    not expand (β 0.5, topk 8 did, on the default logbook). Without such a row, C2T at β 0.5 stands in and the check
    reports it not replayable."""
    policies = {AR: autoregressive(), "chain-2": Chain(k=2),
                "PCT": PCT(ratio=round(pct_ratio, 3), k=5, d_max=min(10, d_max)),
                "DySpec threshold": DySpecThreshold(t=0.05, K=min(8, K), d_max=d_max),
                "EAGLE-2": Eagle2(K=K, d_max=min(6, depth), N=16),
                "SGLang": parse_strategy("sglang:steps=3,topk=4,tokens=8")}
    ranked = best[(best.weight == 0.0) & (best.family == "C2T")].spec if len(best) else []
    if len(ranked):
        policies["C2T"] = parse_strategy(ranked.iloc[0])
    elif classifier:
        policies["C2T"] = C2T(beta=0.5, K=min(8, K), d_max=min(6, depth), topk=8, classifier=classifier)
    return policies


def check_disjoint(scored: Sequence[str], fitted: Sequence[str], what: str) -> None:
    """One clear error when prompts a component was trained or fitted on (`fitted`, prompt keys) are among those
    it is scored on (`scored`): no component is judged on its own training prompts."""
    both = sorted(set(scored) & set(fitted))
    if both:
        raise SpectreeError(f"{what} would be scored on {len(both)} of its own training prompts ({', '.join(both[:4])}"
                            f"{', …' if len(both) > 4 else ''}): score it on others (a prompt offset, 'mtbench:8@8')")


def live_by_run(runs: Sequence[Any]) -> pd.DataFrame:
    """`speed.bench.summarize_runs` of each timed pass (`Run.repeat`) apart, one frame with a `run` column: what the
    projection check compares run by run."""
    from spectree.speed.bench import summarize_runs

    passes = sorted({r.repeat for r in runs})
    return pd.concat([summarize_runs([r for r in runs if r.repeat == k]).assign(run=k) for k in passes],
                     ignore_index=True)


def projection_check(live: pd.DataFrame, projected_rows: pd.DataFrame, labels: dict[str, str], n_prompts: int,
                     tolerance: float = 0.10, min_runs: int = MIN_RUNS) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The projection against live runs of the same prompts at λ = 0: `live` is one `summarize_runs` frame per run
    (tokens/s per strategy, AR included; a `run` column, `live_by_run`), `projected_rows` `projected`'s rows for the
    same policies, `labels` policy label → spec. Both speedups are over plain decoding through our loop on the same
    kernels, and both are of the decoding steps: the live rate leaves out each run's prefill (`prefill_frac`), which
    no tree changes and the replayed steps do not hold. Returns (one row per run and policy, the claim: the largest
    |projected / live − 1| over every run and policy ≤ tolerance, our bar). A run is one unit of the comparison's
    spread, the prompts are its units of evidence (`n_prompts`, each run decodes them all): fewer than `min_runs`
    runs leave it inconclusive, whatever the error."""
    live = live if "run" in live.columns else live.assign(run=0)
    proj = projected_rows.set_index("spec").speedup
    rows = []
    for run, one in live.groupby("run", sort=True):
        steps_rate = (one.tokens_per_s / (1 - one.prefill_frac)).set_axis(one.strategy)
        for label, spec in labels.items():
            live_x = float(steps_rate[label] / steps_rate[AR])
            p = float(proj.get(spec, math.nan))
            rows.append({"run": int(run), "policy": label, "spec": spec, "live": live_x, "projected": p,
                         "error": p / live_x - 1})
    table = pd.DataFrame(rows, columns=["run", "policy", "spec", "live", "projected", "error"])
    runs = int(table.run.nunique())
    worst = float(table.error.abs().max()) if len(table) else math.nan
    what = f"the largest |projected / live − 1| over {runs} run{'s' * (runs != 1)} and every policy"
    ev = interval_rule(worst, worst, worst, tolerance, n_prompts, what, above=False, method="the worst run's")
    if runs < min_runs:
        ev = Evidence(INCONCLUSIVE, f"{ev.rule}; {runs} < {min_runs} runs: inconclusive", ev.n, worst, worst, worst,
                      tolerance, False)
    at = table.loc[table.error.abs().idxmax()] if len(table) and table.error.notna().any() else None
    by_policy = table.groupby("policy", sort=False).agg(live=("live", "mean"), projected=("projected", "first"),
                                                        lo=("error", "min"), hi=("error", "max"))
    ours = "; ".join(f"{p}: projected {r.projected:.2f}× vs live {r.live:.2f}× ({r.lo:+.0%} to {r.hi:+.0%})"
                     if r.projected == r.projected else f"{p}: not replayable on this logbook"
                     for p, r in by_policy.reindex(list(labels)).iterrows())
    if at is not None:
        ours = f"worst {at.error:+.0%} ({at.policy}, run {int(at.run) + 1} of {runs}); " + ours
    ar_hf = ar_over_hf(live)
    ours += f" (speedups {VS_AR}, decoding steps only" + (f"; our AR loop {ar_hf:.2f}× {VS_HF} live, prefill in)"
                                                          if math.isfinite(ar_hf) else ")")
    c = claim(f"projected speedup within {tolerance:.0%} of the live one at λ = 0, every run", "—", ours, ev,
              kind=BAR, rows=table.to_dict("records"), runs=runs,
              goal=f"|projected / live − 1| ≤ {tolerance:g} in each of ≥ {min_runs} live runs, on prompts neither the "
                   "step model nor C2T's classifier was fitted on (issues 26, 46, 66: chain, PCT, DySpec threshold, "
                   "EAGLE-2, C2T, the SGLang rule)")
    return table, c


__all__ = ["SPEED_LINES", "AR", "MIN_RUNS", "REGIME_WORDS", "projection_policies", "projected", "best_by_family",
           "ar_over_hf", "best_projected",
           "agreement_needed", "gpu_cost_models", "gpu_projection", "gpu_lines", "residual_rows",
           "live_check_policies", "check_disjoint", "live_by_run", "projection_check"]
