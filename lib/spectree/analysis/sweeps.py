"""Replay sweeps: score many policies on one logbook and tabulate them, laid out as the papers lay theirs out.

Numbers come from `spectree.replay` (exact for greedy decoding): τ = accepted draft tokens + 1 per target
forward, γ = draft tokens verified per forward (`spectree.core.metrics`). A policy the logbook cannot replay is
reported with the reason instead of stopping the sweep. The standard sweeps are lists of `Policy` objects.
"""
from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.paths import artifact_path
from spectree.core.policy import Policy, spec_fields
from spectree.replay.forest import Forest
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.logtree import budget_policies, sequoia_p
from spectree.replay.replay import as_forest, grow_forest, replay, summarize, visited_steps
from spectree.strategies.c2t import C2T
from spectree.strategies.cape import CAPE
from spectree.strategies.chain import Chain
from spectree.strategies.dyspec import DySpec
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.gunjur import EntropyBranching, NaiveWidth
from spectree.strategies.pct import PCT
from spectree.strategies.sequoia import Sequoia
from spectree.strategies.static import VCT, Kary, Sequences
from spectree.strategies.c2t import ClassifierTraining, fit_and_save

Logbook = list[LoggedPrompt]
Policies = Union[Sequence[Policy], Mapping[str, Sequence[Policy]]]  # a list, or {group: list}
STEP_COLUMNS = ["prompt", "dataset", "category", "position", "tau", "gamma", "depth"]  # a row per target forward
TABLE_COLUMNS = ["group", "spec", "name", "dataset", "replayable", "tau", "gamma", "tau_per_gamma", "alpha",
                 "accept_rate", "depth", "max_depth", "steps", "tokens", "candidates", "params", "reason", "by_prompt"]
# by_prompt: {prompt key: per-prompt sums (steps, tau, gamma, tau_drafted, depth)}, what claims resample


def params_of(policy: Policy) -> dict[str, Any]:
    """Every spec parameter of a policy, by name (what sweep tables filter on)."""
    return {f.name: getattr(policy, f.name) for f in spec_fields(policy)}


def replay_steps(source: Union[Logbook, Forest], policy: Policy) -> pd.DataFrame:
    """One row per target forward of `policy` over the logbook (STEP_COLUMNS; `prompt` is the prompt's key)."""
    forest = as_forest(source)
    steps = replay(forest, policy)
    keys = {lp.prompt.id: lp.prompt.key for lp in forest.logbook}
    return steps.assign(prompt=steps.prompt.map(keys))[STEP_COLUMNS]


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else math.nan


def totals(steps: pd.DataFrame) -> dict[str, float]:
    """`replay.summarize` of per-step rows plus the ratios the papers report: tau_per_gamma = mean τ / mean γ;
    alpha = Σ τ / Σ tree depth over the forwards that verified a draft, EDD's acceptance rate (§4.1 "accepted
    length / maximum depth"; its Table 2 numbers are τ / depth, bonus included); accept_rate = Σ accepted / Σ γ."""
    out: dict[str, float] = summarize(steps)
    out.update(depth=float(steps.depth.mean()), max_depth=float(steps.depth.max()) if len(steps) else math.nan,
               tau_per_gamma=_ratio(out["tau"], out["gamma"]),
               alpha=_ratio(steps.tau[steps.depth > 0].sum(), steps.depth.sum()),
               accept_rate=_ratio((steps.tau - 1).sum(), steps.gamma.sum()))
    return out


def prompt_sums(steps: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per prompt: forwards (steps) and the sums of τ, γ, τ over drafted forwards and depth, so that any pooled
    rate (τ, γ, α) can be recomputed on a resample of the prompts (`matched.compare`)."""
    sums = steps.assign(steps=1, tau_drafted=steps.tau.where(steps.depth > 0, 0)).groupby("prompt", sort=True)[
        ["steps", "tau", "gamma", "tau_drafted", "depth"]].sum()
    return {str(k): {c: float(v) for c, v in row.items()} for k, row in sums.iterrows()}


def score(source: Union[Logbook, Forest], policy: Policy) -> dict[str, Any]:
    """τ, γ and the ratios of one policy over the logbook, its per-prompt sums (`by_prompt`), and `by_dataset`
    totals when the prompts come from several datasets. Not replayable → replayable False and the reason."""
    row: dict[str, Any] = {"spec": policy.spec, "name": policy.name, "params": params_of(policy)}
    try:
        steps = replay_steps(source, policy)
    except SpectreeError as err:
        return {**row, "replayable": False, "reason": str(err)}
    row.update(replayable=True, reason="", **totals(steps), by_prompt=prompt_sums(steps))
    if steps.dataset.nunique() > 1:
        row["by_dataset"] = {d: {**totals(g), "by_prompt": prompt_sums(g)} for d, g in steps.groupby("dataset")}
    return row


def sweep(logbook: Logbook, policies: Policies, desc: str = "replay sweep",
          own: Optional[Mapping[str, Logbook]] = None) -> pd.DataFrame:
    """One row per policy and scope (dataset "all", then each dataset when there are several; unreplayable
    policies one row of NaN and the reason); a policy listed in several groups is scored once. `own` maps a policy
    name, or "group:name" for that group's alone, to the logbook its settings are scored on instead, of the same
    prompts (C2T's: `logbook.c2t_logbook`; DySpec's: `logbook.dyspec_logbook`)."""
    groups = policies if isinstance(policies, Mapping) else {"": list(policies)}
    jobs = [(group, policy) for group, listed in groups.items() for policy in listed]
    own, keys = own or {}, [lp.prompt.key for lp in logbook]
    for name, book in own.items():
        if [lp.prompt.key for lp in book] != keys:
            raise SpectreeError(f"sweep: {name}'s own logbook holds other prompts than the sweep's")
    forest, done, rows = Forest.of(logbook), {}, []
    forests = {name: Forest.of(book) for name, book in own.items()}
    for group, policy in tqdm(jobs, desc=desc, unit="policy"):
        book = next((k for k in (f"{group}:{policy.name}", policy.name) if k in forests), "")  # "": the shared one
        if (book, policy.spec) not in done:
            done[book, policy.spec] = score(forests.get(book, forest), policy)
        result = dict(done[book, policy.spec])
        by_dataset = result.pop("by_dataset", {})
        rows.append({"group": group, "dataset": "all", **result})
        rows += [{"group": group, **result, "dataset": d, **numbers} for d, numbers in by_dataset.items()]
    return pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)


def per_category(logbook: Logbook, policy: Policy) -> pd.DataFrame:
    """τ, γ (mean tree size without the root), depth, α per (dataset, category) of one policy (EDD Fig. 7)."""
    steps = replay_steps(logbook, policy)
    return pd.DataFrame([{"dataset": d, "category": c, "prompts": g.prompt.nunique(), **totals(g)}
                         for (d, c), g in steps.groupby(["dataset", "category"])])


def eagle2_sweep(Ns: Sequence[int], K: int = 10, d_max: int = 6) -> list[Policy]:
    """EAGLE-2 top-N sweep (C2T Table 4's K = 10, d_max = 6 by default; Fig. 4 runs K 15, d_max 10)."""
    return [Eagle2(K=K, d_max=d_max, N=n) for n in Ns]


C2T_TOPKS = (0, 4, 8, 15, 20, 25, 30)  # second pruning per layer: none, two below K, C2T Table 5's 15–30


def c2t_sweep(betas: Sequence[float], topks: Sequence[int] = C2T_TOPKS, K: int = 10, d_max: int = 6,
              classifier: str = "smollm2-edd") -> list[Policy]:
    """C2T β sweep without (topk 0) and with second pruning, topk nodes per layer (C2T Fig. 4, Table 5)."""
    return [C2T(beta=b, K=K, d_max=d_max, topk=t, classifier=classifier) for t in topks for b in betas]


DYMAX_THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)  # max probability; C2T Table 3 runs 0.3
DYJOINT_THRESHOLDS = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32)  # joint probability; C2T Table 3 runs 0.08
CHAIN_BETA = 0.85  # C2T's β in chain mode (C2T Table 3)


def chain_sweep(d_max: int = 10, lengths: Optional[Sequence[int]] = None, classifier: Optional[str] = None,
                betas: Sequence[float] = (), dymax: Sequence[float] = DYMAX_THRESHOLDS,
                dyjoint: Sequence[float] = DYJOINT_THRESHOLDS) -> list[Policy]:
    """Chain mode (C2T Table 3), each method's knob swept so that they can be compared at a matched γ or τ (the
    paper's table compares them at nearly equal γ): fixed lengths (EAGLE-1/2; the paper runs 5–9, default here
    1..d_max), DyMax and DyJoint thresholds (the paper's 0.3 and 0.08 among them), Gunjur's entropy cutoff 1.0,
    and, given a classifier, C2T as an early exit (K = 1) at every β of `betas` and the paper's 0.85."""
    lengths = range(1, d_max + 1) if lengths is None else lengths
    out: list[Policy] = [Chain(k=k) for k in lengths if k <= d_max]
    out += [Chain(k=d_max, stop="dymax", threshold=t) for t in sorted({*dymax, 0.3})]
    out += [Chain(k=d_max, stop="dyjoint", threshold=t) for t in sorted({*dyjoint, 0.08})]
    out += [Chain(k=d_max, stop="entropy", threshold=1.0)]
    betas = sorted({*betas, CHAIN_BETA})
    return out + ([C2T(beta=b, K=1, d_max=d_max, topk=0, classifier=classifier) for b in betas] if classifier else [])


EDD_EAGLE2 = (10, 6, 50)  # EAGLE-2 as EDD ran it: 10 per expansion, depth 6, "total number of draft tokens" 50 (EDD l.1370: EAGLE-2's total_token, the root counted)
PCT_RATIO_PAPER = round(1.1 / 29.8, 3)  # EDD's s_d/s_t, its 7B pair (EDD l.1388: 1.1 ms / 29.8 ms): 0.037


def edd_table2_sweep(K: int = 10, d_max: int = 6, N: int = 50, pct_ratio: float = PCT_RATIO_PAPER,
                     pct_depth: int = 10, Ns: Sequence[int] = (), pct_ratio_machine: Optional[float] = None
                     ) -> list[Policy]:
    """EDD Table 2 as EDD ran it: VCT (width 3, depth 5), CAPE (depth 5), EAGLE-2 (10 per expansion, depth 6, N
    draft tokens: 50), PCT (width 5, depth 10) at s_d/s_t `pct_ratio` (the paper's); K and d_max only cap them to the
    logbook. EAGLE-2 at the other sizes `Ns` gives its τ(N) curve, on which PCT's τ is matched (Table 2 compares α at
    equal τ). With `pct_ratio_machine`, PCT at that s_d/s_t too: a second, labelled reading."""
    eagle2 = [Eagle2(K=min(10, K), d_max=min(6, d_max), N=n) for n in sorted({*Ns, N})]
    ratios = dict.fromkeys([pct_ratio] + ([pct_ratio_machine] if pct_ratio_machine else []))
    return [VCT(w=3, d=5), CAPE(d=5), *eagle2, *(PCT(ratio=r, k=min(5, K), d_max=pct_depth) for r in ratios)]


def width_sweep(widths: Sequence[int], d: int = 3, pct_ratio: float = PCT_RATIO_PAPER,
                pct_depth: int = 10) -> list[Policy]:
    """Expansion width: full b-ary trees of depth d, and PCT's width k at s_d/s_t `pct_ratio` (EDD Fig. 6)."""
    return [Kary(b=b, d=d) for b in widths] + [PCT(ratio=pct_ratio, k=b, d_max=pct_depth) for b in widths]


DYSPEC_CAP = 8  # children per node of live drafting's DySpec (the capped reading; DySpec's Alg. 1 has no cap)


def budget_sweep(budgets: Sequence[int], K: int = DYSPEC_CAP, d_max: int = 11,
                 acceptance: Optional[Sequence[float]] = None, dyspec_d_max: Optional[int] = None) -> list[Policy]:
    """DySpec at budget m (Alg. 1 uncapped, K = m, and capped at K children a node; its threshold tree at t = 1/m,
    DySpec §4.4: `logtree.budget_policies`, what a DySpec logbook logs, to depth `dyspec_d_max`, d_max by default)
    against static trees of m draft tokens: SpecInfer-style sequences (k·d = m, k ≤ K, d ≤ d_max) and, given an
    acceptance vector (`strategies.sequoia.acceptance_vector`), Sequoia's tree."""
    out: list[Policy] = []
    for m in budgets:
        out += budget_policies([m], K, dyspec_d_max or d_max)
        ds = [d for d in range(1, min(d_max, m // 2) + 1) if m % d == 0 and m // d <= K]  # k = m / d ≥ 2
        d = min([d for d in ds if d * d >= m] or ds[-1:] or [0])  # the squarest shape, deeper than wide
        out += [Sequences(k=m // d, d=d)] if d else []
        out += [Sequoia(n=m, p=sequoia_p(acceptance))] if acceptance else []
    return out


def dyspec_caps(logbook: Union[Logbook, Forest], budgets: Sequence[int], cap: int = DYSPEC_CAP,
                d_max: Optional[int] = None) -> pd.DataFrame:
    """How often the caps of a capped DySpec would bind, per budget m: over the trees uncapped Alg. 1 (K = m, at
    depth d_max: the logbook's) grows at the positions its replay visits, the share that put more than `cap`
    children under some node (`cap_binds`: a K = cap tree cannot be the same), the mean children of the root, the
    most under one node, and the share that reach d_max (`reaches_d_max`: the depth cap may bind). A budget the
    logbook cannot replay is a row with its reason."""
    forest = as_forest(logbook)
    d_max = d_max or min(lp.d_max for lp in forest.logbook)
    parents, depth, rows = forest.cols["parents"], forest.cols["depth"], []
    for m in budgets:
        try:
            growth = grow_forest(forest, DySpec(m=m, K=m, d_max=d_max))
        except SpectreeError as err:
            rows.append({"m": m, "cap": cap, "d_max": d_max, "replayable": False, "reason": str(err)})
            continue
        visited = visited_steps(forest, growth).tree.to_numpy()  # [steps] the trees decoding meets
        kept = growth.kept
        kids = np.bincount(parents[kept & (parents >= 0)], minlength=len(forest))  # [N] kept children per node
        widest, deepest = np.zeros(forest.n_trees, np.int64), np.zeros(forest.n_trees, np.int64)
        np.maximum.at(widest, forest.tree, kids)
        np.maximum.at(deepest, forest.tree[kept], depth[kept])
        roots = np.flatnonzero(parents < 0)  # a tree's root row, tree by tree
        rows.append({"m": m, "cap": cap, "d_max": d_max, "replayable": True, "reason": "", "trees": len(visited),
                     "cap_binds": float(np.mean(widest[visited] > cap)),
                     "root_children": float(np.mean(kids[roots][visited])),
                     "max_children": int(widest[visited].max(initial=0)),
                     "reaches_d_max": float(np.mean(deepest[visited] >= d_max))})
    return pd.DataFrame(rows)


def gunjur_sweep(d: int = 4, deep: int = 8, cutoff: float = 2.5) -> list[Policy]:
    """Gunjur et al.: static b = 2, d = 4; simple cutoff (H > 1) and naive width on the same chain (at most `deep`
    tokens: the paper states no limit); dyn width + depth (B = 0 above `cutoff`: ours, the paper gives no function);
    dyn width only (depth 4)."""
    return [Kary(b=2, d=4), Chain(k=deep, stop="entropy", threshold=1.0), EntropyBranching(d=deep, cutoff=cutoff),
            EntropyBranching(d=d), NaiveWidth(k=4, d=deep)]


def standard_sweeps(K: int = 10, d_max: int = 11, depth: int = 6, Ns: Sequence[int] = (10, 20, 40, 60, 80),
                    betas: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8), topks: Sequence[int] = C2T_TOPKS,
                    budgets: Sequence[int] = (8, 16, 32, 64), widths: Sequence[int] = (1, 2, 3, 4, 5),
                    pct_ratio: float = PCT_RATIO_PAPER, classifier: Optional[str] = None,
                    acceptance: Optional[Sequence[float]] = None, pct_ratio_machine: Optional[float] = None,
                    dyspec_d_max: Optional[int] = None, dyspec_cap: Optional[int] = None) -> dict[str, list[Policy]]:
    """Every standard sweep by group, sized for a logbook with K children per node and depth d_max
    (`depth` is the EAGLE-2 / C2T tree depth). Without a classifier the C2T policies are left out. PCT runs at
    s_d/s_t `pct_ratio` (the paper's by default), and at `pct_ratio_machine` too in EDD Table 2 when given; DySpec's
    uncapped settings (K = m) replay only on a DySpec logbook (`replay.logbook.dyspec_logbook`, to `dyspec_d_max`,
    with its cap `dyspec_cap`; without one, the capped DySpec offers at most this logbook's K)."""
    c2t = c2t_sweep(betas, topks, K, depth, classifier) if classifier else []
    return {"c2t_fig4": eagle2_sweep(Ns, K, depth) + c2t,
            "chain_table3": chain_sweep(min(10, d_max), classifier=classifier, betas=betas),
            "edd_table2": edd_table2_sweep(K, depth, pct_ratio=pct_ratio, pct_depth=min(10, d_max), Ns=Ns,
                                           pct_ratio_machine=pct_ratio_machine),
            "widths": width_sweep(widths, min(3, d_max), pct_ratio, min(10, d_max)),
            "budgets": budget_sweep(budgets, dyspec_cap or min(DYSPEC_CAP, K), d_max, acceptance, dyspec_d_max),
            "gunjur": gunjur_sweep(min(4, d_max), d_max)}


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
              valid_share: float = 0.2, pair: Optional[str] = None) -> tuple[Path, pd.DataFrame]:
    """Train C2T's classifier on the nodes of `train` (a random `valid_share` picks the epoch), save it as
    data/c2t/<name>.safetensors (`c2t:classifier=<name>` loads it); returns the path and per-epoch table. `pair`
    (the logbook's) goes on its card, so the analysis notebooks find the classifier of their pair."""
    return fit_and_save(train, None, artifact_path("c2t", name), cfg, valid_share=valid_share,
                        card={"pair": pair} if pair else None)


def scored(table: pd.DataFrame, group: str, name: Optional[str] = None, **params: Any) -> pd.DataFrame:
    """The replayable whole-logbook rows of `group` in a sweep table, optionally one name and parameter values."""
    rows = table[(table.group == group) & (table.dataset == "all") & table.replayable.astype(bool)]
    rows = rows[rows.name == name] if name else rows
    for key, value in params.items():
        rows = rows[np.array([p.get(key) == value for p in rows.params], dtype=bool)]  # [] selects no columns
    return rows


# --- a method's knob sweep read as a curve, at a matched γ or τ (C2T Fig. 4, Tables 2–3; EDD Table 2) -------

def frontier(tau: Any, gamma: Any) -> tuple[np.ndarray, np.ndarray]:
    """(γ, τ) of one method's τ(γ) curve from its knob sweep (τ, γ: one value per setting, per forward): the best
    τ its settings reach with at most γ candidates, from (0, 1) (drafting nothing: τ is the bonus token alone)
    through each setting that raises it, in γ order; a setting beaten by a cheaper one is left out."""
    g, t = np.r_[0.0, np.asarray(gamma, dtype=float)], np.r_[1.0, np.asarray(tau, dtype=float)]
    ok = np.isfinite(g) & np.isfinite(t)
    g, t = g[ok], t[ok]
    order = np.lexsort((-t, g))  # by γ, the best τ first among equal γ
    g, t = g[order], t[order]
    raises = np.r_[True, t[1:] > np.maximum.accumulate(t)[:-1]]
    return g[raises], t[raises]


def tau_at_gamma(tau: Any, gamma: Any, at: Any) -> np.ndarray:
    """τ of a method's curve (`frontier`, linear between settings) at γ = `at`; NaN beyond its largest γ."""
    g, t = frontier(tau, gamma)
    at = np.asarray(at, dtype=float)
    return np.where(at <= g[-1], np.interp(at, g, t), np.nan)


def gamma_at_tau(tau: Any, gamma: Any, at: Any) -> np.ndarray:
    """γ a method's curve (`frontier`, linear between settings) needs to reach τ = `at`; NaN above its best τ."""
    g, t = frontier(tau, gamma)
    at = np.asarray(at, dtype=float)
    return np.where(at <= t[-1], np.interp(at, t, g), np.nan)


def along_tau(tau: Any, value: Any, at: Any) -> np.ndarray:
    """Another rate of a method's settings (α), read off at τ = `at` linearly between the settings ordered by τ;
    NaN outside the τ they span."""
    tau, value = np.asarray(tau, dtype=float), np.asarray(value, dtype=float)
    ok = np.isfinite(tau) & np.isfinite(value)
    order = np.argsort(tau[ok], kind="stable")
    t, v, at = tau[ok][order], value[ok][order], np.asarray(at, dtype=float)
    if not len(t):
        return np.full(at.shape, np.nan)
    return np.where((at >= t[0]) & (at <= t[-1]), np.interp(at, t, v), np.nan)


@dataclass(frozen=True)
class Curve:
    """One method's settings (a knob sweep) in one resample of the prompts: pooled τ, γ and α per setting."""
    tau: np.ndarray
    gamma: np.ndarray
    alpha: np.ndarray


Reading = Callable[[Curve, Curve], float]  # (the method's curve, the reference's) → the compared statistic


def _over_settings(values: np.ndarray, how: Callable[[np.ndarray], float], min_reached: int) -> float:
    values = values[np.isfinite(values)]
    return float(how(values)) if len(values) >= min_reached else math.nan


def gamma_share(how: Callable[[np.ndarray], float] = np.median, min_reached: int = 1) -> Reading:
    """The γ the method's curve needs at each reference setting's τ (`gamma_at_tau`), as a share of that
    setting's γ, aggregated by `how` over the settings it reaches (NaN below min_reached of them)."""
    return lambda a, b: _over_settings(gamma_at_tau(a.tau, a.gamma, b.tau) / b.gamma, how, min_reached)


def tau_gain(how: Callable[[np.ndarray], float] = np.median, min_reached: int = 1) -> Reading:
    """τ of the method's curve at each reference setting's γ (`tau_at_gamma`) minus that setting's τ,
    aggregated by `how` over the settings whose γ it spans (NaN below min_reached of them)."""
    return lambda a, b: _over_settings(tau_at_gamma(a.tau, a.gamma, b.gamma) - b.tau, how, min_reached)


def gamma_own_share(a: Curve, b: Curve) -> float:
    """The method's (first) setting's γ as a share of the γ the reference's curve needs to reach its τ
    (`gamma_at_tau`): 'X with Y% of the nodes' read at matched τ; NaN where the reference never reaches that τ."""
    return float(a.gamma[0] / gamma_at_tau(b.tau, b.gamma, a.tau[0]))


def alpha_gain(a: Curve, b: Curve) -> float:
    """α of the method's (first) setting minus the α of the reference's curve at the same τ (`along_tau`)."""
    return float(a.alpha[0] - along_tau(b.tau, b.alpha, a.tau[0]))
