"""Retrieval branches and long prompts in the live benchmark (notebook 12): the hybrid rows, the prompt-length
axis, the lossless grid of every policy family × retrieval mode, and the claims that judge them.

Every speed number comes from `bench.run_strategies` (interleaved repeats where asked); every claim pools its rate
over a prompt set and bootstraps over its prompts (`tables.versus`): its independent units are prompts, at least 8,
never timing repeats of one prompt. All are our bars (kind "bar"): no paper states them.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from spectree.claims.claims import LOSSLESS, Evidence, all_of, bootstrap_rule, claim, pooled_quotient
from spectree.claims.verdicts import BAR, FAILS, HOLDS, INCONCLUSIVE
from spectree.core.policy import Policy
from spectree.prompts import Prompt
from spectree.speed.bench import Mismatch, Run
from spectree.speed.references import HF, HF_LOOKUP, HF_LOOKUP_PACKED, HF_PACKED, REFERENCES
from spectree.claims.names import AR_LABEL
from spectree.speed.tables import aligned, prompt_rows, speed_table, versus
from spectree.strategies import parse_strategy
from spectree.strategies.chain import autoregressive

AR = AR_LABEL  # our AR loop's row (`names.AR_LABEL`)


def hybrid_strategies(trees: dict[str, Policy], modes: Sequence[str]) -> dict[str, Policy]:
    """label → policy: our AR loop, each retrieval mode alone (`ar+MODE`, labelled MODE), then each model tree
    alone and with each mode (`LABEL+MODE`). A mode is a retrieval spec: 'lookup', 'suffix:k=2', 'lookup+suffix'."""
    out: dict[str, Policy] = {AR: autoregressive()}
    out.update({mode: parse_strategy(f"ar+{mode}") for mode in modes})
    for label, tree in trees.items():
        out[label] = tree
        out.update({f"{label}+{mode}": parse_strategy(f"{tree.spec}+{mode}") for mode in modes})
    return out


def family_grid(specs: Sequence[str], modes: Sequence[str]) -> dict[str, Policy]:
    """`SPEC+MODE` → policy for every policy setting × retrieval mode (the lossless grid)."""
    return {f"{spec}+{mode}": parse_strategy(f"{spec}+{mode}") for spec in specs for mode in modes}


def grid_runs(models: tuple, pair: str, prompts: list[Prompt], grid: dict[str, Policy], max_new_tokens: int,
              kernels: str = "stock", skipped: dict | None = None) -> list[Run]:
    """The lossless grid's runs (greedy; tokens, τ and γ, not time): `bench.run_strategies` with one prefill per
    prompt and no warmup, the prompts split over `core.workers` processes (each loads `pair` on `kernels`) where
    there are several. Runs come in prompt order, as from one process; a setting skipped on any prompt (trees over
    the node guard) is dropped from all and named in `skipped`."""
    from functools import partial

    from spectree.core.workers import in_processes, worker_count
    from spectree.models.loading import load_pair

    workers = max(1, min(len(prompts), worker_count(models[0].device)))
    jobs = [(prompts[w::workers], grid, max_new_tokens) for w in range(workers)]
    if workers == 1:
        parts = [_grid_part(*jobs[0], models)]
    else:
        load = partial(load_pair, pair, device=str(models[0].device), dtype=models[0].dtype, kernels=kernels)
        parts = in_processes(_grid_part, jobs, workers, load, "lossless grid")
    dropped = {label: why for _, part in parts for label, why in part.items()}
    if skipped is not None:
        skipped.update(dropped)
    order = {p.key: i for i, p in enumerate(prompts)}
    return sorted((r for runs, _ in parts for r in runs if r.strategy not in dropped), key=lambda r: order[r.prompt])


def _grid_part(prompts: list[Prompt], grid: dict[str, Policy], max_new_tokens: int, models: tuple = ()
               ) -> tuple[list[Run], dict]:
    """One share of `grid_runs` on `models` (a worker's own, `core.workers.load_models`, when none are given):
    (its runs, the settings it skipped)."""
    from spectree.core.workers import load_models
    from spectree.speed.bench import run_strategies

    skipped: dict = {}
    runs = run_strategies(models or load_models(), prompts, grid, max_new_tokens, hf_packed=False, warmup=False,
                          skipped=skipped, share_prefill=True)
    return runs, skipped


def by_dataset(runs: list[Run]) -> dict[str, list[Run]]:
    """The runs of each prompt set (the dataset part of the prompt key: 'copy', 'mtbench', ...), in run order."""
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.prompt.split("/")[0], []).append(r)
    return out


def lossless_claim(grid_runs: list[Run], grid: Sequence[str] = (), min_prompts: int = 100,
                   mismatches: Sequence[Mismatch] = ()) -> dict[str, Any]:
    """0 mismatches with HF generate on ≥ min_prompts prompts for every setting of the grid (greedy), a mismatch
    passing only at a near-tie of the target dtype's logit noise (`bench.find_mismatches`' `tie`, the rule of the
    GPU checklist's claim, `gpu.gpu_summary.lossless_claim`): a setting whose outputs differ with no such
    mismatch named fails. A setting of `grid` with no runs (`run_strategies` skipped it, e.g. its trees outgrew
    `Policy.max_nodes`) is named, and the claim cannot hold without it."""
    table = speed_table(grid_runs).set_index("strategy").drop(index=[HF, HF_PACKED], errors="ignore")
    prompts = len({r.prompt for r in grid_runs})
    wrong = table.index[table.exact < 1].tolist()
    explained = {m.strategy for m in mismatches if m.tie} - {m.strategy for m in mismatches if not m.tie}
    bugs = [label for label in wrong if label not in explained]  # a mismatch no near-tie explains, or none named
    ties = [m for m in mismatches if m.strategy in explained]
    missing = [label for label in grid if label not in table.index]
    verdict = FAILS if bugs else HOLDS if prompts >= min_prompts and not missing else INCONCLUSIVE
    ours = (f"{len(table)} settings × {prompts} prompts: " + (f"mismatches in {bugs}" if bugs else "0 mismatches")
            + ("; near-ties (rounding): " + "; ".join(f"{m.strategy} on {m.prompt} at {m.position} (top-2 gap "
                                                        f"{m.top2_gap:.1e})" for m in ties) if ties else "")
            + (f"; not run (skipped): {missing}" if missing else ""))
    return claim("every policy family × retrieval mode is lossless (greedy)", LOSSLESS, ours,
                 Evidence(verdict, f"every output equals HF generate's, a mismatch passing only at a near-tie of "
                                   f"the target dtype's logit noise, n ≥ {min_prompts} prompts, every setting run",
                          prompts), goal=f"0 mismatches, ≥ {min_prompts} prompts", kind=BAR)


def best_of(runs: list[Run], labels: Sequence[str]) -> str:
    """The label among `labels` with the highest speedup over HF generate in these runs."""
    table = speed_table(runs).set_index("strategy")
    return table.loc[[l for l in labels if l in table.index], "speedup"].idxmax()


def retrieval_claims(runs: list[Run], copy_set: str, rows: Sequence[str], trees: Sequence[str],
                     goal_all: float = 1.6, goal_copy: float = 2.0) -> list[dict[str, Any]]:
    """The issue's speed goals on one run over the copy-heavy set and the others: the fastest of our `rows`
    (retrieval alone, model trees alone, hybrids: whichever wins on this host) ≥ goal_all × HF generate overall and
    ≥ goal_copy × on `copy_set` (pooled over prompts, 95% paired bootstrap), each with speculation alone (against
    HF on the same kernels), HF prompt lookup and the best model tree alone beside it."""
    sets = {"all prompts": runs, f"the {copy_set} set": by_dataset(runs).get(copy_set, [])}
    out = []
    for (where, subset), goal in zip(sets.items(), (goal_all, goal_copy)):
        if not subset:
            continue
        best, per_prompt = best_of(subset, rows), prompt_rows(subset)
        t = speed_table(subset).set_index("strategy")
        beside = {name: t.loc[key, col] for name, key, col in [("same kernels", best, "speedup_same_kernels"),
                                                               ("HF prompt lookup", HF_LOOKUP, "speedup"),
                                                               ("HF prompt lookup on our kernels", HF_LOOKUP_PACKED,
                                                                "speedup"),
                                                               ("best tree alone", best_of(subset, trees), "speedup")]
                  if key in t.index and col in t.columns}  # no column: not run (`speed_table` drops it)
        ours = f"{best}: {t.loc[best, 'speedup']:.2f}× (" + ", ".join(f"{k} {v:.2f}×" for k, v in beside.items()) + ")"
        out.append(claim(f"fastest of our rows ≥ {goal:g}× HF generate on {where} (issue goal)", "—", ours,
                         versus(per_prompt, best, REFERENCES[HF], "n_tokens", "seconds", goal,
                                f"tokens/s of {best} ÷ HF's"), goal=f"≥ {goal:g}× (issue goal)", kind=BAR))
    return out


def length_claims(runs: list[Run], trees: Sequence[str], long: Sequence[str] = ("1k", "2k"),
                  margin: float = 0.1) -> list[dict[str, Any]]:
    """On the length axis (one run of `lengths.long_prompts`: categories '256', '1k', '2k', …, prompt i of every
    length a prefix of the same text): our AR loop ≥ 1.0× HF generate at each `long` length, pooled over that
    length's prompts, and the best model tree (the fastest of `trees` at the shortest length) keeping its speedup
    there − margin at each `long` length, paired over the texts. 95% paired bootstrap intervals; every verdict rests
    on the prompts (≥ 8 per length), whatever the timing repeats."""
    cats = {c: prompt_rows([r for r in runs if r.category == c]) for c in dict.fromkeys(r.category for r in runs)}
    base = next(iter(cats))  # the shortest length, the tree's reference
    at = [c for c in long if c in cats and c != base]
    if not at:
        return []
    speed = {c: _speedups(rows) for c, rows in cats.items()}
    best = speed[base].reindex([t for t in trees if t in speed[base].index]).idxmax()
    hf = REFERENCES[HF]
    ar = [versus(cats[c], AR, hf, "n_tokens", "seconds", 1.0, f"tokens/s of {AR} ÷ HF's at {c}") for c in at]
    tree = [_against_base(cats[c], cats[base], best, margin, f"{best}'s speedup at {c} − at {base}") for c in at]
    return [claim(f"our AR loop ≥ 1.0× HF generate at {' and '.join(long)}-token prompts", "—",
                  ", ".join(f"{c}: {speed[c][AR]:.2f}×" for c in at), all_of(ar), goal="≥ 1.0× (ours)", kind=BAR),
            claim(f"best model tree keeps its {base}-token speedup − {margin:g} at long prompts", "—",
                  f"{best}: {base} {speed[base][best]:.2f}×, " + ", ".join(f"{c} {speed[c][best]:.2f}×" for c in at),
                  all_of(tree), goal=f"≥ {base} − {margin:g} (ours)", kind=BAR)]


def _speedups(rows: pd.DataFrame) -> pd.Series:
    """method → pooled tokens/s over HF generate's on the same prompts (`tables.prompt_rows` rows)."""
    rate = rows.groupby("method").n_tokens.sum() / rows.groupby("method").seconds.sum()
    return rate / rate[REFERENCES[HF]]


def _against_base(rows: pd.DataFrame, base: pd.DataFrame, method: str, margin: float, what: str) -> Evidence:
    """`method`'s pooled speedup over HF generate in `rows` minus its speedup in `base`, ≥ −margin, paired over the
    texts both lengths were cut from (prompt i of each length: the id's last part)."""
    def by_text(frame: pd.DataFrame) -> list[pd.DataFrame]:
        return [f.set_axis([p.rsplit("-", 1)[-1] for p in f.index]) for f in aligned(frame, method, REFERENCES[HF])]
    (a, ha), (b, hb) = by_text(rows), by_text(base)
    common = sorted(set(a.index) & set(b.index))
    arrays = [f.loc[common, c] for f in (a, ha, b, hb) for c in ("n_tokens", "seconds")]

    def statistic(*x: Any, axis: int = -1) -> Any:
        return pooled_quotient(*x[:4], axis=axis) - pooled_quotient(*x[4:], axis=axis)
    return bootstrap_rule(arrays, statistic, -margin, what)


__all__ = ["AR", "hybrid_strategies", "family_grid", "grid_runs", "by_dataset", "lossless_claim", "best_of",
           "retrieval_claims", "length_claims"]
