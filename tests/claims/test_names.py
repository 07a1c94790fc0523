"""One name per speedup baseline and per s_d/s_t, and row labels that state only the knobs their spec has."""
import math

import pandas as pd
import pytest

from spectree.speed.bench import Run

from spectree.speed.references import HF
from spectree.claims.names import (AR_LABEL, PAPER_7B, PAPER_13B, SD_ST, VS_AR, VS_HF, paper_kind, sd_st, spec_label,
                                  speedup_name, to_hf)
from spectree.speed.tables import budget_labels, dyspec_layout, equal_budget_sequences, speed_strategies, speed_table
from spectree.strategies import parse_strategy
from spectree.strategies.dyspec import DySpec
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.sequoia import Sequoia


def test_a_specinfer_label_names_its_sequences_not_a_budget_knob_it_lacks():
    """'SpecInfer-style m=32' named a knob the spec has not: the label reads k and d off the spec that runs."""
    policy = equal_budget_sequences(32)
    assert "m=" not in policy.spec and spec_label(policy) == f"SpecInfer-style k={policy.k} d={policy.d}"
    assert policy.k * policy.d == 32 and spec_label(parse_strategy(policy.spec)) == spec_label(policy)


def test_an_eagle2_label_states_the_drafts_it_verifies_beside_n_which_counts_the_root():
    """'EAGLE-2 N=33' at γ 32: N counts the root, so the label says γ = N − 1 (never more than |T1|)."""
    assert spec_label(Eagle2(K=8, d_max=6, N=33)) == "EAGLE-2 N=33 (γ 32)"
    assert Eagle2(K=8, d_max=6, N=33).verified() - 1 == 32
    assert spec_label(Eagle2(K=2, d_max=2, N=50)) == f"EAGLE-2 N=50 (γ {Eagle2(K=2, d_max=2, N=50).candidates()})"
    assert (spec_label(DySpec(m=32)), spec_label(Sequoia(n=32))) == ("DySpec m=32", "Sequoia n=32")


@pytest.mark.parametrize("budget", [8, 32, 64])
def test_the_speed_table_labels_its_budget_rows_from_their_specs_and_the_claims_find_them(budget):
    policies = speed_strategies(0.05, "0.6/0.2", None, budget=budget)
    labels = budget_labels(budget, policies)
    for label in labels.values():
        assert label in policies and spec_label(policies[label]) == label
    assert budget_labels(budget) == labels  # the claims' default labels are the table's
    renamed = {("my " + k if p.name == "sequences" else k): p for k, p in policies.items()}
    assert budget_labels(budget, renamed)["sequences"] == "my " + labels["sequences"]  # as run, whatever the label


def _runs(rates: dict, prompts: int = 3) -> list[Run]:
    """label → tokens/s, 60 tokens a prompt; HF generate at 10 tokens/s."""
    out = []
    for i in range(prompts):
        for label, rate in {HF: 10.0, **rates}.items():
            out.append(Run(label, f"p{i}", "c", list(range(60)), 60 / rate, 30, 60, 30, 0.1, 0.5))
    return out


def test_a_speed_table_renders_no_all_nan_column_and_names_its_second_baseline():
    """Unpriced runs (no step model: notebook 03's) leave `projected` NaN in every row: the table drops it. With our
    AR loop among the rows, the speedup over it is a second column beside the headline vs HF generate."""
    table = speed_table(_runs({AR_LABEL: 12.5, "chain-2": 20.0}))
    assert not [c for c in table.columns if table[c].isna().all()]
    assert "projected" not in table and "projected_error" not in table
    t = table.set_index("method")
    assert t.loc["chain-2", "speedup"] == pytest.approx(2.0)  # vs HF generate
    assert t.loc["chain-2", "speedup_vs_our_ar_loop"] == pytest.approx(1.6)
    assert list(table.columns).index("speedup_vs_our_ar_loop") == list(table.columns).index("speedup") + 1
    assert "speedup_vs_our_ar_loop" not in speed_table(_runs({"chain-2": 20.0}))
    layout = dyspec_layout({0.0: table}, 8)
    assert layout.empty or not layout.isna().all().any()


def test_every_s_d_over_s_t_kind_has_its_own_name():
    names = {kind: sd_st(kind, device="H100", shape="llama-3.1-8b") if kind == "gpu" else sd_st(kind)
             for kind in SD_ST}
    assert len(set(names.values())) == len(SD_ST) == 5
    assert sd_st("paper-7b", PAPER_7B) == "s_d/s_t (paper, 7B) 0.037"
    assert sd_st("paper-13b", PAPER_13B) == "s_d/s_t (paper, 13B) 0.028"
    assert sd_st("measured", 0.0476).startswith("s_d/s_t (this machine, measured as PCT does") and \
        sd_st("measured", 0.0476).endswith(" 0.048")
    assert sd_st("one-token", 0.193) == "s_d/s_t (one-token forward ratio t_draft(1)/t_target(1)) 0.193"
    assert sd_st("gpu", 0.078, device="H100", shape="llama-3.1-8b") == \
        "s_d/s_t (GPU cost model: H100, llama-3.1-8b) 0.078"
    with pytest.raises(ValueError):
        sd_st("gpu", 0.078)  # a GPU's ratio without its device and shape is not named
    with pytest.raises(ValueError):
        sd_st("machine")
    assert (paper_kind(0.0369), paper_kind(1.4 / 50.1), paper_kind(0.193)) == ("paper-7b", "paper-13b", None)


def test_a_speedup_names_its_baseline_and_a_projection_turns_to_hf_by_a_measured_ratio():
    assert speedup_name() == "speedup vs HF generate" and speedup_name(VS_AR, projected=True) == \
        "projected speedup vs our AR loop"
    assert to_hf(1.5, 1.27) == pytest.approx(1.905) and math.isnan(to_hf(1.5, None)) and math.isnan(to_hf(1.5, 0.0))
    assert VS_HF != VS_AR
    with pytest.raises(ValueError):
        speedup_name("vs plain decoding")
