"""The live speed benchmark of every strategy family, laid out as the papers lay theirs out.

All numbers come from one `bench.run_strategies` run (HF `generate` and every strategy interleaved prompt
by prompt), summarised by `bench.summarize_runs`: tokens/s, speedup over HF `generate`, τ (accepted + 1
per target forward), γ (draft tokens verified per forward) and the time split (draft / verify / tree
construction).

Every policy decodes at every temperature: at T > 0 the sampling-safe ones draw their children without replacement
and are verified by DySpec's Alg. 3, the others (EAGLE-2's rerank, DyJoint, C2T, PCT's leaf removal) are offered the
draft's top-K, each child verified as a fixed proposal (`core.drafting.offer_sampling`; both χ²-tested); every row
of Gunjur's table takes its top tokens as fixed proposals (its Alg. 1), its baseline chain too, so that one rule
verifies that table. Comparisons are laid out as the papers make them: DySpec against SpecInfer-style sequences and
Sequoia at the same node budget, Gunjur's methods against its baseline, chain speculative decoding with 4 tokens.
The claims that judge them: `speed.speed_claims`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from spectree.claims.claims import Evidence, bootstrap_rule, pooled_difference, pooled_quotient
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.prompts import Prompt
from spectree.speed.bench import Run, run_strategies, summarize_runs
from spectree.speed.references import HF, REFERENCES
from spectree.claims.names import AR_LABEL, spec_label
from spectree.strategies.c2t import C2T
from spectree.strategies.cape import CAPE
from spectree.strategies.chain import Chain, autoregressive
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.gunjur import EntropyBranching, NaiveWidth
from spectree.strategies.pct import PCT
from spectree.strategies.sequoia import Sequoia
from spectree.strategies.static import VCT, Kary, Sequences


GUNJUR_PAPER_GUARD = 1 + 7 + 7 ** 2 + 7 ** 3 + 7 ** 4  # B(H) ≤ 7 to "a fixed depth of four" (s1 l.131, l.143)
GUNJUR_BASELINE = "chain-4"  # Gunjur et al.'s baseline: speculative decoding without tree batches, 4 tokens
GUNJUR_ROWS = {"Baseline": GUNJUR_BASELINE, "Static": "static b=2 d=4", "Simple cutoff": "simple cutoff",
               "Dyn width+depth": "dyn width + depth", "Dyn width only": "dyn width only"}  # Fig. 2's table
GUNJUR_SCATTER = (*GUNJUR_ROWS.values(), "naive width")  # Fig. 5/6: naive width is read off Fig. 5 (s1 l.129), not in Fig. 2


def equal_budget_sequences(m: int, K: int = 8) -> Sequences:
    """SpecInfer-style sequences of m draft tokens (k sequences of d, k·d = m, k ≤ K): the squarest such shape,
    deeper than wide (DySpec Tables 1–2 compare trees of one budget)."""
    shapes = [(m // d, d) for d in range(1, m + 1) if m % d == 0 and m // d <= K]
    if not shapes:
        raise SpectreeError(f"no SpecInfer-style shape of {m} draft tokens with at most {K} sequences")
    k, d = min(shapes, key=lambda s: (s[1] < s[0], s[1] - s[0]))  # deeper than wide first, then the squarest
    return Sequences(k=k, d=d)


def speed_strategies(sd_over_st: float, acceptance: str, classifier: Optional[str], budget: int = 32,
                     K: int = 8, depth: int = 6, gunjur_depth: int = 4, gunjur_guard: Optional[int] = None
                     ) -> dict[str, Policy]:
    """label → policy for the live table (PCT's s_d/s_t and Sequoia's p are measured inputs). EAGLE-2 and C2T draft
    with K children per node to `depth` (C2T's main tables: 15 and 10); DySpec (Alg. 1 as written: K = m, no child
    cap), SpecInfer-style sequences and Sequoia get the same `budget` of draft tokens (DySpec Tables 1–2: 64);
    Gunjur's rows are `gunjur_strategies` at `gunjur_depth` (the paper's 4: with a draft of high entropy B(H) = 7 at
    every node, 2,801 nodes a tree, past the CPU's node guard unless `gunjur_guard` raises it for them). Besides the
    papers' settings it times three small trees, the sizes a CPU rewards on prepacked kernels (docs/decoder.md)."""
    threshold_K, dyspec_d = max(8, K), max(DYSPEC_DEPTH, depth)
    gunjur = gunjur_strategies(gunjur_depth, gunjur_guard)
    policies: dict[str, Policy] = {
        AR_LABEL: autoregressive(),
        "chain-2": Chain(k=2),
        GUNJUR_BASELINE: gunjur.pop(GUNJUR_BASELINE),
        "chain-5": Chain(k=5),
        **gunjur,
        **labelled_rows(VCT(w=3, d=5)),
        "DyMax chain": Chain(k=10, stop="dymax", threshold=0.3),
        "DyJoint chain": Chain(k=10, stop="dyjoint", threshold=0.08),
        **budget_rows(budget, acceptance, K, depth),
        **labelled_rows(Eagle2(K=4, d_max=3, N=5), DySpec(m=4, K=4, d_max=4)),
        "DySpec threshold": DySpecThreshold(t=round(1 / budget, 4), K=threshold_K, d_max=dyspec_d),  # t ≈ 1/n, §4.4
        "PCT": PCT(ratio=round(sd_over_st, 3), k=5, d_max=10),
        "CAPE": CAPE(d=5),
    }
    if classifier:  # C2T's main tables: one TopK for both prunings (K per node scored, K per layer kept)
        policies.update(c2t_rows(classifier, K, depth, (C2T_BETA,)))
    return policies


def labelled_rows(*policies: Policy) -> dict[str, Policy]:
    """label → policy, each label read off its policy's spec (`names.spec_label`)."""
    return {spec_label(p): p for p in policies}


def sampled(rows: dict[str, Policy], labels: Sequence[str]) -> dict[str, Policy]:
    """The rows a profile decodes at T > 0: those of `labels` (every row when empty). A label no row has is an error
    naming the labels there are, so a misspelt profile fails before any decoding, not with a missing row later."""
    unknown = [label for label in labels if label not in rows]
    if unknown:
        raise SpectreeError(f"sampled_rows names {unknown}, which no row has; the rows are: {sorted(rows)}")
    return {k: v for k, v in rows.items() if k in labels} if labels else dict(rows)


BUDGET_ROLES = ("sequences", "sequoia", "eagle2", "dyspec")  # the trees of one draft-token budget, by strategy name


def budget_rows(budget: int, acceptance: str = "", K: int = 8, depth: int = 6) -> dict[str, Policy]:
    """label → policy of the trees of `budget` draft tokens (DySpec Tables 1–2 compare them; C2T's EAGLE-2):
    SpecInfer-style sequences (`equal_budget_sequences`), Sequoia (positional acceptance `acceptance`), EAGLE-2 of N =
    budget + 1 (N counts the root: `budget` drafts; K children to `depth`) and DySpec (Alg. 1 as written: K = m, no
    child cap), each labelled from its spec."""
    sequoia = Sequoia(n=budget, p=acceptance) if acceptance else Sequoia(n=budget)
    return labelled_rows(equal_budget_sequences(budget), sequoia, Eagle2(K=K, d_max=depth, N=budget + 1),
                         DySpec(m=budget, K=budget, d_max=max(DYSPEC_DEPTH, depth)))


def draft_budget(policy: Policy) -> Optional[int]:
    """The draft tokens a tree of `BUDGET_ROLES` verifies by its spec (k·d, n, N − 1, m); None for other policies."""
    sizes = {"sequences": lambda p: p.k * p.d, "sequoia": lambda p: p.n, "eagle2": lambda p: p.N - 1,
             "dyspec": lambda p: p.m}
    return sizes[policy.name](policy) if policy.name in sizes else None


def budget_labels(budget: int, policies: Optional[dict[str, Policy]] = None) -> dict[str, str]:
    """Strategy name (`BUDGET_ROLES`) → the label of its tree of `budget` draft tokens: the label `policies` (label →
    policy, as run) gave it (the first of that name and budget), else `budget_rows`'."""
    out = {p.name: label for label, p in budget_rows(budget).items()}
    found = {}
    for label, p in (policies or {}).items():
        if draft_budget(p) == budget:
            found.setdefault(p.name, label)
    return {**out, **found}


C2T_BETA = 0.5  # the C2T row of every temperature's table; `c2t_rows` adds a β curve to the greedy run
DYSPEC_DEPTH = 11  # DySpec's depth guard: its m = 64 trees are "typically less than 10" deep (s2 l.178)
GUNJUR_PAPER_DEPTH = 4  # Gunjur's trees: "a fixed depth of four" (s1 l.131, l.143)
GUNJUR_PAPER_TEMPERATURE = 0.4  # Gunjur Fig. 2's runs: T = 0.4 (s1 l.123)


def gunjur_strategies(depth: int = GUNJUR_PAPER_DEPTH, guard: Optional[int] = None) -> dict[str, Policy]:
    """label → policy for Gunjur et al.'s Fig. 2 rows and Fig. 5's naive width, its B(H) trees to `depth` (the
    paper's 4), their node guard `guard` (`GUNJUR_PAPER_GUARD` admits the paper's depth-4 tree; None: the CPU's).
    One rule at T > 0, its Alg. 1: the draft's top tokens, each verified as a fixed proposal (matching the target's
    sample); so its baseline chain-4 is `kary:b=1,d=4,offer=top` and simple cutoff `naive_width:k=1,d=10` (the
    entropy-cutoff chain), each the same tree as the chain under greedy decoding."""
    rows: dict[str, Policy] = {
        GUNJUR_BASELINE: Kary(b=1, d=4, offer="top"),  # a chain of 4, its top token at T > 0 (Alg. 1)
        "static b=2 d=4": Kary(b=2, d=4, offer="top"),  # Gunjur's static tree: the top b, as its dynamic ones
        "simple cutoff": NaiveWidth(k=1, d=10, cutoff=1.0),  # Gunjur's: chain:k=10,stop=entropy, top-1 at T > 0
        "naive width": NaiveWidth(k=4, d=10, cutoff=1.0),  # Gunjur Fig. 5: simple cutoff's chain, top 4 at its end
        "dyn width only": EntropyBranching(d=depth),
        # the paper gives no depth rule (s1 l.149–151): a branch stops where H > 2.5, up to dyn width only's depth
        "dyn width + depth": EntropyBranching(d=depth, cutoff=2.5),
    }
    if guard is not None:  # the paper fixes no node count (s1 l.149): its tree, not the CPU, sets the guard
        for label in ("dyn width only", "dyn width + depth"):
            rows[label].max_nodes = guard
    return rows


def c2t_rows(classifier: str, K: int = 8, depth: int = 6, betas: Sequence[float] = (C2T_BETA,)) -> dict[str, Policy]:
    """'C2T β=X' → C2T at each β (TopK K for both prunings, as its main tables; without the second one the trees
    outgrow the node guard here): the curve `speed_claims` reads at EAGLE-2's τ."""
    return {f"C2T β={b:g}": C2T(beta=b, K=K, d_max=depth, topk=K, classifier=classifier) for b in betas}


def speed_table(runs: list[Run]) -> pd.DataFrame:
    """`summarize_runs` with a readable `method` per row (the run labels; HF generate first): `speedup` is over HF
    generate on the same machine in the same run (`names.VS_HF`), and with our AR loop among the rows
    `speedup_vs_our_ar_loop` (`names.VS_AR`) beside it. A column with no value in any row is left out: the
    projection's (`projected`, `projected_error`) unless a step model priced the runs (`run_strategies(cost=)`),
    `speedup_same_kernels` without HF generate on our kernels; runs decoded at T > 0 (`Run.sampled`) get no `exact`
    column, since a sample matches HF's only by chance."""
    table = summarize_runs(runs)
    table.insert(0, "method", [REFERENCES.get(s, s) for s in table.strategy])
    if (table.strategy == AR_LABEL).any():
        ar = float(table.loc[table.strategy == AR_LABEL, "speedup"].iloc[0])
        table.insert(list(table.columns).index("speedup") + 1, "speedup_vs_our_ar_loop", table.speedup / ar)
    empty = [c for c in table.columns if c not in _KEPT and table[c].isna().all()]  # e.g. unpriced: no projection
    return table.drop(columns=empty)


_KEPT = ("method", "strategy", "tokens_per_s", "speedup", "tau", "gamma", "exact")  # read by row in every table


def speculative(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a speed table (indexed by method) that speculate: our loop's rows that verified draft or
    retrieval tokens (γ > 0). The reference rows and plain decoding through our loop (γ = 0, whatever its label:
    `bench`'s `ar`, the notebooks' AR_LABEL) are left out."""
    t = table.set_index("method")
    return t[~t.index.isin(list(REFERENCES.values())) & (t.gamma > 0)]


def best_tree(table: pd.DataFrame) -> str:
    """The label of the fastest model tree in a speed table (the highest `speedup` of the `speculative` rows)."""
    trees = speculative(table).speedup.dropna()
    if trees.empty:
        raise SpectreeError("no timed model-tree row in this table")
    return str(trees.idxmax())


def head_reference(models, reference, policies: dict[str, Policy], prompts: list[Prompt], max_new_tokens: int,
                   **run) -> list[Run]:
    """One run (HF generate interleaved) of `policies` on the pair's own draft and again, labelled 'LABEL (HEAD)',
    on `reference` = (drafter, head in words) from `loading.reference_draft`: e.g. chain-2 and the best tree with the
    full head beside the reduced head the table times, so that the two heads are compared side by side."""
    draft, head = reference
    other = {f"{label} ({head})": policy for label, policy in policies.items()}
    return run_strategies(models, prompts, {**policies, **other}, max_new_tokens,
                          drafts=dict.fromkeys(other, draft), **run)


def saved_best_tree(pair: str, machine: str, summary: Path) -> tuple[Optional[str], str]:
    """(spec, why) of the best model tree a speed notebook recorded in `summary` (its `best_tree`) for `pair` on
    `machine` (`machine.machine_id`); (None, why not) when the file is missing or was made for another pair or
    on another machine."""
    try:
        saved = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None, f"no {summary}"
    best = saved.get("best_tree") if isinstance(saved, dict) else None
    if not isinstance(best, dict) or not best.get("spec"):
        return None, f"{summary} records no best tree"
    if saved.get("pair") != pair or saved.get("machine") != machine:
        return None, (f"{summary} is of pair {saved.get('pair')} on machine {saved.get('machine')}, "
                      f"not {pair} on {machine}")
    return str(best["spec"]), f"{best.get('label')} was the fastest model tree in {summary} ({best.get('speedup')}×)"


def per_prompt(runs: list[Run]) -> pd.DataFrame:
    """One row per (prompt, strategy) — per repeat, with a `repeat` column, when `run_strategies` repeated them:
    tokens/s, time saved against HF generate on the same prompt in the same repeat, γ per token (wasted work =
    candidates that were not accepted)."""
    df = pd.DataFrame([r.__dict__ for r in runs]).assign(n_tokens=lambda d: d.tokens.map(len))
    hf = df[df.strategy == HF].set_index(["prompt", "repeat"]).seconds
    df["time_saved"] = 1 - df.seconds / hf.reindex(pd.MultiIndex.from_frame(df[["prompt", "repeat"]])).to_numpy()
    df["wasted_per_token"] = (df.gamma_sum - (df.tau_sum - df.forwards)) / df.n_tokens.clip(lower=1)
    repeat = ["repeat"] if df.repeat.gt(0).any() else []
    return df[df.strategy != HF][["prompt", "category", "strategy", *repeat, "n_tokens", "seconds", "time_saved",
                                  "wasted_per_token"]]


def by_category(runs: list[Run]) -> pd.DataFrame:
    """One row per (prompt category, method), categories in prompt order and HF generate first within each:
    the prompts, tokens/s, speedup over HF generate on the same category's prompts (the median over repeats), and τ
    (pooled over prompts and repeats, as `speed_table` pools them). MT-bench files give their eight categories,
    HumanEval 'code', a prompt file without categories its stem, `lengths.long_prompts` its lengths ('1k', …)."""
    cols = ["category", "method", "prompts", "tokens_per_s", "speedup", "tau"]
    frames = []
    for category in dict.fromkeys(r.category for r in runs):
        subset = [r for r in runs if r.category == category]
        if not any(r.strategy == HF for r in subset):
            continue  # no reference on these prompts: no speedup to state
        table = speed_table(subset).sort_values("strategy", key=lambda s: s != HF, kind="stable")  # HF first
        prompts = len({r.prompt for r in subset})
        frames.append(table.assign(category=category, prompts=prompts)[cols])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def gunjur_table(table: pd.DataFrame) -> pd.DataFrame:
    """Gunjur et al.'s Fig. 2 table: % time saved against its baseline (chain speculative decoding of 4 tokens),
    and tokens/s (empty without the baseline row)."""
    t = table.set_index("method")
    if GUNJUR_BASELINE not in t.index:
        return pd.DataFrame(columns=["method", "time_saved_pct", "tokens_per_s"])
    base = t.loc[GUNJUR_BASELINE, "ms_per_token"]
    return pd.DataFrame([{"method": k, "time_saved_pct": 100 * (1 - t.loc[v, "ms_per_token"] / base),
                          "tokens_per_s": t.loc[v, "tokens_per_s"]} for k, v in GUNJUR_ROWS.items() if v in t.index])


def wasted_passes(runs: list[Run]) -> pd.DataFrame:
    """Per (strategy, prompt, repeat): seconds and the draft passes thrown away, Σ over steps of the tree's depth −
    its accepted tokens (τ − 1): the layers drafted past the first mismatch (Gunjur s1 l.127); the depth is the
    run's `depth_sum` (NaN for the reference rows, which draft nothing)."""
    df = pd.DataFrame([r.__dict__ for r in runs])
    df["wasted"] = df.depth_sum.astype(float) - (df.tau_sum - df.forwards)
    return df[["strategy", "prompt", "category", "repeat", "seconds", "wasted"]]


def gunjur_per_prompt(runs: list[Run]) -> pd.DataFrame:
    """Gunjur et al. Fig. 5/6: one row per (method, prompt, repeat) of Gunjur's methods — seconds saved against
    its baseline, chain-4, on the same prompt and repeat (seconds(chain-4) − seconds(method), per prompt as the
    paper subtracts them) and the reduction in wasted draft passes (wasted(chain-4) − wasted(method),
    `wasted_passes`). Both > 0 favour the method (s1 l.127)."""
    df = wasted_passes(runs)
    base = df[df.strategy == GUNJUR_BASELINE].set_index(["prompt", "repeat"])
    rows = df[df.strategy.isin(GUNJUR_SCATTER) & (df.strategy != GUNJUR_BASELINE)]
    key = pd.MultiIndex.from_frame(rows[["prompt", "repeat"]])
    return rows.assign(seconds_saved=base.seconds.reindex(key).to_numpy() - rows.seconds,
                       wasted_reduction=base.wasted.reindex(key).to_numpy() - rows.wasted).reset_index(drop=True)


def dyspec_layout(tables: dict[float, pd.DataFrame], budget: int = 32,
                  policies: Optional[dict[str, Policy]] = None) -> pd.DataFrame:
    """DySpec Tables 1–2 layout: tokens per step (τ) and latency per token (ms) of the trees of one budget, per
    temperature (the threshold tree beside them, its size its own); rows labelled as `policies` (as run) labelled
    them (`budget_labels`)."""
    labels = budget_labels(budget, policies)
    methods = [labels["sequences"], labels["sequoia"], labels["dyspec"], "DySpec threshold"]
    rows = []
    for temp, table in tables.items():
        t = table.set_index("method")
        rows += [{"temperature": temp, "method": m, "tokens_per_step": t.loc[m, "tau"], "gamma": t.loc[m, "gamma"],
                  "ms_per_token": t.loc[m, "ms_per_token"]} for m in methods if m in t.index]
    return pd.DataFrame(rows)


_COUNTS = ["n_tokens", "seconds", "forwards", "tau_sum", "gamma_sum", "draft_s", "verify_s", "tree_s", "priced_s",
           "priced_draft_s", "priced_verify_s", "priced_tree_s"]


def prompt_rows(runs: list[Run]) -> pd.DataFrame:
    """One row per (method, prompt), labelled by `speed_table`'s method names: its counts and seconds summed over
    the repeats, so that a bootstrap over the rows resamples prompts (a pooled rate Σ num / Σ den is unchanged)."""
    df = pd.DataFrame([r.__dict__ for r in runs]).assign(n_tokens=lambda d: d.tokens.map(len))
    df = df.groupby(["strategy", "prompt"], sort=False)[_COUNTS].sum(min_count=1).reset_index()  # unpriced: NaN
    return df.assign(method=df.strategy.map(lambda s: REFERENCES.get(s, s)))


def aligned(rows: pd.DataFrame, *methods: str) -> list[pd.DataFrame]:
    """The per-prompt rows of each method on the prompts all of them decoded, in one order."""
    frames = [rows[rows.method == m].set_index("prompt") for m in methods]
    common = sorted(set.intersection(*(set(f.index) for f in frames)))
    return [f.loc[common] for f in frames]


def versus(rows: pd.DataFrame, a: str, b: str, num: str, den: str, bar: float, what: str, *,
            quotient: bool = True, above: bool = True, strict: bool = False) -> Evidence:
    """Pooled Σ num / Σ den of method a against method b (quotient or difference), paired over prompts."""
    fa, fb = aligned(rows, a, b)
    return bootstrap_rule([fa[num], fa[den], fb[num], fb[den]], pooled_quotient if quotient else pooled_difference,
                          bar, what, above=above, strict=strict)


__all__ = ["speed_strategies", "labelled_rows", "BUDGET_ROLES", "budget_rows", "draft_budget", "budget_labels",
           "C2T_BETA", "c2t_rows", "equal_budget_sequences", "speed_table", "best_tree",
           "head_reference", "saved_best_tree", "per_prompt", "by_category", "gunjur_table", "GUNJUR_PAPER_GUARD",
           "GUNJUR_BASELINE", "GUNJUR_ROWS", "gunjur_strategies", "GUNJUR_PAPER_DEPTH",
           "GUNJUR_PAPER_TEMPERATURE", "DYSPEC_DEPTH", "wasted_passes", "GUNJUR_SCATTER", "gunjur_per_prompt", "dyspec_layout",
           "prompt_rows", "aligned", "versus"]
