"""EDD + PCT τ of notebook 01 (EDD Table 3, Fig. 5): live greedy decoding per (draft, tree), the own-confidence
ablation of PCT, and the claims (tiny random models, synthetic drafts and per-prompt sums)."""
import numpy as np
import pandas as pd
import pytest

from helpers import grow_offline, synthetic_draft, tree_paths
from spectree.analysis.acceptance import DraftPlan
from spectree.analysis.claims import claims_text
from spectree.analysis.tree_tau import (BASE, SELF, SHIPPED, OwnConfidencePCT, ablation_claims, decode_steps,
                                        layer_claim, table3_claims, table3_runs, tree_ablations, tree_row)
from spectree.core.decode import speculative_generate
from spectree.prompts import Prompt, chat_ids
from spectree.strategies.pct import PCT


def test_own_confidence_pct_expands_by_each_tokens_probability_not_the_paths():
    # root children .5/.3/.2, every deeper node offers .6/.4: at s_d/s_t 0.25 PCT stops where ∏ c < 0.25, the
    # ablation ("confidence score directly used to prune") only where the token's own c < 0.25
    probs = {(): [0.5, 0.3, 0.2]}
    offer = synthetic_draft(lambda p: probs.get(p, [0.6, 0.4]), K=3)
    pct = tree_paths(grow_offline(PCT(ratio=0.25, k=3, d_max=3, leaf_min=0.0), offer))
    offer = synthetic_draft(lambda p: probs.get(p, [0.6, 0.4]), K=3)
    own = tree_paths(grow_offline(OwnConfidencePCT(ratio=0.25, k=3, d_max=3, leaf_min=0.0), offer))
    # PCT: (0,) .5 and (1,) .3 expand; (0, 0) .3 expands, (0, 1) .2 and (1, i) ≤ .18 do not
    assert pct == {(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (1, 1), (0, 0, 0), (0, 0, 1)}
    # own confidence: every node but (2,) (.2) expands, to depth 3
    assert pct < own and (1, 1, 0) in own and (2, 0) not in own and len(own) == 3 + 4 + 8
    assert OwnConfidencePCT(ratio=0.1).spec == "pct_own:ratio=0.1"


def test_tree_ablations_are_the_papers_pct_and_its_two_variants():
    trees = tree_ablations(0.05)
    assert trees["PCT"] == PCT(ratio=0.05, k=5, d_max=10, leaf_min=0.01)
    assert trees["w/o removing leaf nodes"] == PCT(ratio=0.05, k=5, d_max=10, leaf_min=0.0)
    assert isinstance(trees["w/o expected time gain"], OwnConfidencePCT)


@pytest.fixture(scope="module")
def self_drafted():
    from spectree.drafts.random_pairs import random_pair

    target, _, tok = random_pair("tiny", seed=3)
    return target, target, tok  # the target drafts for itself: every top-1 agrees


def test_decode_steps_records_every_forward_of_a_plain_greedy_decode(self_drafted):
    target, draft, tok = self_drafted
    prompts = [Prompt("set", str(i), "c", text) for i, text in enumerate(["Hello there", "Write a poem"])]
    policies = {"pct": PCT(ratio=0.05, k=3, d_max=4), "tiny": PCT(ratio=0.05, k=1, d_max=1)}
    steps = decode_steps(self_drafted, prompts, policies, 12)
    for label, policy in policies.items():
        for prompt in prompts:
            gen = speculative_generate(target, draft, chat_ids(tok, prompt.text), policy, 12,
                                       eos_ids=(tok.eos_token_id,), keep_trees=True)  # its own prefill
            rows = steps[label][steps[label].prompt == prompt.key]
            assert rows.tau.tolist() == [s.tau for s in gen.steps]
            assert rows.gamma.tolist() == [s.gamma for s in gen.steps]
            assert rows.depth.tolist() == [int(s.tree.depth.max()) for s in gen.steps]
    row = tree_row("pct", "pair", policies["pct"], steps["pct"])
    s = steps["pct"]
    assert row["tau"] == pytest.approx(s.tau.mean()) and row["tau"] > 1.5  # a self-draft is accepted
    assert row["alpha"] == pytest.approx(s.tau[s.depth > 0].sum() / s.depth.sum())
    assert row["steps"] == len(s) and set(row["by_prompt"]) == {"set/0", "set/1"}
    assert steps["tiny"].tau.max() <= 2 and steps["tiny"].gamma.max() == 1


def _row(label, tau, gamma=5.0, prompts=10, seed=0, depth=3.0):
    """A table row with per-prompt sums around τ and γ (20 forwards per prompt)."""
    taus = tau + np.random.default_rng(seed).normal(0, 0.3, prompts)  # prompts differ; the gap is paired
    by_prompt = {f"p{i}": {"steps": 20.0, "tau": 20 * t, "gamma": 20.0 * gamma, "tau_drafted": 20 * t,
                           "depth": 20 * depth} for i, t in enumerate(taus)}
    return {"label": label, "pair": "x", "spec": "pct", "tau": float(taus.mean()), "gamma": gamma,
            "alpha": float(taus.mean()) / depth, "depth": depth, "steps": 20 * prompts, "by_prompt": by_prompt}


def _table(*rows):
    return pd.DataFrame(list(rows)).set_index("label", drop=False)


def test_ablation_claims_hold_when_tau_drops_and_fail_when_it_rises():
    table = _table(_row(BASE, 3.0), _row("w/o KL divergence", 2.5), _row("w/o random division length", 3.5),
                   _row(SHIPPED, 3.0), _row("w/o removing leaf nodes", 3.01, gamma=9.0),
                   _row("w/o expected time gain", 3.0, gamma=9.0))
    claims = ablation_claims(table, BASE, ["w/o KL divergence", "w/o random division length", "w/o encoding result"])
    assert [c["verdict"] for c in claims] == ["holds", "does not hold", "inconclusive"]
    assert "τ 3.60" in claims[0]["paper"] and claims[2]["n"] == 0
    leaf, same = ablation_claims(table, SHIPPED, ["w/o removing leaf nodes", "w/o expected time gain"])
    assert leaf["verdict"] == "holds" and "verifies more nodes" in leaf["name"] and leaf["goal"]
    assert same["verdict"] == "does not hold" and "α and τ" in same["name"]  # the same τ on every prompt
    deeper = _table(_row(SHIPPED, 3.0), _row("w/o expected time gain", 2.5, depth=4.0, seed=1))
    assert ablation_claims(deeper, SHIPPED, ["w/o expected time gain"])[0]["verdict"] == "holds"
    more = _table(_row(SHIPPED, 3.0), _row("w/o removing leaf nodes", 3.0, gamma=4.0))
    assert ablation_claims(more, SHIPPED, ["w/o removing leaf nodes"])[0]["verdict"] == "does not hold"


def test_layer_claim_needs_the_fourth_to_last_layer_above_every_other():
    table = _table(_row(BASE, 3.0), _row("last layer (30)", 2.5, seed=1), _row("shallow layer (8)", 2.0, seed=2))
    assert layer_claim(table, BASE, ["last layer (30)", "shallow layer (8)"])["verdict"] == "holds"
    table = _table(_row(BASE, 3.0), _row("last layer (30)", 3.5, seed=1), _row("shallow layer (8)", 2.0, seed=2))
    assert layer_claim(table, BASE, ["last layer (30)", "shallow layer (8)"])["verdict"] == "does not hold"
    missing = layer_claim(table, BASE, ["last layer (30)", "middle layer (15)"])
    assert missing["verdict"] == "inconclusive" and missing["n"] == 0 and "Fig. 5" in missing["paper"]


def _plan(edd_claims=True, budget=True):
    return DraftPlan(scored=["smollm2-edd"], runs=[], train=False, edd_claims=edd_claims,
                     ablations={"w/o KL divergence": "t+edd:ce"}, ablation_base="t+edd:base",
                     equal_budget={"EDD": "t+edd:self", "VDM": "smollm2-vdm"} if budget else {},
                     hidden_layers={"last layer (30)": "t+edd:l30"})


def test_table3_runs_pair_each_draft_with_pct_and_the_shipped_draft_with_the_tree_ablations():
    runs = table3_runs(_plan(), 0.07)
    pct = PCT(ratio=0.07)
    assert runs[BASE] == ("t+edd:base", pct) and runs["w/o KL divergence"] == ("t+edd:ce", pct)
    assert runs["last layer (30)"] == ("t+edd:l30", pct) and runs[SHIPPED] == ("smollm2-edd", pct)
    assert runs["w/o removing leaf nodes"] == ("smollm2-edd", PCT(ratio=0.07, leaf_min=0.0))
    assert runs[SELF] == ("t+edd:self", pct) and runs["w/o encoding result, self data"] == ("smollm2-vdm", pct)
    assert SELF not in table3_runs(_plan(budget=False), 0.07) and table3_runs(_plan(edd_claims=False), 0.07) == {}
    empty = pd.DataFrame(columns=["label", "tau"]).set_index("label", drop=False)
    claims = table3_claims(empty, _plan())
    assert len(claims) == 5 and {c["verdict"] for c in claims} == {"inconclusive"} and claims_text(claims)
