"""The draft-quality sweep behind notebook 11: the papers' claims re-checked as the draft's top-1 agreement rises.

Our trained draft agrees with the target's top-1 far less often than the papers' drafts do, so a claim that does
not hold here may fail because it is wrong or because the draft is weak. The synthetic draft `mix:λ:DRAFT`
(`drafts.mix`: q_λ = (1 − λ)·q_draft + λ·p_target at every node) raises the agreement step by step on the real
target. For each λ one logbook (the full trees of notebook 02) gives:

- `agreement`: the top-1 agreement at draft position 1 (the root's top child is the target's greedy token);
- `strategy_claims`: every replay claim of notebook 02, with C2T's classifier retrained on that logbook;
- `analysis_claims`: the readings of notebooks 04–07 (entropy × rank bias, ECE, Spearman ρ, the crossover
  entropy) on the logbook's examined tokens;
- `projected`: the speedup a draft of that quality would give on this machine over plain decoding through our
  loop on the same kernels — replay's τ and trees priced by the real pair's step model (`reports.explorer.score`).

`flips` turns the per-λ verdicts into one row per claim: its verdict at each agreement and the agreement from
which it holds. Nothing here is tuned to a prompt set: every reading takes the logbook it is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from spectree.analysis import calibration, entropy_match, stats, sweeps
from spectree.analysis.claims import FAILS, HOLDS, claim, interval_rule
from spectree.analysis.sweep_claims import collect_claims
from spectree.analysis.token_tables import logbook_tokens
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.replay.logbook import LogConfig, LoggedPrompt, notebook_logbook, read_logbook
from spectree.replay.replay import as_forest
from spectree.reports.explorer import score
from spectree.strategies import C2T, PCT, Chain, DySpec, DySpecThreshold, Eagle2, Kary, autoregressive, parse_strategy
from spectree.strategies.c2t import ClassifierTraining
from spectree.strategies.sequoia import acceptance_vector

SPEED_LINES = (1.3, 2.0)  # the issue's goal and the papers' regime


def mix_pair(pair: str, weight: float) -> str:
    """The pair whose draft is `pair`'s draft mixed with its target at λ = `weight`: `TARGET+mix:λ:DRAFT`; the pair
    itself at λ = 0 (mix:0 drafts exactly as the real draft, tests/drafts/test_mix.py), so λ = 0 shares the real
    pair's logbook and caches."""
    from spectree.drafts.mix import check_weight
    from spectree.drafts.pairs import check_pair_name

    weight = check_weight(weight)
    if weight == 0.0:
        return pair
    spec = check_pair_name(pair)
    if spec.draft.startswith("mix:"):
        raise SpectreeError(f"pair '{pair}' already has a mix draft: give the real pair, λ is set per run")
    return f"{spec.target}+mix:{weight:g}:{spec.draft}"


def mix_models(models: tuple, weight: float) -> tuple:
    """(target, drafter, tokenizer) of `mix_pair` built on already loaded models (the target is shared: the mix
    draft keeps its own cache); the models themselves at λ = 0."""
    from spectree.core.decode import as_drafter
    from spectree.drafts.mix import MixDrafter, check_weight

    target, draft, tok = models
    return models if check_weight(weight) == 0.0 else (target, MixDrafter(as_drafter(draft), target, weight), tok)


def quality_logbook(models: tuple, pair: str, weight: float, prompts: str, cfg: LogConfig
                    ) -> tuple[list[LoggedPrompt], str]:
    """The logbook of `prompts` drafted at λ = `weight` (`cfg` with the pair set to `mix_pair`), logged if missing,
    resumed if cut short (`notebook_logbook`); returns (its logged prompts, its folder's name)."""
    from dataclasses import replace

    out = notebook_logbook(prompts, replace(cfg, pair=mix_pair(pair, weight)), models=mix_models(models, weight))
    return read_logbook(out), out.name


def agreement(tokens: pd.DataFrame) -> dict[str, float]:
    """Top-1 agreement at draft position 1 from a logbook's token table (`logbook_tokens`): the share of logged
    positions whose draft's top token is the target's greedy next token, with its 95% Wilson interval (scipy) and
    the number of positions."""
    first = tokens[(tokens.depth == 1) & (tokens["rank"] == 0)]
    k, n = int(first.accept.sum()), len(first)
    if n == 0:
        return {"agreement": math.nan, "low": math.nan, "high": math.nan, "positions": 0}
    ci = scipy_stats.binomtest(k, n).proportion_ci(method="wilson")
    return {"agreement": k / n, "low": float(ci.low), "high": float(ci.high), "positions": n}


def flip_weights(models: tuple, prompts: Sequence, positions: int) -> np.ndarray:
    """float [n]: at each of the first `positions` greedy positions of every prompt, the smallest λ from which the
    top token of mix:λ's root distribution (draft position 1) is the target's greedy token g; 0 where the real
    draft's already is. Per position agreement only switches on as λ grows (q_λ(g) − q_λ(y) is linear in λ and
    ≥ 0 at λ = 1), so mix:λ's top-1 agreement on these positions is the share of them ≤ λ."""
    import torch

    from spectree.core.decode import greedy_continuation, walk_continuation
    from spectree.prompts import chat_ids

    target, draft, tok = models
    out = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = chat_ids(tok, prompt.text)
            cont, n_valid = greedy_continuation(target, ids, positions, 0, (tok.eos_token_id,))
            for prefix, root_logits, _, target_logits in walk_continuation(target, draft, ids, cont, n_valid):
                q = torch.softmax(root_logits.double().cpu(), -1)  # [V] the real draft at the root
                p = torch.softmax(target_logits[prefix - 1].double(), -1)  # [V] the target there
                g = cont[prefix - len(ids)]
                ahead, behind = q - q[g], p[g] - p  # [V]: the draft's lead of y over g, the target's of g over y
                flip = torch.where(ahead > 0, ahead / (ahead + behind), torch.zeros_like(ahead))
                out.append(float(flip.max()))
    return np.array(out)


def weights_for(agreements: Sequence[float], flips: np.ndarray, step: float = 1e-3) -> dict[float, float]:
    """{target agreement: λ}: the smallest λ (on a grid of `step`, strictly past the flip) at which the share of
    positions whose flip weight (`flip_weights`) is below λ reaches each target agreement."""
    if len(flips) == 0:
        raise SpectreeError("no positions to calibrate the mix weights on: give prompts that generate tokens")
    ordered = np.sort(flips)
    out = {}
    for a in agreements:
        if not 0.0 < a <= 1.0:
            raise SpectreeError(f"a target agreement must be in (0, 1], got {a}")
        need = ordered[max(int(math.ceil(a * len(ordered))) - 1, 0)]
        out[float(a)] = float(min(1.0, (math.floor(need / step) + 1) * step)) if need > 0 else 0.0
    return out


def mix_weights(models: tuple, prompts: str, positions: int, agreements: Sequence[float]
                ) -> tuple[list[float], dict[float, float]]:
    """The λ logged (0, the real draft, then each distinct λ reaching a target agreement on the first `positions`
    greedy positions of `prompts`) and {agreement: λ}: one rule for notebooks 11 and 13, which share the logbooks."""
    from spectree.prompts import parse_prompt_spec

    by_agreement = weights_for(agreements, flip_weights(models, parse_prompt_spec(prompts), positions))
    return [0.0] + sorted(set(by_agreement.values()) - {0.0}), by_agreement


@dataclass(frozen=True)
class SweepSettings:
    """Notebook 02's sweep settings (its parameters of the same names)."""

    K: int = 10
    d_max: int = 8
    depth: int = 6
    eagle2_N: Sequence[int] = (5, 10, 15, 20, 30, 40)
    c2t_betas: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    c2t_topks: Sequence[int] = (0, 4, 6, 8)
    budgets: Sequence[int] = (8, 16, 32, 64)
    widths: Sequence[int] = (1, 2, 3, 4, 5)
    pct_ratio: float = 0.1
    train_fraction: float = 0.5
    classifier_epochs: int = 10


def strategy_claims(logbook: list[LoggedPrompt], name: str, pair: str, s: SweepSettings
                    ) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Notebook 02's claims on this logbook: C2T's classifier trained on its first prompts (saved as
    data/c2t/<name>), every standard sweep replayed on the others. Returns (claims, sweep table)."""
    train, held = sweeps.split_logbook(logbook, s.train_fraction)
    sweeps.train_c2t(train, name, ClassifierTraining(epochs=s.classifier_epochs), pair=pair)
    policies = sweeps.standard_sweeps(s.K, s.d_max, s.depth, s.eagle2_N, s.c2t_betas, s.c2t_topks, s.budgets,
                                      s.widths, s.pct_ratio, classifier=name, acceptance=acceptance_vector(train, s.K))
    table = sweeps.sweep(held, policies, desc=f"replay sweep {name}")
    return collect_claims(table), table


def analysis_claims(tokens: pd.DataFrame, n_resamples: int = 1000
                    ) -> tuple[list[dict[str, Any]], dict[str, Optional[float]]]:
    """The readings of notebooks 04–07 on a logbook's token table (`logbook_tokens`; greedy acceptance): C2T
    Fig. 2's top-1 bias at high and low entropy, EDD's ECE, DySpec Fig. 2's Spearman ρ, Gunjur's crossover
    entropy. Returns (claims, {reading: value})."""
    cells = stats.cell_table(tokens, min_count=30)
    bias = stats.c2t_claims(tokens, cells, n_resamples=n_resamples)
    diagrams, _ = calibration.calibration_diagrams(tokens, n_resamples=n_resamples)
    calibrated = diagrams[0]["claim"]
    dyspec, rhos = stats.acceptance_report({"greedy": tokens})
    top1 = entropy_match.top1_tokens(tokens)
    rates = entropy_match.match_rate_by_entropy(top1.entropy, top1.accept)
    crossover = entropy_match.crossover_entropy(rates, 20)
    gunjur = entropy_match.gunjur_claims(top1, rates, crossover, 1.0, min_count=20, n_resamples=n_resamples)
    readings = {"top-1 acceptance − p, entropy > 3 nats": bias[0]["details"]["accept_minus_p"],
                "top-1 acceptance − p, entropy ≤ 1 nat": bias[1]["details"]["accept_minus_p"],
                "ECE of draft confidence": diagrams[0]["stats"]["ece"],
                "Spearman ρ(p, acceptance)": rhos["greedy"]["accept"],
                "Spearman ρ(p, target p)": rhos["greedy"]["target_prob"],
                "crossover entropy (nats)": crossover}
    return bias + [calibrated] + dyspec + gunjur, readings


def projection_policies(s: SweepSettings, classifier: Optional[str], pct_ratio: float) -> dict[str, list[Policy]]:
    """family → policies of growing tree size, replayable on a logbook of `s`'s K and d_max, to project."""
    k, d = min(8, s.K), s.d_max
    families = {"chain": [Chain(k=n) for n in range(1, min(8, d) + 1)],
                "static k-ary": [Kary(b=2, d=n) for n in range(2, min(4, d) + 1)],
                # at the logbook's K: its own top-K expansion is logged (`replay.logtree`), so it always replays
                "EAGLE-2": [Eagle2(K=s.K, d_max=min(6, d), N=n) for n in (4, 8, 16, 32, 64)],
                "DySpec": [DySpec(m=m, K=k, d_max=d) for m in (4, 8, 16, 32, 64)],
                "DySpec threshold": [DySpecThreshold(t=t, K=k, d_max=d) for t in (0.4, 0.2, 0.1, 0.05, 0.02)],
                "PCT": [PCT(ratio=round(pct_ratio, 3), k=w, d_max=d) for w in (1, 2, 3, 5)]}
    if classifier:
        families["C2T"] = [C2T(beta=b, K=k, d_max=min(6, d), topk=t, classifier=classifier)
                           for b in (0.3, 0.5, 0.7) for t in (4, 8)]
    return families


def projected(logbook: list[LoggedPrompt], families: dict[str, list[Policy]], cost) -> pd.DataFrame:
    """One row per replayable policy: family, spec, τ, γ and the projected speedup on this machine
    (`reports.explorer.score`)."""
    forest, rows = as_forest(logbook), []
    for family, policies in families.items():
        for policy in policies:
            try:
                s = score(forest, policy, cost)
            except SpectreeError:  # not replayable on this logbook's trees
                continue
            rows.append({"family": family, "spec": policy.spec, "tau": s["tau"], "gamma": s["gamma"],
                         "speedup": s["speedup"]})
    return pd.DataFrame(rows)


@dataclass
class Quality:
    """Everything notebook 11 reads at one λ."""

    weight: float
    logbook: str  # its folder's name
    agreement: dict[str, float]
    claims: list[dict[str, Any]]
    readings: dict[str, Optional[float]]
    projected: pd.DataFrame
    draft_tokens: dict[str, int] = field(default_factory=dict)  # logged nodes, and those a verifier examined


def measure(logbook: list[LoggedPrompt], name: str, pair: str, weight: float, s: SweepSettings, cost,
            n_resamples: int = 1000) -> Quality:
    """Every reading of one λ's logbook (`name`: its folder's, which also names its C2T classifier)."""
    tokens = logbook_tokens(logbook)  # one token table for the agreement and the 04–07 readings
    strategy, _ = strategy_claims(logbook, name, pair, s)
    analysis, readings = analysis_claims(tokens, n_resamples)
    families = projection_policies(s, name, cost.ratio)
    counts = {"logged nodes": int(sum((lp.nodes.node > 0).sum() for lp in logbook)),
              "examined tokens": int(tokens.examined.sum())}
    return Quality(weight, name, agreement(tokens), strategy + analysis, readings, projected(logbook, families, cost),
                   counts)


def by_agreement(results: Sequence[Quality]) -> list[Quality]:
    return sorted(results, key=lambda q: (q.agreement["agreement"], q.weight))


def flips(results: Sequence[Quality]) -> pd.DataFrame:
    """One row per claim: its verdict at each agreement (columns 'agreement 0.38 (λ 0)', …, lowest first) and
    `holds from`: the lowest agreement from which it holds at every higher one measured ("everywhere" if it holds
    at the lowest; at the highest, "never in range" if it does not hold there, "undecided at the best draft" if
    it was inconclusive or not judged there)."""
    ordered = by_agreement(results)
    cols = [f"agreement {q.agreement['agreement']:.2f} (λ {q.weight:g})" for q in ordered]
    verdicts: dict[str, list[str]] = {}
    for i, q in enumerate(ordered):
        for c in q.claims:
            verdicts.setdefault(c["name"], ["—"] * len(ordered))[i] = c["verdict"]
    rows = []
    for name, vs in verdicts.items():
        tail = len(vs)
        while tail > 0 and vs[tail - 1] == HOLDS:
            tail -= 1
        start = (("never in range" if vs[-1] == FAILS else "undecided at the best draft")
                 if tail == len(vs) else "everywhere" if tail == 0 else
                 f"{ordered[tail].agreement['agreement']:.2f} (λ {ordered[tail].weight:g})")
        rows.append({"claim": name, **dict(zip(cols, vs)), "holds from": start})
    return pd.DataFrame(rows)


def readings_table(results: Sequence[Quality]) -> pd.DataFrame:
    """Long table of the 04–07 readings: λ, agreement, reading, value (for small multiples)."""
    return pd.DataFrame([{"weight": q.weight, "agreement": q.agreement["agreement"], "reading": k, "value": v}
                         for q in results for k, v in q.readings.items()])


def best_by_family(results: Sequence[Quality]) -> pd.DataFrame:
    """Per λ and family, the policy of the highest projected speedup: λ, agreement, family, spec, τ, γ, speedup."""
    frames = []
    for q in results:
        if len(q.projected):
            best = q.projected.loc[q.projected.groupby("family").speedup.idxmax()]
            frames.append(best.assign(weight=q.weight, agreement=q.agreement["agreement"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def agreement_needed(best: pd.DataFrame, speedup: float) -> dict[str, Any]:
    """The top-1 agreement at which the best projected speedup (over every family) first reaches `speedup`,
    linearly interpolated between the measured agreements; None where it is never reached in range."""
    top = best.groupby("agreement").speedup.max().sort_index()
    x, y = top.index.to_numpy(float), top.to_numpy(float)
    above = np.flatnonzero(y >= speedup)
    if len(above) == 0:
        return {"speedup": speedup, "agreement": None,
                "text": f"not reached in range (best {y.max():.2f}× at agreement {x[y.argmax()]:.2f})" if len(y) else
                        "no projection"}
    i = int(above[0])
    if i == 0:
        return {"speedup": speedup, "agreement": float(x[0]), "text": f"≤ {x[0]:.2f} (already at the lowest)"}
    a = float(np.interp(speedup, [y[i - 1], y[i]], [x[i - 1], x[i]]))
    return {"speedup": speedup, "agreement": a, "text": f"≥ {a:.2f}"}


REGIME_WORDS = {"eager": "eager PyTorch", "graphs": "CUDA graphs"}  # `speed.costmodel.REGIMES`, as lines name them


def gpu_cost_models(path: Path) -> tuple[dict[tuple[str, str], Any], str]:
    """((shape, regime) → the cost model the GPU checklist measured for it, the device's name) from its
    costmodel.json (`reports.gpu_check`, committed under figures/gpu_check/), for each regime it measured: "eager"
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


def gpu_projection(results: Sequence[Quality], logbooks: dict[float, list[LoggedPrompt]], s: SweepSettings,
                   costs: dict[str, Any]) -> pd.DataFrame:
    """The best projected speedup of every family per GPU shape and λ, with the same replayed trees as the CPU's
    projection and each shape's measured cost model (PCT's s_d/s_t from it too), the CPU's projection beside:
    shape, regime, λ, agreement, family, spec, τ, γ, speedup, cpu_speedup (`costs`: `gpu_cost_models`')."""
    rows = []
    for q in results:
        cpu = q.projected.groupby("family").speedup.max() if len(q.projected) else pd.Series(dtype=float)
        for (shape, regime), cost in costs.items():
            table = projected(logbooks[q.weight], projection_policies(s, q.logbook, cost.ratio), cost)
            if not len(table):
                continue
            best = table.loc[table.groupby("family").speedup.idxmax()]
            rows += [{"shape": shape, "regime": regime, "weight": q.weight, "agreement": q.agreement["agreement"], "family": r.family,
                      "spec": r.spec, "tau": r.tau, "gamma": r.gamma, "speedup": r.speedup,
                      "cpu_speedup": float(cpu.get(r.family, math.nan))} for r in best.itertuples()]
    return pd.DataFrame(rows)


def gpu_lines(table: pd.DataFrame, device: str, families: Sequence[str] = ("DySpec", "EAGLE-2", "C2T", "PCT")
              ) -> list[str]:
    """One sentence per shape, regime and agreement: "on DEVICE with a SHAPE-shaped target (REGIME), at top-1
    agreement X, DySpec / EAGLE-2 / C2T / PCT project Y×" (the families measured)."""
    out = []
    for (shape, regime, agreement), group in table.groupby(["shape", "regime", "agreement"], sort=False):
        best = group.set_index("family").speedup
        named = [f for f in families if f in best.index]
        out.append(f"on {device} with a {shape}-shaped target ({REGIME_WORDS.get(regime, regime)}), at top-1 "
                   f"agreement {agreement:.2f}, {' / '.join(named)} project {' / '.join(f'{best[f]:.2f}' for f in named)}×")
    return out


def residual_rows(cost) -> list[dict[str, Any]]:
    """The step model's residuals on its own live steps (`speed.stepmodel.StepFit.residuals`), one row per term and
    one for the whole step; [] without a step model."""
    if cost.step is None:
        return []
    return [{"term": term, "median": r["median"], "p90": r["p90"], "pooled": r["total"],
             "live steps": cost.step.n_steps} for term, r in cost.step.residuals.items() if r]


def live_check_policies(best: pd.DataFrame, s: SweepSettings, pct_ratio: float, classifier: Optional[str]
                        ) -> dict[str, Policy]:
    """Notebook 11's live check at λ = 0, label → policy: our AR loop, chain-2, PCT, DySpec's threshold tree, EAGLE-2
    at the logbook's K, SGLang's rule and C2T (with `classifier`, the λ 0 logbook's). C2T is the setting the
    projection ranks best at λ 0 (`best`: `best_by_family`), so one that replays: C2T keeps nodes by its classifier,
    not by P, so a fixed setting can keep a node the logbook's beam did not expand (β 0.5, topk 8 did, on the default
    logbook). Without such a row, C2T at β 0.5 stands in and the check reports it not replayable."""
    policies = {"AR (our loop)": autoregressive(), "chain-2": Chain(k=2),
                "PCT": PCT(ratio=round(pct_ratio, 3), k=5, d_max=min(10, s.d_max)),
                "DySpec threshold": DySpecThreshold(t=0.05, K=min(8, s.K), d_max=s.d_max),
                "EAGLE-2": Eagle2(K=s.K, d_max=min(6, s.depth), N=16),
                "SGLang": parse_strategy("sglang:steps=3,topk=4,tokens=8")}
    ranked = best[(best.weight == 0.0) & (best.family == "C2T")].spec if len(best) else []
    if len(ranked):
        policies["C2T"] = parse_strategy(ranked.iloc[0])
    elif classifier:
        policies["C2T"] = C2T(beta=0.5, K=min(8, s.K), d_max=min(6, s.depth), topk=8, classifier=classifier)
    return policies


def projection_check(live: pd.DataFrame, projected_rows: pd.DataFrame, labels: dict[str, str], n_prompts: int,
                     tolerance: float = 0.10) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The projection against a live run of the same prompts at λ = 0: `live` is `speed.bench.summarize_runs`
    (tokens/s per strategy, "AR (our loop)" included), `projected_rows` `projected`'s rows for the same policies,
    `labels` policy label → spec. Both speedups are over plain decoding through our loop on the same kernels, and
    both are of the decoding steps: the live rate leaves out each run's prefill (`prefill_frac`), which no tree
    changes and the replayed steps do not hold. Returns (table, claim: |projected / live − 1| ≤ tolerance for every
    policy)."""
    steps_rate = (live.tokens_per_s / (1 - live.prefill_frac)).set_axis(live.strategy)
    ar = steps_rate["AR (our loop)"]
    rows = []
    for label, spec in labels.items():
        live_x = float(steps_rate[label] / ar)
        proj = projected_rows.set_index("spec").speedup.get(spec, math.nan)
        rows.append({"policy": label, "spec": spec, "live": live_x, "projected": float(proj),
                     "error": float(proj / live_x - 1)})
    table = pd.DataFrame(rows)
    worst = float(table.error.abs().max()) if len(table) else math.nan
    ev = interval_rule(worst, worst, worst, tolerance, n_prompts, "the largest |projected / live − 1|", above=False,
                       method="one run's")
    c = claim(f"projected speedup within {tolerance:.0%} of the live one at λ = 0", "—",
              ", ".join(f"{r.policy}: projected {r.projected:.2f}× vs live {r.live:.2f}× ({r.error:+.0%})"
                        if r.projected == r.projected else f"{r.policy}: not replayable on this logbook"
                        for r in table.itertuples()), ev, rows=table.to_dict("records"),
              goal=f"|projected / live − 1| ≤ {tolerance:g} on prompts the step model was not fitted on (issues 26, "
                   "46: chain, PCT, DySpec threshold, EAGLE-2, C2T, the SGLang rule)")
    return table, c


__all__ = ["mix_pair", "mix_models", "quality_logbook", "agreement", "flip_weights", "weights_for", "mix_weights",
           "SweepSettings", "strategy_claims", "analysis_claims", "projection_policies", "projected", "Quality", "measure",
           "flips", "readings_table", "best_by_family", "agreement_needed", "REGIME_WORDS", "gpu_cost_models", "gpu_projection",
           "gpu_lines", "residual_rows", "live_check_policies", "projection_check", "SPEED_LINES"]
