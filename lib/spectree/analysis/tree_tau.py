"""τ of drafts under a draft tree, decoded live and greedily: EDD Table 3's tree ablations.

EDD measures each ablation of Table 3 as EDD + PCT (s3 l.719–753: speedup, α and τ on MT-bench, LLaMA2-Chat 7B).
Here every (draft, tree policy) pair decodes the prompts greedily with `core.decode.speculative_generate`, each
prompt's policies from one shared prefill of the target; a row per target forward (prompt, τ, γ, tree depth) is
pooled as notebook 02 pools replayed trees (`sweeps.totals`: τ, γ, α = Σ τ / Σ depth, EDD's "accepted length /
maximum depth"), and the per-prompt sums (`sweeps.prompt_sums`) feed the paired bootstrap of `matched.compare`.
Greedy decoding is lossless, so every policy commits the same text: τ and γ are properties of the draft and the
tree, not of the sampled output. Speed is not timed here (notebook 03 times). Table 3's draft ablations and Fig. 5's
hidden layers need drafts this pair does not have: `draft_arms` says so.

The two tree ablations of Table 3, on the shipped EDD draft:
- **w/o removing leaf nodes**: PCT with `leaf_min = 0`; the paper: τ unchanged, more nodes verified (a superset
  of PCT's tree: only the τ half can fail, so only it is judged).
- **w/o expected time gain** (s3 l.719: "the expected time gain is not estimated, and confidence score is directly
  used to prune the candidate tree"): the paper names neither the threshold nor the confidence's scope, so its
  variant cannot be built and the claim is not testable (`TIME_GAIN_UNSAID`). `OwnConfidencePCT`, our reading (a
  node expands while its own confidence c_j ≥ s_d/s_t instead of its path confidence p_j = ∏ c_i, the acceptance
  estimate behind the time gain s_d − p_j·s_t, l.395), is decoded as an illustration only: its tree holds PCT's, so
  under greedy verification its τ cannot fall below PCT's.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any, Optional

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from spectree.claims.claims import Evidence, claim, not_testable, unscored
from spectree.claims.diagnosis import KNOBS, reading
from spectree.analysis.matched import compare
from spectree.analysis.sweeps import prompt_sums, totals
from spectree.core.decode import Prefill, speculative_generate
from spectree.core.errors import SpectreeError, TreeTooLarge
from spectree.core.policy import Policy, Rows
from spectree.prompts import Prompt, chat_ids
from spectree.claims.names import paper_kind, sd_st
from spectree.strategies.pct import PCT

STEP_COLUMNS = ["prompt", "dataset", "category", "position", "tau", "gamma", "depth"]  # as `sweeps.STEP_COLUMNS`
ROW_COLUMNS = ["label", "pair", "spec", "ratio", "tau", "gamma", "alpha", "depth", "steps", "by_prompt"]


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
    return {"label": label, "pair": pair, "spec": policy.spec, "ratio": float(getattr(policy, "ratio", math.nan)),
            **{c: out[c] for c in ("tau", "gamma", "alpha", "depth")},
            "steps": len(steps), "by_prompt": prompt_sums(steps)}


def tree_tau_table(runs: dict[str, tuple[str, Policy]], prompts: list[Prompt], max_new_tokens: int, **load
                   ) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rows (ROW_COLUMNS, indexed by label) for {label: (pair, policy)}: each pair loaded once and decoded under
    its policies. Pairs whose draft is absent are skipped with a warning, like oversized trees; both are in the
    returned {label: reason}. `load`: more arguments of `load_pair`."""
    from spectree.core.workers import map_jobs

    jobs = [(pair, {label: policy}, prompts, max_new_tokens, load)
            for label, (pair, policy) in runs.items()]  # one job per run, over processes (`core.workers`)
    rows, skipped = [], {}
    for pair_rows, pair_skipped in map_jobs(_pair_rows, jobs, load.get("device") or "cpu", "tree τ by draft"):
        rows += pair_rows
        skipped.update(pair_skipped)
    return pd.DataFrame(rows, columns=ROW_COLUMNS).set_index("label", drop=False), skipped


def _pair_rows(pair: str, policies: dict[str, Policy], prompts: list[Prompt], max_new_tokens: int, load: dict
               ) -> tuple[list[dict], dict[str, str]]:
    """One pair's rows of `tree_tau_table` and what it skipped (the whole pair when its draft is absent)."""
    from spectree.models.loading import load_pair

    try:
        models = load_pair(pair, **load)
    except SpectreeError as err:
        warnings.warn(f"skipping {pair}: {err}")
        return [], {label: str(err) for label in policies}
    skipped: dict[str, str] = {}
    steps = decode_steps(models, prompts, policies, max_new_tokens, skipped)
    return [tree_row(label, pair, policies[label], s) for label, s in steps.items()], skipped


# --- notebook 01: the tree ablations of EDD Table 3 on the shipped EDD, and their claims --------------------------

SHIPPED = "EDD+PCT, shipped"
TIME_GAIN, LEAVES = "w/o expected time gain", "w/o removing leaf nodes"


MACHINE = " (this machine's s_d/s_t)"  # the label suffix of the second reading's rows


def table3_runs(plan, ratio: float, edd: str = "smollm2-edd", machine: Optional[float] = None
                ) -> dict[str, tuple[str, Policy]]:
    """{label: (pair, policy)} of notebook 01 (`acceptance.DraftPlan`): the shipped `edd` under PCT and under its two
    tree ablations at s_d/s_t `ratio` (the paper's: τ and γ do not depend on the machine), and, with `machine`, PCT
    and the leaf ablation again at this machine's ratio (labels + MACHINE: the claims' second reading). None unless
    the plan judges the EDD claims. (Table 3's draft ablations and Fig. 5's hidden layers are judged by
    `draft_arms`: drafts that cannot carry a verdict are not decoded.)"""
    if not plan.edd_claims:
        return {}
    trees = tree_ablations(ratio)
    runs = {SHIPPED: (edd, trees.pop("PCT")), **{label: (edd, policy) for label, policy in trees.items()}}
    if machine and not math.isclose(machine, ratio):
        here = tree_ablations(machine)
        runs.update({SHIPPED + MACHINE: (edd, here["PCT"]), LEAVES + MACHINE: (edd, here[LEAVES])})
    return runs


TABLE3 = {  # EDD Table 3 (s3 l.749–753), LLaMA2-Chat 7B, MT-bench: speedup, α, τ
    "EDD+PCT": "3.04x, α 0.74, τ 3.99",
    "w/o encoding result": "2.58x, α 0.55, τ 3.04",
    "w/o KL divergence": "2.86x, α 0.67, τ 3.60",
    "w/o random division length": "2.95x, α 0.69, τ 3.72",
    TIME_GAIN: "2.73x, α 0.58, τ 3.45",
    LEAVES: "2.95x, α 0.74, τ 3.99",
}
# why the paper's "w/o expected time gain" cannot be built: what it says, and what our reading would decide
TIME_GAIN_UNSAID = ("not testable: the paper's variant is not defined enough to build — \"the expected time gain is "
                    "not estimated, and confidence score is directly used to prune the candidate tree\" (EDD §4.3.2, "
                    "l.719) names neither the threshold nor the confidence's scope (a token's own or its path's). Our "
                    "reading (a node expands while its own confidence c_j ≥ s_d/s_t, `OwnConfidencePCT`) grows a "
                    "superset of PCT's tree, so under greedy verification its τ can never fall below PCT's: a verdict "
                    "by construction, not the paper's (which lowers τ 3.99 → 3.45, so it is no superset)")


def table3_paper(label: str) -> str:
    """The paper column of a Table 3 row: its numbers against EDD + PCT's; a label names its row before any comma
    ("w/o encoding result, self data")."""
    row = label.split(",")[0]
    return (f"{TABLE3[row]} against EDD+PCT {TABLE3['EDD+PCT']} (Table 3, LLaMA2-Chat 7B, MT-bench)"
            if row in TABLE3 else "—")


def _row(table: pd.DataFrame, label: str) -> Optional[pd.Series]:
    return table.loc[label] if label in table.index else None


def _text(a: pd.Series, b: pd.Series) -> str:
    return f"τ {a.tau:.3f} vs {b.tau:.3f}, α {a.alpha:.3f} vs {b.alpha:.3f}, γ {a.gamma:.2f} vs {b.gamma:.2f}"


def _same_trees(a: pd.Series, b: pd.Series) -> bool:
    """Whether two rows verified the same number of nodes in every prompt (the leaf ablation removed nothing)."""
    keys = sorted(set(a.by_prompt) & set(b.by_prompt))
    return bool(keys) and all(math.isclose(a.by_prompt[k]["gamma"], b.by_prompt[k]["gamma"]) for k in keys)


# why the leaf ablation's "more nodes" half is reported and not judged (EDD Table 3, s3 l.749–753, l.811)
LEAVES_RULE = ("; γ is reported, not judged: the ablation keeps every node PCT keeps (leaf_min 0), so from the same "
               "prefix it verifies at least PCT's nodes and accepts at least PCT's tokens by construction, and the "
               "paper's 2.95x vs 3.04x (3% longer steps at an equal τ) gives no γ without a verification cost per "
               "node. It fails when the leaves PCT removes (path confidence < 0.01) are accepted often enough to lift "
               "τ beyond +2%")


def ablation_claims(table: pd.DataFrame, base: str = SHIPPED) -> list[dict[str, Any]]:
    """EDD Table 3's tree ablations against row `base` (EDD + PCT on the shipped draft):
    - "w/o removing leaf nodes" keeps τ: "this variant does not affect the average acceptance length, it introduces
      more nodes during the verification phase" (l.811). The ablation's tree is a superset of PCT's, so more nodes
      and no fewer accepted tokens hold by construction: the rule reads only τ(ablation) / τ(EDD + PCT) ≤ 1.02
      (paired bootstrap over prompts), with the γ ratio beside it (`LEAVES_RULE`); not testable when the two
      verified the same nodes in every prompt (nothing removed: the τ reading would be an identity);
    - "w/o expected time gain" lowers α and τ (l.811): not testable (`TIME_GAIN_UNSAID`); our reading's numbers
      stand beside it as an illustration.
    Missing rows: inconclusive (n = 0)."""
    b, out = _row(table, base), []
    a = _row(table, LEAVES)
    name = f"'{LEAVES}' keeps EDD + PCT's τ (EDD Table 3)"

    def leaves(a: pd.Series, b: pd.Series) -> Evidence:
        if _same_trees(a, b):
            return not_testable(f"{LEAVES} verified the same nodes as EDD + PCT in every prompt: PCT removed no leaf "
                                "at this s_d/s_t, so τ equal is an identity, not a reading")
        ev = compare(a, b, "tau", 1.02, "τ(ablation) / τ(EDD + PCT)", quotient=True, above=False, strict=False)
        return replace(ev, rule=ev.rule + LEAVES_RULE)

    def text(a: pd.Series, b: pd.Series) -> str:
        return f"{_text(a, b)} (γ {a.gamma / b.gamma:.2f}×)"
    if a is None or b is None:
        out.append(claim(name, table3_paper(LEAVES), "not scored", unscored(f"{LEAVES} or {base} not scored"),
                         key="edd-table3-leaf"))
    else:
        here_a, here_b = _row(table, LEAVES + MACHINE), _row(table, base + MACHINE)
        again = None if here_a is None or here_b is None else leaves(here_a, here_b)
        knobs = {} if again is None else {KNOBS: reading(
            f"{sd_st('one-token', here_b.ratio)}: {again.verdict} "
            f"({text(here_a, here_b)})", again.verdict, where=sd_st("one-token", here_b.ratio),
            off_point=True)}
        at = sd_st(paper_kind(b.ratio) or "one-token", b.ratio)
        out.append(claim(name, table3_paper(LEAVES), f"at {at}, live decoding (notebook 01): {text(a, b)}",
                         leaves(a, b), goal="τ within +2% of EDD + PCT's (ours: the paper's 'does not affect the "
                                            "average acceptance length', l.811)",
                         key="edd-table3-leaf", readings=knobs, gamma_ratio=float(a.gamma / b.gamma)))
    a = _row(table, TIME_GAIN)
    ours = ("not decoded" if a is None or b is None else
            f"illustration, our reading (own confidence ≥ s_d/s_t): {_text(a, b)}")
    out.append(claim(f"'{TIME_GAIN}' lowers EDD + PCT α and τ (EDD Table 3)", table3_paper(TIME_GAIN), ours,
                     not_testable(TIME_GAIN_UNSAID), key="edd-table3-time-gain"))
    return out


def table3_claims(table: pd.DataFrame, plan) -> list[dict[str, Any]]:
    """The tree-ablation claims of notebook 01 (none unless the plan judges the EDD claims); the draft ablations and
    Fig. 5's layers: `draft_arms.arm_claims`."""
    return ablation_claims(table) if plan.edd_claims else []


def tree_summary(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows without their per-prompt sums, for the summary JSON."""
    return table.drop(columns=["by_prompt"]).round(4).to_dict("records")


__all__ = ["OwnConfidencePCT", "tree_ablations", "decode_steps", "tree_row", "tree_tau_table", "table3_runs",
           "table3_paper", "ablation_claims", "table3_claims", "tree_summary", "TABLE3"]
