"""τ of drafts under a draft tree, decoded live and greedily: EDD Table 3's ablations and EDD Fig. 5.

EDD measures each ablation of Table 3 as EDD + PCT (s3 l.719–753: speedup, α and τ on MT-bench, LLaMA2-Chat 7B)
and Fig. 5's hidden layers by τ (s3 l.680). Here every (draft, tree policy) pair decodes the prompts greedily with
`core.decode.speculative_generate`, each prompt's policies from one shared prefill of the target; a row per target
forward (prompt, τ, γ, tree depth) is pooled as notebook 02 pools replayed trees (`sweeps.totals`: τ, γ, α = Σ τ /
Σ depth, EDD's "accepted length / maximum depth"), and the per-prompt sums (`sweeps.prompt_sums`) feed the paired
bootstrap of `sweep_claims.compare`. Greedy decoding is lossless, so every policy commits the same text: τ and γ are
properties of the draft and the tree, not of the sampled output. Speed is not timed here (notebook 03 times).

The two tree ablations of Table 3, on the full EDD draft:
- **w/o expected time gain** (s3 l.719: "the expected time gain is not estimated, and confidence score is directly
  used to prune the candidate tree"): `OwnConfidencePCT` expands a node while its own confidence c_j ≥ s_d/s_t,
  instead of its path confidence p_j = ∏ c_i (the acceptance estimate behind the time gain s_d − p_j·s_t, l.395).
  The paper names neither the threshold nor the confidence's scope; this is our reading (docs/fidelity.md). Its tree
  holds PCT's, so under greedy verification its τ cannot fall below PCT's: only α (deeper trees) and γ can move.
- **w/o removing leaf nodes**: PCT with `leaf_min = 0`.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from spectree.analysis.claims import all_of, claim, unscored
from spectree.analysis.sweep_claims import compare
from spectree.analysis.sweeps import prompt_sums, totals
from spectree.core.decode import Prefill, speculative_generate
from spectree.core.errors import SpectreeError, TreeTooLarge
from spectree.core.policy import Policy, Rows
from spectree.prompts import Prompt, chat_ids
from spectree.strategies.pct import PCT

STEP_COLUMNS = ["prompt", "dataset", "category", "position", "tau", "gamma", "depth"]  # as `sweeps.STEP_COLUMNS`
ROW_COLUMNS = ["label", "pair", "spec", "tau", "gamma", "alpha", "depth", "steps", "by_prompt"]


class OwnConfidencePCT(PCT):
    """EDD Table 3 "w/o expected time gain": PCT whose nodes stay expandable while their OWN confidence
    c_j (the draft's probability of the token) is ≥ s_d/s_t, not their path confidence ∏ c_i; leaves below
    `leaf_min` (path confidence) are still removed. A superset of PCT's tree at the same s_d/s_t."""

    name = "pct_own"

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        if self.ratio is None:
            raise SpectreeError("pct_own: ratio (s_d/s_t) is not set")
        return new.draft_prob >= self.ratio


def tree_ablations(ratio: float, k: int = 5, d_max: int = 10, leaf_min: float = 0.01) -> dict[str, Policy]:
    """EDD + PCT as the paper runs it (width 5, depth 10, leaves < 0.01 removed, s3 l.1388) and its two tree
    ablations of Table 3, by label."""
    pct = PCT(ratio=ratio, k=k, d_max=d_max, leaf_min=leaf_min)
    return {"PCT": pct, "w/o expected time gain": OwnConfidencePCT(ratio=ratio, k=k, d_max=d_max, leaf_min=leaf_min),
            "w/o removing leaf nodes": PCT(ratio=ratio, k=k, d_max=d_max, leaf_min=0.0)}


def decode_steps(models, prompts: list[Prompt], policies: dict[str, Policy], max_new_tokens: int,
                 skipped: Optional[dict[str, str]] = None) -> dict[str, pd.DataFrame]:
    """{label: one row per target forward (STEP_COLUMNS)} of each policy decoding every prompt greedily. A policy
    whose trees outgrow `Policy.max_nodes` is dropped from every prompt, its reason in `skipped`."""
    target, draft, tok = models
    rows: dict[str, list[tuple]] = {label: [] for label in policies}
    live = dict(policies)
    for prompt in tqdm(prompts, desc="tree τ", unit="prompt"):
        ids = chat_ids(tok, prompt.text)
        shared = Prefill.of(target, ids)
        for label, policy in list(live.items()):
            try:
                gen = speculative_generate(target, draft, ids, policy, max_new_tokens, eos_ids=(tok.eos_token_id,),
                                           prefill=shared)
            except TreeTooLarge as err:
                warnings.warn(f"skipping {label}: {err}")
                del live[label]
                rows.pop(label)
                if skipped is not None:
                    skipped[label] = str(err)
                continue
            rows[label] += [(prompt.key, prompt.dataset, prompt.category, i, s.tau, s.gamma, s.depth)
                            for i, s in enumerate(gen.steps)]
    return {label: pd.DataFrame(r, columns=STEP_COLUMNS) for label, r in rows.items()}


def tree_row(label: str, pair: str, policy: Policy, steps: pd.DataFrame) -> dict[str, Any]:
    """One table row: pooled τ, γ, α, depth and forwards, and the per-prompt sums the claims resample."""
    out = totals(steps)
    return {"label": label, "pair": pair, "spec": policy.spec, **{c: out[c] for c in ("tau", "gamma", "alpha", "depth")},
            "steps": len(steps), "by_prompt": prompt_sums(steps)}


def tree_tau_table(runs: dict[str, tuple[str, Policy]], prompts: list[Prompt], max_new_tokens: int, **load
                   ) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rows (ROW_COLUMNS, indexed by label) for {label: (pair, policy)}: each pair loaded once and decoded under
    its policies. Pairs whose draft is absent are skipped with a warning, like oversized trees; both are in the
    returned {label: reason}. `load`: more arguments of `load_pair`."""
    from spectree.core.workers import map_jobs

    jobs = [(pair, {label: policy for label, (p, policy) in runs.items() if p == pair}, prompts, max_new_tokens, load)
            for pair in dict.fromkeys(p for p, _ in runs.values())]  # one job per pair (`core.workers`)
    rows, skipped = [], {}
    for pair_rows, pair_skipped in map_jobs(_pair_rows, jobs, load.get("device") or "cpu", "tree τ by draft"):
        rows += pair_rows
        skipped.update(pair_skipped)
    return pd.DataFrame(rows, columns=ROW_COLUMNS).set_index("label", drop=False), skipped


def _pair_rows(pair: str, policies: dict[str, Policy], prompts: list[Prompt], max_new_tokens: int, load: dict
               ) -> tuple[list[dict], dict[str, str]]:
    """One pair's rows of `tree_tau_table` and what it skipped (the whole pair when its draft is absent)."""
    from spectree.drafts.pairs import load_pair

    try:
        models = load_pair(pair, **load)
    except SpectreeError as err:
        warnings.warn(f"skipping {pair}: {err}")
        return [], {label: str(err) for label in policies}
    skipped: dict[str, str] = {}
    steps = decode_steps(models, prompts, policies, max_new_tokens, skipped)
    return [tree_row(label, pair, policies[label], s) for label, s in steps.items()], skipped


# --- notebook 01: which drafts and trees, and the claims -------------------------------------------------------

BASE, SHIPPED, SELF = "EDD+PCT, equal budget", "EDD+PCT, shipped", "EDD+PCT, self data"


def table3_runs(plan, ratio: float, edd: str = "smollm2-edd") -> dict[str, tuple[str, Policy]]:
    """{label: (pair, policy)} of notebook 01 (`acceptance.DraftPlan`): under PCT the equal-budget EDD draft (the
    4th-to-last layer), each draft ablation and each hidden-layer draft; the shipped `edd` under PCT and its two tree
    ablations; the self-data EDD and VDM trained alike (Table 3's "w/o encoding result" at a larger budget). None
    unless the plan judges the EDD claims."""
    if not plan.edd_claims:
        return {}
    trees = tree_ablations(ratio)
    pct, runs = trees.pop("PCT"), {}
    if plan.ablation_base:
        runs[BASE] = (plan.ablation_base, pct)
    runs.update({label: (pair, pct) for label, pair in {**plan.ablations, **plan.hidden_layers}.items()})
    runs[SHIPPED] = (edd, pct)
    runs.update({label: (edd, policy) for label, policy in trees.items()})
    if {"EDD", "VDM"} <= set(plan.equal_budget):
        runs.update({SELF: (plan.equal_budget["EDD"], pct),
                     "w/o encoding result, self data": (plan.equal_budget["VDM"], pct)})
    return runs


TABLE3 = {  # EDD Table 3 (s3 l.749–753), LLaMA2-Chat 7B, MT-bench: speedup, α, τ
    "EDD+PCT": "3.04x, α 0.74, τ 3.99",
    "w/o encoding result": "2.58x, α 0.55, τ 3.04",
    "w/o KL divergence": "2.86x, α 0.67, τ 3.60",
    "w/o random division length": "2.95x, α 0.69, τ 3.72",
    "w/o expected time gain": "2.73x, α 0.58, τ 3.45",
    "w/o removing leaf nodes": "2.95x, α 0.74, τ 3.99",
}


def _row(table: pd.DataFrame, label: str) -> Optional[pd.Series]:
    return table.loc[label] if label in table.index else None


def _text(a: pd.Series, b: pd.Series) -> str:
    return f"τ {a.tau:.3f} vs {b.tau:.3f}, α {a.alpha:.3f} vs {b.alpha:.3f}, γ {a.gamma:.2f} vs {b.gamma:.2f}"


def ablation_claims(table: pd.DataFrame, base: str, labels: list[str]) -> list[dict[str, Any]]:
    """EDD Table 3: each ablation row lowers the τ of row `base` (EDD + PCT), by a paired bootstrap over prompts of
    the pooled τ difference; "w/o expected time gain" lowers α and τ (the paper's words, l.811); the leaf-removal
    ablation instead verifies more nodes per forward (γ) at a τ within 2% (the paper: τ unchanged, speed lower). A label names its Table 3 row before any comma ("w/o KL divergence,
    ..."). Missing rows: inconclusive."""
    out, b = [], _row(table, base)
    for label in labels:
        a, row = _row(table, label), label.split(",")[0]
        paper = (f"{TABLE3[row]} against EDD+PCT {TABLE3['EDD+PCT']} (Table 3, LLaMA2-Chat 7B, MT-bench)"
                 if row in TABLE3 else "—")
        leaf, gain = row == "w/o removing leaf nodes", row == "w/o expected time gain"
        what = "verifies more nodes at the same τ" if leaf else "lowers EDD + PCT α and τ" if gain else \
            "lowers EDD + PCT τ"
        name = f"'{label}' {what} (EDD Table 3)"
        if a is None or b is None:
            out.append(claim(name, paper, "not scored", unscored(f"{label} or {base} not scored")))
        elif gain:  # "significantly reduces both the average acceptance rate and the average acceptance length" l.811
            ev = all_of([compare(a, b, "alpha", 0.0, "α(ablation) − α(EDD + PCT)", above=False),
                         compare(a, b, "tau", 0.0, "τ(ablation) − τ(EDD + PCT)", above=False)])
            out.append(claim(name, paper, _text(a, b), ev))
        elif leaf:
            ev = all_of([compare(a, b, "gamma", 0.0, "γ(ablation) − γ(EDD + PCT)"),
                         compare(a, b, "tau", 1.02, "τ(ablation) / τ(EDD + PCT)", quotient=True, above=False,
                                 strict=False)])
            out.append(claim(name, paper, _text(a, b), ev, goal="γ higher, τ within +2% (ours: the paper reads the "
                                                                  "cost as speed)"))
        else:
            out.append(claim(name, paper, _text(a, b), compare(a, b, "tau", 0.0, "τ(ablation) − τ(EDD + PCT)",
                                                               above=False)))
    return out


def layer_claim(table: pd.DataFrame, best: str, others: list[str]) -> dict[str, Any]:
    """EDD Fig. 5: the hidden states of row `best` (the 4th-to-last layer) give a higher EDD + PCT τ than those
    of every row in `others` (the last layer, a shallow one), each by a paired bootstrap over prompts."""
    b = _row(table, best)
    rows = [(label, _row(table, label)) for label in others]
    paper = ("best at the 28th (fourth-to-last) layer; the last layer and shallow intermediate layers give a "
             "relatively low τ (Fig. 5, LLaMA2-Chat 7B, GSM8K)")
    name = "EDD reads its best hidden states at the 4th-to-last layer (EDD Fig. 5)"
    if b is None or not rows or any(r is None for _, r in rows):
        return claim(name, paper, "not scored", unscored(f"{best} or one of {others} not scored"))
    ev = all_of([compare(b, r, "tau", 0.0, "τ(4th-to-last) − τ(other layer)") for _, r in rows])
    return claim(name, paper, f"τ {b.tau:.3f} vs " + ", ".join(f"{label} {r.tau:.3f}" for label, r in rows), ev)


def table3_claims(table: pd.DataFrame, plan) -> list[dict[str, Any]]:
    """Every EDD + PCT claim of notebook 01: the draft ablations against the equal-budget EDD, the tree ablations
    against the shipped EDD + PCT, "w/o encoding result" on self data, and Fig. 5's layers."""
    if not plan.edd_claims:
        return []
    out = ablation_claims(table, BASE, list(plan.ablations))
    out += ablation_claims(table, SHIPPED, ["w/o expected time gain", "w/o removing leaf nodes"])
    if {"EDD", "VDM"} <= set(plan.equal_budget):
        out += ablation_claims(table, SELF, ["w/o encoding result, self data"])
    if plan.hidden_layers:
        out.append(layer_claim(table, BASE, list(plan.hidden_layers)))
    return out


def tree_summary(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows without their per-prompt sums, for the summary JSON."""
    return table.drop(columns=["by_prompt"]).round(4).to_dict("records")


__all__ = ["OwnConfidencePCT", "tree_ablations", "decode_steps", "tree_row", "tree_tau_table", "table3_runs",
           "ablation_claims", "layer_claim", "table3_claims", "tree_summary", "TABLE3"]
