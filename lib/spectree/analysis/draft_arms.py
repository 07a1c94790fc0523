"""Can EDD Table 3's draft ablations and Fig. 5's hidden-layer drafts carry a verdict on this pair?

EDD compares drafts trained to the end of its recipe (LLaMA2-Chat 7B). Two drafts trained a little differ mostly by
noise: our 150-step arms agree with the target at ≈ 0.06, and one seed each cannot tell a τ gap of 0.02 from the
seed-to-seed spread. **One testability standard for drafts** (`below_floor`), applied to every comparison of drafts
wherever it appears (Table 1's equal-budget EDD against VDM, Table 3's arms, Fig. 5's layers): the comparison's
EDD draft (its base arm) must reach the shipped EDD's position-1 agreement (the best draft this pair has) less
TOLERANCE. An arm comparison also needs ≥ MIN_SEEDS training seeds per arm and the seed spread inside the
comparison's interval. A comparison that misses a premise reads "not testable with the drafts trained here" (the
obstacle is this workbook's training budget on a CPU, not the pair), with the measured
agreements and what would be needed — never a verdict on noise-level drafts.

The agreement comes from code, both sides of a comparison from one source: this run's `acceptance_report` where
every draft of the comparison (and the shipped EDD) was scored, else the held-out metrics each draft's card records
(`python -m spectree acceptance ... --card`, the same prompts and tokens for every card). A draft that no longer
carries a verdict leaves the tracked tree and keeps only its card, under data/drafts/retired/ (`draft_card`); its
recipe stays reproducible by the command in docs/training.md.
"""
from __future__ import annotations

import json
import math
from typing import Any, Optional, Sequence, Union

import pandas as pd

from spectree.claims.claims import claim, not_testable, unscored
from spectree.claims.text import DIRECTION_ONLY, pointing
from spectree.core.errors import SpectreeError
from spectree.core.paths import artifact_path

TOLERANCE = 0.05  # the floor: a comparison's EDD draft at least the shipped EDD's position-1 agreement less this
MIN_SEEDS = 2  # training seeds per arm
RETIRED = "retired"  # data/drafts/retired/NAME.json: the card of a draft whose weights left the tree
NEEDED = (f"a verdict needs the base arm's position-1 agreement at least the shipped EDD's less {TOLERANCE:g}, "
          f"≥ {MIN_SEEDS} training seeds per arm and the seed spread inside the comparison's interval; the shipped "
          "EDD took five training stages, the last on a GPU (docs/training.md)")
COLUMNS = ["comparison", "role", "label", "pair", "seed", "steps", "top1", "positions", "tau_chain", "source"]
FIG5 = "EDD reads its best hidden states at the 4th-to-last layer (EDD Fig. 5)"
FIG5_PAPER = ("best at the 28th (fourth-to-last) layer; the last layer and shallow intermediate layers give a "
              "relatively low τ (Fig. 5, LLaMA2-Chat 7B, GSM8K)")
SELF_ARM = "w/o encoding result, self data"
Drafts = Union[str, Sequence[str]]  # one pair, or one pair per training seed


def seeds_of(drafts: Drafts) -> list[str]:
    """The pairs of one arm: a pair name, or a list of them (one per training seed)."""
    return [drafts] if isinstance(drafts, str) else list(drafts)


def draft_card(pair: str) -> Optional[dict]:
    """The card of a pair's trained draft (edd:NAME / vdm:NAME): data/drafts/NAME.json, else
    data/drafts/retired/NAME.json; None for another kind of draft, a name that is no pair, or when neither exists."""
    from spectree.models.pairs import as_pair

    try:
        spec = as_pair(pair).spec
    except SpectreeError:  # not a pair name
        return None
    if spec.kind not in ("edd", "vdm"):
        return None
    path = artifact_path("drafts", spec.arg, ".json")
    for card in (path, path.parent / RETIRED / path.name):
        if card.exists():
            return json.loads(card.read_text())
    return None


def comparisons(plan) -> list[tuple[str, str, list[str], dict[str, Drafts]]]:
    """(claim name, the paper's statement, base-arm pairs, {arm label: pairs}) of every draft comparison of
    notebook 01's `plan` (`acceptance.DraftPlan`): Table 3's draft ablations against `ablation_base`, "w/o encoding
    result" on self data (the equal-budget EDD against VDM) and Fig. 5's hidden layers against `ablation_base`."""
    from spectree.analysis.tree_tau import table3_paper

    if not plan.edd_claims:
        return []
    base = seeds_of(plan.ablation_base) if plan.ablation_base else []
    out = [(f"'{label}' lowers EDD + PCT τ (EDD Table 3)", table3_paper(label), base, {label: drafts})
           for label, drafts in plan.ablations.items()]
    if {"EDD", "VDM"} <= set(plan.equal_budget):
        out.append((f"'{SELF_ARM}' lowers EDD + PCT τ (EDD Table 3)", table3_paper(SELF_ARM),
                    [plan.equal_budget["EDD"]], {SELF_ARM: plan.equal_budget["VDM"]}))
    if plan.hidden_layers:
        out.append((FIG5, FIG5_PAPER, base, dict(plan.hidden_layers)))
    return out


def _measured(pair: str, report: Optional[dict]) -> dict[str, Any]:
    """One draft's position-1 agreement, positions, chain τ and source: from `report` (this run) if given, else
    from its card's held-out metrics; NaN where neither has it. Seed and steps from the card."""
    card = draft_card(pair) or {}
    config, metrics = card.get("config", {}), card.get("metrics", {})
    if report is not None:
        top1, positions, tau_chain, source = (report["top1_by_position"][0], report.get("positions"),
                                              report["tau_chain"], "this run")
    elif metrics.get("top1_by_position"):
        top1, positions, tau_chain = metrics["top1_by_position"][0], metrics.get("positions"), metrics.get(
            "tau_chain5", math.nan)
        source = f"card: {metrics.get('held_out', 'held-out metrics')}"
    else:
        top1 = positions = tau_chain = math.nan
        source = "not scored, no card"
    return {"pair": pair, "seed": config.get("seed"), "steps": card.get("steps"), "top1": top1,
            "positions": positions, "tau_chain": tau_chain, "source": source}


def arm_table(plan, reports: dict, edd: str = "smollm2-edd") -> pd.DataFrame:
    """One row (COLUMNS) per draft of every comparison (`comparisons`): its role (base arm, arm, shipped EDD),
    label, training seed and steps, position-1 agreement over `positions` and chain-5 τ. A comparison reads this
    run's `reports` where they hold every one of its drafts and `edd`, else every draft's card."""
    rows = []
    for name, _, base, arms in comparisons(plan):
        drafts = [("shipped EDD", "shipped EDD", edd), *(("base arm", "base arm", p) for p in base),
                  *(("arm", label, p) for label, d in arms.items() for p in seeds_of(d))]
        live = all(p in reports for _, _, p in drafts)
        rows += [{"comparison": name, "role": role, "label": label, **_measured(p, reports[p] if live else None)}
                 for role, label, p in drafts]
    return pd.DataFrame(rows, columns=COLUMNS)


def below_floor(base: float, shipped: float, what: str = "the base arm") -> str:
    """The testability standard for every comparison of drafts: why a comparison whose EDD draft (`what`) agrees
    with the target at `base` at draft position 1 cannot carry a verdict, the shipped EDD agreeing at `shipped`
    ("" when base ≥ shipped − TOLERANCE, or when either is unmeasured)."""
    if not (math.isfinite(base) and math.isfinite(shipped)) or base >= shipped - TOLERANCE:
        return ""
    return (f"{what}'s position-1 agreement is {base:.3f}, {base - shipped:+.3f} from the shipped EDD's "
            f"{shipped:.3f} (the floor: the shipped EDD's less {TOLERANCE:g})")


def _unmet(rows: pd.DataFrame) -> list[str]:
    """The premises of a verdict that one comparison's rows do not meet (none: it could carry one)."""
    shipped = float(rows[rows.role == "shipped EDD"].top1.iloc[0])
    base = float(rows[rows.role == "base arm"].top1.mean())
    unmet = [why] if (why := below_floor(base, shipped)) else []
    arms = rows[rows.role != "shipped EDD"]
    seeds = arms.assign(seed=arms.seed.fillna(arms.pair)).groupby("label").seed.nunique()
    if seeds.min() < MIN_SEEDS:
        unmet.append(f"{int(seeds.min())} training seed(s) per arm: the seed spread is not measured")
    return unmet


def _ours(rows: pd.DataFrame) -> str:
    """'position-1 agreement: base arm 0.062, w/o KL divergence 0.063; shipped EDD 0.381 (card: …; 1,024
    positions each; 150 steps)'."""
    by_label = rows.groupby("label", sort=False).top1.mean()
    shipped = by_label.pop("shipped EDD")
    steps = sorted({int(s) for s in rows[rows.role != "shipped EDD"].steps.dropna()})
    positions = sorted({int(p) for p in rows.positions.dropna()})
    return ("position-1 agreement: " + ", ".join(f"{label} {v:.3f}" for label, v in by_label.items())
            + f"; shipped EDD {shipped:.3f} ({rows.source.iloc[0]}"
            + (f"; {'/'.join(f'{p:,}' for p in positions)} positions each" if positions else "")
            + (f"; arms trained {'/'.join(map(str, steps))} steps" if steps else "") + ")" + _direction(rows, by_label))


def _direction(rows: pd.DataFrame, by_label: pd.Series) -> str:
    """Which way the arms point, not a verdict: the paper has each ablated arm (and each other layer) below the
    base arm; '; points (direction only, not a verdict): w/o KL divergence not below it (against the paper)'."""
    base = rows[rows.role == "base arm"].label
    if base.empty or base.iloc[0] not in by_label:
        return ""
    b = by_label[base.iloc[0]]
    ways = [f"{label} " + (f"below the base arm ({pointing(True)})" if v < b else f"not below it ({pointing(False)})")
            for label, v in by_label.items() if label != base.iloc[0]]
    return f"; points ({DIRECTION_ONLY}): " + ", ".join(ways) if ways else ""


KEYS = {"w/o encoding result": "edd-table3-encoding", SELF_ARM: "edd-table3-encoding",
        "w/o KL divergence": "edd-table3-kl", "w/o random division length": "edd-table3-random-length"}  # scorecard


def _key(name: str) -> tuple[str, str]:
    """(scorecard key, cell) of a comparison by its claim name."""
    if name == FIG5:
        return "edd-fig5-layer", ""
    label = next((k for k in sorted(KEYS, key=len, reverse=True) if f"'{k}'" in name), "")
    return KEYS.get(label, ""), ("self data" if label == SELF_ARM else "")


def arm_claims(plan, table: pd.DataFrame) -> list[dict[str, Any]]:
    """One claim per comparison (`comparisons`) of `arm_table`'s rows: "not testable with the drafts trained here" with
    the measured agreements and the premises it misses (`NEEDED`); not testable too, saying so, where every premise is met, since
    the per-seed EDD + PCT comparison is not built here; inconclusive (n = 0) where a draft has no measurement."""
    out = []
    for name, paper, base, _ in comparisons(plan):
        rows = table[table.comparison == name]
        missing = rows[rows.top1.isna()].pair.tolist()
        if not base or missing:
            why = f"no agreement for {', '.join(missing)} (not scored here, no card)" if missing else "no base arm"
            out.append(claim(name, paper, "not scored", unscored(why), key=_key(name)[0], cell=_key(name)[1]))
            continue
        unmet = _unmet(rows)
        why = ("not testable with the drafts trained here: " + "; ".join(unmet) + f" — {NEEDED}" if unmet else
               "not testable here: every premise is met, but the per-seed EDD + PCT comparison is not built")
        agreements = {label: round(float(v), 4) for label, v in rows.groupby("label", sort=False).top1.mean().items()}
        out.append(claim(name, paper, _ours(rows), not_testable(why), key=_key(name)[0], cell=_key(name)[1],
                         agreements=agreements))
    return out


def arm_drafts(table: pd.DataFrame) -> pd.DataFrame:
    """The drafts of `arm_table`, once each, with what their measurement rests on (for the notebook's table)."""
    return table.drop_duplicates("pair")[["pair", "label", "seed", "steps", "top1", "positions", "tau_chain",
                                          "source"]].set_index("pair")
