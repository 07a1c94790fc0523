"""The draft-quality sweep behind notebook 11: the papers' claims re-checked as the draft's top-1 agreement rises.

Our trained draft agrees with the target's top-1 far less often than the papers' drafts do, so a claim that does
not hold here may fail because it is wrong or because the draft is weak. The synthetic draft `mix:λ:DRAFT`
(`drafts.mix`: q_λ = (1 − λ)·q_draft + λ·p_target at every node) raises the agreement step by step on the real
target. For each λ one logbook (the full trees of notebook 02) gives:

- `agreement`: the top-1 agreement at draft position 1 (the root's top child is the target's greedy token);
- `strategy_claims`: every replay claim of notebook 02 (`sweep_claims.collect_claims`, PCT at the paper's s_d/s_t),
  with C2T's classifier retrained on that logbook's first prompts and every claim scored on the others (`split`);
- `analysis_claims`: the claims of notebooks 04–07 by their own functions and settings, on the logbook's examined
  tokens and, at their temperatures, on the depth-1 tables along its greedy output (`temperature_tables`);
- `projected` (`projection`): the speedup a draft of that quality would give on this machine.

`quality.quality_readings` turns the per-λ verdicts into one row and one reading per claim (the "draft quality"
factor of its diagnosis in RESULTS.md). Nothing here is tuned to a prompt set: every reading takes the logbook it
is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from spectree.analysis import calibration, entropy_match, stats, sweeps
from spectree.analysis.calibration import EDD_13B_RATIO
from spectree.analysis.sweep_claims import collect_claims
from spectree.analysis.token_tables import logbook_tokens
from spectree.core.errors import SpectreeError
from spectree.replay.logbook import LogConfig, LoggedPrompt, notebook_logbook, read_logbook
from spectree.strategies.c2t import ClassifierTraining
from spectree.strategies.sequoia import acceptance_vector



def mix_pair(pair: str, weight: float) -> str:
    """The pair whose draft is `pair`'s draft mixed with its target at λ = `weight`: `TARGET+mix:λ:DRAFT`; the pair
    itself at λ = 0 (mix:0 drafts exactly as the real draft, tests/drafts/test_mix.py), so λ = 0 shares the real
    pair's logbook and caches."""
    from spectree.drafts.mix import check_weight
    from spectree.models.pairs import check_pair_name

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


def mix_weights(models: tuple, pair: str, prompts: str, positions: int, agreements: Sequence[float]
                ) -> tuple[list[float], dict[float, float]]:
    """The λ logged (0, the real draft, then each distinct λ reaching a target agreement on the first `positions`
    greedy positions of `prompts`) and {agreement: λ}: one rule for notebooks 11 and 13, which share the logbooks
    and, through `cached_flips`, the flip weights the rule reads."""
    by_agreement = weights_for(agreements, cached_flips(models, pair, prompts, positions))
    return [0.0] + sorted(set(by_agreement.values()) - {0.0}), by_agreement


FLIPS_FORMAT = 1  # bump when `flip_weights` reads its positions otherwise


def cached_flips(models: tuple, pair: str, prompts: str, positions: int) -> np.ndarray:
    """`flip_weights` of `pair` (loaded as `models`) on `prompts`, cached in data/cache/mix: an internal cache keyed
    by what it is computed from (the pair's draft and target identities, their precision and device, the prompts'
    texts, the positions), so notebook 13 reads what notebook 11 computed (a greedy continuation and a walk along
    it: about 45 s for 16 prompts × 32 positions on the 2-core host)."""
    from spectree.core.manifest import beside, digest, reuse_or_rebuild
    from spectree.core.paths import atomic_write_npy, cache_dir
    from spectree.models.pairs import as_pair, draft_digest, target_digest
    from spectree.prompts import parse_prompt_spec

    parsed, named = parse_prompt_spec(prompts), as_pair(pair)
    manifest = {"format": FLIPS_FORMAT, "pair": named.name, "draft": draft_digest(named),
                "target": target_digest(named), "placed": [str(models[0].dtype), models[0].device.type],
                "prompts": [p.key for p in parsed], "texts": digest([p.text for p in parsed]), "positions": positions}
    path = cache_dir() / "mix" / f"{named.tag}-{digest(manifest)}.npy"

    def build() -> np.ndarray:
        flips = flip_weights(models, parsed, positions)
        atomic_write_npy(path, flips)
        return flips

    return reuse_or_rebuild(beside(path), manifest, lambda: np.load(path) if path.exists() else None, build)


@dataclass(frozen=True)
class SweepSettings:
    """Notebook 02's sweep settings (its parameters of the same names). `pct_ratio` is PCT's s_d/s_t in the
    claims: the paper's, as notebook 02 reads them, with `pct_ratio_machine` a second reading; the projections
    price PCT at this machine's (`measure`'s `speed_ratio`)."""

    K: int = 10
    d_max: int = 8
    depth: int = 6
    eagle2_N: Sequence[int] = (5, 10, 15, 20, 30, 40)
    c2t_betas: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    c2t_topks: Sequence[int] = (0, 4, 6, 8)
    budgets: Sequence[int] = (8, 16, 32, 64)
    widths: Sequence[int] = (1, 2, 3, 4, 5)
    pct_ratio: float = sweeps.PCT_RATIO_PAPER  # 0.037: EDD's 7B pair (EDD l.1388), as notebook 02 reads its claims
    train_fraction: float = 0.5
    classifier_epochs: int = 10
    pct_ratio_machine: Optional[float] = None  # this machine's s_d/s_t: a second, labelled reading of PCT's claims


def split(logbook: list[LoggedPrompt], s: SweepSettings) -> tuple[list[LoggedPrompt], list[LoggedPrompt]]:
    """(the prompts C2T's classifier trains on, the prompts every tree claim, projection and live check scores):
    the first `train_fraction` of each prompt set, and the rest (`sweeps.split_logbook`). Both sides are the whole
    logbook only when one would be empty (a one-prompt quick run: in-sample, and its claims say so by their n)."""
    return sweeps.split_logbook(logbook, s.train_fraction)


def prompt_ids(logbook: list[LoggedPrompt]) -> list[str]:
    return [lp.prompt.key for lp in logbook]


def strategy_claims(train: list[LoggedPrompt], held: list[LoggedPrompt], name: str, pair: str, s: SweepSettings
                    ) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Notebook 02's claims (`sweep_claims.collect_claims`) on this logbook: C2T's classifier trained on `train`
    (saved as data/c2t/<name>), every standard sweep replayed on `held`. Returns (claims, sweep table)."""
    sweeps.train_c2t(train, name, ClassifierTraining(epochs=s.classifier_epochs), pair=pair)
    policies = sweeps.standard_sweeps(s.K, s.d_max, s.depth, s.eagle2_N, s.c2t_betas, s.c2t_topks, s.budgets,
                                      s.widths, s.pct_ratio, classifier=name, acceptance=acceptance_vector(train, s.K),
                                      pct_ratio_machine=s.pct_ratio_machine)
    table = sweeps.sweep(held, policies, desc=f"replay sweep {name}")
    return collect_claims(table, machine_kind="measured"), table  # 11's second s_d/s_t: measured as PCT does


def temperature_tables(models: tuple, logbook: list[LoggedPrompt], weights: Sequence[float],
                       temperatures: Sequence[float], top: int = 20) -> dict[tuple[float, float], pd.DataFrame]:
    """{(λ, T): the depth-1 token table at T of mix:λ (`token_tables.temperature_tokens`' columns)} along the
    logbook's greedy output, from one walk of the real pair over it: mix:λ's root distribution is
    q_λ = (1 − λ)·q_draft + λ·p_target (`drafts.mix.mix_logits`), and p_target after a committed prefix is the
    teacher-forced target's row there, so every λ and T is read from the same two rows (no mix draft run, no
    greedy continuation recomputed). What notebooks 06 (DySpec at T) and 07 (Gunjur's match at T) read."""
    import torch

    from spectree.analysis.token_tables import TOP_M
    from spectree.core.decode import walk_continuation
    from spectree.core.sampling import entropy, topm_entropy
    from spectree.drafts.mix import mix_logits
    from spectree.prompts import chat_ids

    target, draft, tok = models
    frames: dict[tuple[float, float], list[pd.DataFrame]] = {(w, t): [] for w in weights for t in temperatures}
    with torch.inference_mode():
        for i, lp in enumerate(logbook):
            ids = chat_ids(tok, lp.prompt.text)
            walked = [(root.float().cpu(), logits[prefix - 1].float()) for prefix, root, _, logits
                      in walk_continuation(target, draft, ids, lp.continuation, lp.n_valid)]
            if not walked:
                continue
            drafts, targets = (torch.stack(x) for x in zip(*walked))  # [n, V] each
            n = len(drafts)
            for w in weights:
                raw = mix_logits(drafts, targets, w).float()  # [n, V] log q_λ
                for temp in temperatures:
                    d = torch.softmax(raw / temp, -1)
                    t = torch.softmax(targets / temp, -1)
                    p, x = d.topk(top, dim=-1)  # [n, top]
                    tp = t.gather(-1, x)
                    per_position = {"entropy": entropy(d), "entropy_topm": topm_entropy(raw / temp, TOP_M),
                                    "confidence": p[:, 0], "entropy_raw": entropy(torch.softmax(raw, -1))}
                    frames[w, temp].append(pd.DataFrame({
                        "prompt": i, "dataset": lp.prompt.dataset, "position": np.repeat(np.arange(n), top),
                        "depth": 1, "rank": np.tile(np.arange(top), n), "token": x.flatten().numpy(),
                        "p": p.flatten().double().numpy(), "joint": p.flatten().double().numpy(),
                        **{k: np.repeat(v.double().numpy(), top) for k, v in per_position.items()},
                        "accept": torch.clamp(tp / p, max=1.0).flatten().double().numpy(),
                        "target_prob": tp.flatten().double().numpy(), "examined": True,
                        "chain": np.tile(np.arange(top) == 0, n)}))
    return {k: pd.concat(v, ignore_index=True) if v else logbook_tokens([]) for k, v in frames.items()}


@dataclass(frozen=True)
class AnalysisSettings:
    """The settings of notebooks 04–07 that their claims read (their parameters of the same names)."""

    dyspec_temperature: float = 0.6  # notebook 06's stochastic setting, beside greedy
    gunjur_temperature: float = 0.4  # notebook 07's T (Gunjur's)
    gunjur_min_count: int = 20  # notebook 07's min_count
    pct_chain_ratio: float = EDD_13B_RATIO  # notebook 05's PCT path claim: EDD 13B's s_d/s_t, Fig. 3b's pair
    n_resamples: int = 1000


def analysis_claims(tokens: pd.DataFrame, hot: dict[float, pd.DataFrame], a: AnalysisSettings
                    ) -> tuple[list[dict[str, Any]], dict[str, Optional[float]]]:
    """The claims of notebooks 04–07 on one logbook, by their own functions and settings: C2T Fig. 2's top-1 bias
    (04) and EDD Fig. 3b's calibration and PCT's path acceptance (05) on the greedy token table (`logbook_tokens`);
    DySpec Fig. 2 (06) greedy and at its T, Gunjur Fig. 1 (07) at its T, on the depth-1 tables at those T (`hot`:
    T → `temperature_tables`'). Returns (claims, {reading: value}) ."""
    cells = stats.cell_table(stats.at_depth(tokens), min_count=30)  # 04's cells: C2T Fig. 2's single forward
    bias = stats.c2t_claims(tokens, cells, n_resamples=a.n_resamples)
    diagrams, _ = calibration.calibration_diagrams(tokens, n_resamples=a.n_resamples, pct_ratio=a.pct_chain_ratio)
    calibrated = [d["claim"] for d in diagrams if "claim" in d]
    tables = {"greedy": tokens}
    if a.dyspec_temperature > 0 and a.dyspec_temperature in hot:
        tables[f"T = {a.dyspec_temperature:g}"] = hot[a.dyspec_temperature]
    dyspec, rhos = stats.acceptance_report(tables)
    gunjur_t = a.gunjur_temperature
    drawn = (entropy_match.drawn_tokens(hot[gunjur_t], gunjur_t) if gunjur_t > 0 and gunjur_t in hot
             else entropy_match.drawn_tokens(tokens, 0.0))
    rates = entropy_match.match_rate_by_entropy(drawn.entropy, drawn.accept)
    crossover = entropy_match.crossover_entropy(rates, a.gunjur_min_count)
    gunjur = entropy_match.gunjur_claims(drawn, rates, crossover, min_count=a.gunjur_min_count,  # 07's cutoff 1 nat
                                         n_resamples=a.n_resamples)
    readings = {"top-1 acceptance − p, entropy > 3 nats": bias[0]["details"]["accept_minus_p"],
                "top-1 acceptance − p, entropy ≤ 1 nat": bias[1]["details"]["accept_minus_p"],
                "ECE of draft confidence": diagrams[0]["stats"]["ece"],
                "Spearman ρ(p, acceptance)": rhos["greedy"]["accept"],
                "Spearman ρ(p, target p)": rhos["greedy"]["target_prob"],
                f"crossover entropy at T = {gunjur_t:g} (nats)": crossover}
    return bias + calibrated + dyspec + gunjur, readings


@dataclass
class Quality:
    """Everything notebook 11 reads at one λ."""

    weight: float
    logbook: str  # its folder's name, which names its C2T classifier
    agreement: dict[str, float]
    claims: list[dict[str, Any]]
    readings: dict[str, Optional[float]]
    projected: pd.DataFrame  # on the scored prompts
    draft_tokens: dict[str, int] = field(default_factory=dict)  # logged nodes, and those a verifier examined
    scored: list[str] = field(default_factory=list)  # prompt keys the tree claims and projections score
    trained: list[str] = field(default_factory=list)  # prompt keys C2T's classifier was trained on


def measure(logbook: list[LoggedPrompt], name: str, pair: str, weight: float, s: SweepSettings, cost,
            hot: dict[float, pd.DataFrame], a: AnalysisSettings = AnalysisSettings(),
            speed_ratio: Optional[float] = None) -> Quality:
    """Every reading of one λ's logbook (`name`: its folder's, which also names its C2T classifier): the tree
    claims (PCT at `s.pct_ratio`, the paper's) and the projected speeds (PCT at `speed_ratio`, this machine's;
    `cost.ratio` if None) on the scored prompts (`split`), C2T's classifier trained on the others; the 04–07 claims
    on every prompt (no trained component reads them); `hot`: T → this λ's `temperature_tables`."""
    from spectree.projection import projected, projection_policies

    train, held = split(logbook, s)
    tokens = logbook_tokens(logbook)  # one token table for the agreement and the 04–07 readings
    strategy, _ = strategy_claims(train, held, name, pair, s)
    analysis, readings = analysis_claims(tokens, hot, a)
    families = projection_policies(s.K, s.d_max, name, speed_ratio or cost.ratio)  # this machine's s_d/s_t
    counts = {"logged nodes": int(sum((lp.nodes.node > 0).sum() for lp in logbook)),
              "examined tokens": int(tokens.examined.sum())}
    return Quality(weight, name, agreement(tokens), strategy + analysis, readings, projected(held, families, cost),
                   counts, prompt_ids(held), prompt_ids(train))


__all__ = ["mix_pair", "mix_models", "quality_logbook", "agreement",
           "flip_weights", "weights_for", "mix_weights", "cached_flips", "SweepSettings", "split", "prompt_ids", "strategy_claims",
           "temperature_tables", "AnalysisSettings", "analysis_claims", "Quality", "measure"]
