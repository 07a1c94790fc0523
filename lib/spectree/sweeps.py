"""Replay sweeps: score many strategy specs on one logbook, tabulate them, check the papers' claims.

Numbers come from `spectree.replay` (exact for greedy decoding): τ = accepted draft tokens + 1 per target
forward, γ = draft tokens verified per forward (`spectree.metrics`). A spec the logbook cannot replay is
reported with the reason instead of stopping the sweep. The standard sweeps are lists of spec strings.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .classifier import ClassifierTraining, fit_and_save
from .errors import SpectreeError
from .logbook import LoggedPrompt
from .paths import data_dir
from .fastreplay import fast_replay
from .replay import summarize
from .strategies import parse_strategy, split_spec
from .strategies.base import Policy

Logbook = list[LoggedPrompt]
Specs = Union[Sequence[str], Mapping[str, Sequence[str]]]  # a list, or {group: list}
STEP_COLUMNS = ["prompt", "dataset", "category", "position", "tau", "gamma", "depth"]  # a row per target forward
TABLE_COLUMNS = ["group", "spec", "name", "dataset", "replayable", "tau", "gamma", "tau_per_gamma", "alpha",
                 "accept_rate", "depth", "steps", "tokens", "candidates", "params", "reason"]
VERDICTS = ("holds", "does not hold", "inconclusive")
Compare = Callable[[pd.Series, pd.Series], Any]  # two sweep-table rows → a verdict or a text


def spec_params(spec: str) -> tuple[str, dict[str, Any]]:
    """'c2t:beta=0.5,topk=20' → ('c2t', {'beta': 0.5, 'topk': 20}), read as `parse_strategy` reads it."""
    return split_spec(spec)


def replay_steps(logbook: Logbook, policy: Policy) -> pd.DataFrame:
    """One row per target forward of `policy` over the logbook (STEP_COLUMNS), by `fastreplay` (which
    falls back to the layer loop for policies it does not vectorise)."""
    steps = fast_replay(logbook, policy)
    keys = {lp.prompt.id: lp.prompt.key for lp in logbook}
    return steps.assign(prompt=steps.prompt.map(keys))[STEP_COLUMNS]


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else math.nan


def totals(steps: pd.DataFrame) -> dict[str, float]:
    """`replay.summarize` of per-step rows plus the ratios the papers report: tau_per_gamma = mean τ / mean γ;
    alpha = Σ τ / Σ tree depth over the forwards that verified a draft, EDD's acceptance rate (§4.1 "accepted
    length / maximum depth"; its Table 2 numbers are τ / depth, bonus included); accept_rate = Σ accepted / Σ γ."""
    out: dict[str, float] = summarize(steps)
    out.update(depth=float(steps.depth.mean()), tau_per_gamma=_ratio(out["tau"], out["gamma"]),
               alpha=_ratio(steps.tau[steps.depth > 0].sum(), steps.depth.sum()),
               accept_rate=_ratio((steps.tau - 1).sum(), steps.gamma.sum()))
    return out


def score(logbook: Logbook, spec: str) -> dict[str, Any]:
    """τ, γ and the ratios of one spec over the logbook, with `by_dataset` totals when the prompts come
    from several datasets. Not replayable → replayable False and the reason; a malformed spec or a
    missing classifier still raises (those are mistakes, not properties of the logbook)."""
    policy, (name, params) = parse_strategy(spec), spec_params(spec)
    row: dict[str, Any] = {"spec": spec, "name": name, "params": params}
    try:
        steps = replay_steps(logbook, policy)
    except SpectreeError as err:
        return {**row, "replayable": False, "reason": str(err)}
    row.update(replayable=True, reason="", **totals(steps))
    if steps.dataset.nunique() > 1:
        row["by_dataset"] = {d: totals(g) for d, g in steps.groupby("dataset")}
    return row


def sweep(logbook: Logbook, specs: Specs, desc: str = "replay sweep") -> pd.DataFrame:
    """One row per spec and scope (dataset "all", then each dataset when there are several; unreplayable
    specs one row of NaN and the reason); a spec listed in several groups is scored once."""
    groups = specs if isinstance(specs, Mapping) else {"": list(specs)}
    jobs = [(group, spec) for group, listed in groups.items() for spec in listed]
    done: dict[str, dict[str, Any]] = {}
    rows = []
    for group, spec in tqdm(jobs, desc=desc, unit="spec"):
        if spec not in done:
            done[spec] = score(logbook, spec)
        result = dict(done[spec])
        by_dataset = result.pop("by_dataset", {})
        rows.append({"group": group, "dataset": "all", **result})
        rows += [{"group": group, **result, "dataset": d, **numbers} for d, numbers in by_dataset.items()]
    return pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)


def per_category(logbook: Logbook, spec: str) -> pd.DataFrame:
    """τ, γ (mean tree size without the root), depth, α per (dataset, category) of one spec (EDD Fig. 7)."""
    steps = replay_steps(logbook, parse_strategy(spec))
    return pd.DataFrame([{"dataset": d, "category": c, "prompts": g.prompt.nunique(), **totals(g)}
                         for (d, c), g in steps.groupby(["dataset", "category"])])


def eagle2_specs(Ns: Sequence[int], K: int = 10, d_max: int = 6) -> list[str]:
    """EAGLE-2 top-N sweep (C2T Fig. 4, Table 4: K = 10, d_max = 6)."""
    return [f"eagle2:K={K},d_max={d_max},N={n}" for n in Ns]


def c2t_specs(betas: Sequence[float], topks: Sequence[int] = (0, 15, 20, 25, 30), K: int = 10, d_max: int = 6,
              classifier: str = "smollm2-edd") -> list[str]:
    """C2T β sweep without (topk 0) and with second pruning (C2T Fig. 4, Table 5)."""
    return [f"c2t:beta={b:g},K={K},d_max={d_max},topk={t},classifier={classifier}" for t in topks for b in betas]


def chain_specs(d_max: int = 10, lengths: Sequence[int] = range(5, 10), classifier: Optional[str] = None,
                beta: float = 0.85) -> list[str]:
    """Chain mode (C2T Table 3): fixed lengths (EAGLE-1), DyMax 0.3, DyJoint 0.08, Gunjur's entropy
    cutoff 1.0, and C2T as an early exit (K = 1) when a classifier is given."""
    stops = {"dymax": 0.3, "dyjoint": 0.08, "entropy": 1.0}
    specs = [f"chain:k={k}" for k in lengths if k <= d_max]
    specs += [f"chain:k={d_max},stop={stop},threshold={t}" for stop, t in stops.items()]
    return specs + ([f"c2t:beta={beta:g},K=1,d_max={d_max},classifier={classifier}"] if classifier else [])


def edd_table2_specs(K: int = 10, d_max: int = 6, N: int = 60, pct_ratio: float = 0.1, pct_depth: int = 10
                     ) -> list[str]:
    """EDD Table 2: VCT (width 3, depth 5), CAPE (depth 5), EAGLE-2, PCT (width 5, depth 10)."""
    return ["vct:w=3,d=5", "cape:d=5", f"eagle2:K={K},d_max={d_max},N={N}",
            f"pct:ratio={pct_ratio:g},k={min(5, K)},d_max={pct_depth}"]


def width_specs(widths: Sequence[int], d: int = 3, pct_ratio: float = 0.1, pct_depth: int = 10) -> list[str]:
    """Expansion width: full b-ary trees of depth d, and PCT's width k (EDD Fig. 6)."""
    return [f"kary:b={b},d={d}" for b in widths] + [f"pct:ratio={pct_ratio:g},k={b},d_max={pct_depth}" for b in widths]


def budget_specs(budgets: Sequence[int], K: int = 8, d_max: int = 11,
                 acceptance: Optional[Sequence[float]] = None) -> list[str]:
    """DySpec budget m against static trees of m draft tokens: SpecInfer-style sequences (k·d = m) and,
    given an acceptance vector (`strategies.sequoia.acceptance_vector`), Sequoia's tree."""
    specs = []
    for m in budgets:
        specs.append(f"dyspec:m={m},K={K},d_max={d_max}")
        ds = [d for d in range(1, min(d_max, m // 2) + 1) if m % d == 0 and m // d <= K]  # k = m / d ≥ 2
        d = min([d for d in ds if d * d >= m] or ds[-1:] or [0])  # the squarest shape, deeper than wide
        specs += [f"sequences:k={m // d},d={d}"] if d else []
        specs += [f"sequoia:n={m},p=" + "/".join(f"{p:.4g}" for p in acceptance)] if acceptance else []
    return specs


def gunjur_specs(d: int = 4, deep: int = 8, cutoff: float = 2.5) -> list[str]:
    """Gunjur et al.: static b = 2, d = 4; simple cutoff (H > 1); dyn width + depth; dyn width only; naive width."""
    return ["kary:b=2,d=4", f"chain:k={deep},stop=entropy,threshold=1.0", f"entropy:d={deep},cutoff={cutoff:g}",
            f"entropy:d={d}", f"naive_width:k=4,d={d}"]


def standard_sweeps(K: int = 10, d_max: int = 11, depth: int = 6, Ns: Sequence[int] = (10, 20, 40, 60, 80),
                    betas: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8), topks: Sequence[int] = (0, 15, 20, 25, 30),
                    budgets: Sequence[int] = (8, 16, 32, 64), widths: Sequence[int] = (1, 2, 3, 4, 5),
                    pct_ratio: float = 0.1, classifier: Optional[str] = None,
                    acceptance: Optional[Sequence[float]] = None) -> dict[str, list[str]]:
    """Every standard sweep by group, sized for a logbook with K children per node and depth d_max
    (`depth` is the EAGLE-2 / C2T tree depth). Without a classifier the C2T specs are left out."""
    c2t = c2t_specs(betas, topks, K, depth, classifier) if classifier else []
    return {"c2t_fig4": eagle2_specs(Ns, K, depth) + c2t,
            "chain_table3": chain_specs(min(10, d_max), classifier=classifier),
            "edd_table2": edd_table2_specs(K, depth, pct_ratio=pct_ratio, pct_depth=min(10, d_max)),
            "widths": width_specs(widths, min(3, d_max), pct_ratio, min(10, d_max)),
            "budgets": budget_specs(budgets, min(8, K), d_max, acceptance),
            "gunjur": gunjur_specs(min(4, d_max), d_max)}


def split_logbook(logbook: Logbook, train_fraction: float = 0.5) -> tuple[Logbook, Logbook]:
    """(train, held out): the first ⌊fraction·n⌋ prompts of each dataset train. When either side would be
    empty both are the whole logbook (the same list object: the evaluation is then in-sample)."""
    train, held = [], []
    for dataset in dict.fromkeys(lp.prompt.dataset for lp in logbook):
        group = [lp for lp in logbook if lp.prompt.dataset == dataset]
        n = int(len(group) * train_fraction)
        train, held = train + group[:n], held + group[n:]
    return (train, held) if train and held else (logbook, logbook)


def train_c2t(train: Logbook, name: str, cfg: ClassifierTraining = ClassifierTraining(),
              valid_share: float = 0.2) -> tuple[Path, pd.DataFrame]:
    """Train C2T's classifier on the nodes of `train` (a random `valid_share` picks the epoch), save it as
    data/c2t/<name>.safetensors (`c2t:classifier=<name>` loads it); returns the path and per-epoch table."""
    return fit_and_save(train, None, data_dir() / "c2t" / f"{name}.safetensors", cfg, valid_share=valid_share)


def claim(name: str, paper: str, ours: Any, holds: Optional[bool]) -> dict[str, Any]:
    """One reproduced claim: the paper's statement (text), ours, and a verdict (None → "inconclusive")."""
    verdict = VERDICTS[2] if holds is None else VERDICTS[0] if holds else VERDICTS[1]
    return {"name": name, "paper": paper, "ours": ours, "verdict": verdict}


def claims_summary(claims: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary JSON's claim part: a one-line tally and the claims themselves."""
    counts = {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}
    return {"claims_tally": ", ".join(f"{n} {v}" for v, n in counts.items()), "claims": claims}


def scored(table: pd.DataFrame, group: str, name: Optional[str] = None, **params: Any) -> pd.DataFrame:
    """The replayable whole-logbook rows of `group` in a sweep table, optionally one name and parameter values."""
    rows = table[(table.group == group) & (table.dataset == "all") & table.replayable.astype(bool)]
    rows = rows[rows.name == name] if name else rows
    for key, value in params.items():
        rows = rows[[p.get(key) == value for p in rows.params]]
    return rows


def _pick(table: pd.DataFrame, group: str, name: str, **params: Any) -> Optional[pd.Series]:
    rows = scored(table, group, name, **params)
    return rows.iloc[0] if len(rows) else None


def versus(name: str, paper: str, a: Optional[pd.Series], b: Optional[pd.Series],
           holds: Compare, ours: Optional[Compare] = None) -> dict[str, Any]:
    """A claim comparing two scored rows (a: the paper's method); inconclusive if either was not scored."""
    if a is None or b is None:
        return claim(name, paper, "not scored on this logbook", None)
    text = ours(a, b) if ours else f"τ {a.tau:.3f} vs {b.tau:.3f}, γ {a.gamma:.2f} vs {b.gamma:.2f} per forward"
    return claim(name, paper, text, bool(holds(a, b)))


def c2t_claims(table: pd.DataFrame, tolerance: float = 0.85) -> list[dict[str, Any]]:
    """C2T Fig. 4 / Table 2: the γ C2T needs to reach each EAGLE-2 setting's τ, as a share of EAGLE-2's
    (median over the settings C2T reaches; at least two needed); holds if at most `tolerance`."""
    e2, c2 = scored(table, "c2t_fig4", "eagle2"), scored(table, "c2t_fig4", "c2t")
    shares = [c2[c2.tau >= e.tau].gamma.min() / e.gamma for e in e2.itertuples()
              if e.gamma > 0 and (c2.tau >= e.tau).any()]
    share = float(np.median(shares)) if shares else math.nan
    return [claim("C2T reaches EAGLE-2's τ with fewer candidates (C2T Fig. 4, Table 2)",
                  "75–80% of EAGLE-2's γ at the same τ (LLaMA-2 7B/13B/70B, MT-bench)",
                  f"{share:.0%} of EAGLE-2's γ (median over the {len(shares)} of {len(e2)} EAGLE-2 sizes C2T reaches)",
                  share <= tolerance if len(shares) >= 2 else None)]


def chain_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """C2T Table 3 (chain mode, depth 10): DyJoint over DyMax; C2T (β 0.85) at DyJoint's τ with fewer γ."""
    dymax, dyjoint = (_pick(table, "chain_table3", "chain", stop=s) for s in ("dymax", "dyjoint"))
    return [versus("Chain mode: DyJoint (0.08) reaches a higher τ than DyMax (0.3) (C2T Table 3)",
                   "τ 2.12 vs 2.06 (without the bonus token), γ 129,876 vs 127,018 in total", dyjoint, dymax,
                   lambda a, b: a.tau > b.tau),
            versus("Chain mode: C2T (β 0.85) matches DyJoint's τ with fewer candidates (C2T Table 3)",
                   "τ 2.12 for both, γ 116,694 vs 129,876 in total (−10%)", _pick(table, "chain_table3", "c2t"),
                   dyjoint, lambda a, b: a.tau >= b.tau - 0.01 and a.gamma < b.gamma)]


def edd_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """EDD Table 2 and §4.3.1 on EDD's trees: PCT against EAGLE-2, and against the better of VCT / CAPE."""
    pct, e2, vct, cape = (_pick(table, "edd_table2", n) for n in ("pct", "eagle2", "vct", "cape"))
    static = None if vct is None or cape is None else max((vct, cape), key=lambda r: r.tau)
    return [versus("PCT's acceptance rate α exceeds EAGLE-2's (EDD Table 2)",
                   "α 0.74 vs 0.67 at τ 3.99 for both (LLaMA2-Chat 7B, MT-bench)", pct, e2,
                   lambda a, b: a.alpha > b.alpha,
                   lambda a, b: f"α {a.alpha:.3f} vs {b.alpha:.3f} (mean tree depth {a.depth:.2f} vs {b.depth:.2f})"),
            versus("PCT keeps EAGLE-2's τ with about half its nodes (EDD §4.3.1, Fig. 6)",
                   "about half the nodes at a competitive τ", pct, e2,
                   lambda a, b: a.gamma <= 0.6 * b.gamma and a.tau >= 0.95 * b.tau),
            versus("PCT's τ beats VCT's and CAPE's (EDD Table 2)", "τ 3.99 vs VCT 3.56 and CAPE 3.35", pct, static,
                   lambda a, b: a.tau > b.tau, lambda a, b: f"τ {a.tau:.3f} vs {b['name']} {b.tau:.3f} (the better)")]


def budget_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """DySpec Tables 1–2: at each budget m, DySpec's τ against the static trees of m draft tokens."""
    rows = scored(table, "budgets")
    pairs = [(dy.params["m"], dy.tau, rows[(rows.name != "dyspec") & (rows.gamma == dy.params["m"])].tau.max())
             for dy in rows[rows.name == "dyspec"].itertuples()]  # (m, DySpec τ, best static τ or NaN)
    pairs = [p for p in pairs if not math.isnan(p[2])]
    return [claim("At the same budget DySpec accepts more than static trees (DySpec Tables 1–2)",
                  "budget 64, T = 0, C4: 5.25 tokens/step vs Sequoia 4.99 and SpecInfer 3.32",
                  "; ".join(f"m={m}: τ {a:.3f} vs best static {b:.3f}" for m, a, b in pairs) or "not scored",
                  all(a >= b for _, a, b in pairs) if pairs else None)]


def collect_claims(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Every claim the standard sweeps check, in paper order."""
    return c2t_claims(table) + chain_claims(table) + edd_claims(table) + budget_claims(table)
