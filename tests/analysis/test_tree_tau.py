"""EDD + PCT τ of notebook 01 (EDD Table 3's tree ablations): live greedy decoding per (draft, tree), the
own-confidence reading of PCT, and the claims (tiny random models, synthetic drafts and per-prompt sums). Table 3's
draft ablations and Fig. 5: test_draft_arms."""
import numpy as np
import pandas as pd
import pytest

from helpers import grow_offline, synthetic_draft, tree_paths
from spectree.analysis.acceptance import DraftPlan
from spectree.claims.text import claims_text
from spectree.analysis.tree_tau import (LEAVES, MACHINE, SHIPPED, TIME_GAIN, OwnConfidencePCT, ablation_claims, decode_steps,
                                        table3_claims, table3_paper, table3_runs, tree_ablations, tree_row)
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
    from spectree.models.random_pairs import random_pair

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


def _row(label, tau, gamma=5.0, prompts=16, seed=0, depth=3.0, ratio=0.037):
    """A table row with per-prompt sums around τ and γ (20 forwards per prompt)."""
    rng = np.random.default_rng(seed)
    taus = tau + rng.normal(0, 0.3, prompts)  # prompts differ; the gap is paired
    gammas = gamma + rng.normal(0, 0.2, prompts)
    by_prompt = {f"p{i}": {"steps": 20.0, "tau": 20 * t, "gamma": 20.0 * g, "tau_drafted": 20 * t,
                           "depth": 20 * depth} for i, (t, g) in enumerate(zip(taus, gammas))}
    return {"label": label, "pair": "x", "spec": "pct", "ratio": ratio, "tau": float(taus.mean()), "gamma": gamma,
            "alpha": float(taus.mean()) / depth, "depth": depth, "steps": 20 * prompts, "by_prompt": by_prompt}


def _table(*rows):
    return pd.DataFrame(list(rows)).set_index("label", drop=False)


def test_leaf_claim_reads_only_tau_and_time_gain_is_never_a_verdict():
    table = _table(_row(SHIPPED, 3.0), _row(LEAVES, 3.01, gamma=9.0), _row(TIME_GAIN, 3.0, gamma=9.0))
    leaf, gain = ablation_claims(table)
    assert leaf["verdict"] == "holds" and "keeps EDD + PCT's τ" in leaf["name"] and "+2%" in leaf["goal"]
    assert "τ 3.99" in leaf["paper"] and leaf["kind"] == "paper" and "l.811" in leaf["goal"]
    # γ is reported (the ablation's tree holds PCT's: more nodes by construction), never judged
    assert leaf["details"]["gamma_ratio"] == pytest.approx(1.8) and "(γ 1.80×)" in leaf["ours"]
    assert "live decoding (notebook 01)" in leaf["ours"]  # notebook 02's Table 2 rows replay: their τ differs
    assert "γ is reported, not judged" in leaf["rule"] and "by construction" in leaf["rule"]
    assert "2.95x vs 3.04x" in leaf["rule"] and "≤ 1.02" in leaf["rule"]
    fewer = _table(_row(SHIPPED, 3.0), _row(LEAVES, 3.0, gamma=4.0))  # γ lower: no longer a reason to fail
    assert ablation_claims(fewer)[0]["verdict"] == "holds"
    lifted = ablation_claims(_table(_row(SHIPPED, 3.0), _row(LEAVES, 3.3, gamma=9.0)))[0]  # removed leaves accepted
    assert lifted["verdict"] == "does not hold" and lifted["interval"][0] > 1.02
    # nothing removed (the same nodes in every prompt): τ equal would be an identity
    same = ablation_claims(_table(_row(SHIPPED, 3.0), _row(LEAVES, 3.0)))[0]
    assert same["verdict"] == "not testable" and "identity" in same["rule"] and same["n"] == 0
    # the paper's variant is unsaid (l.719): not testable whatever our reading's numbers, which stand beside it
    for rows in (table, _table(_row(SHIPPED, 3.0), _row(TIME_GAIN, 2.0, depth=4.0, seed=1))):
        gain = ablation_claims(rows)[1]
        assert gain["verdict"] == "not testable" and "α and τ" in gain["name"] and gain["n"] == 0
        assert "l.719" in gain["rule"] and "superset" in gain["rule"] and "illustration" in gain["ours"]
    # the verdict is read at the paper's ratio; this machine's is a second reading that never changes it
    machine = _table(_row(SHIPPED, 3.0), _row(LEAVES, 3.01, gamma=9.0), _row(SHIPPED + MACHINE, 3.0, ratio=0.2),
                     _row(LEAVES + MACHINE, 3.3, gamma=9.0, ratio=0.2))
    read = ablation_claims(machine)[0]
    assert read["verdict"] == "holds" and "0.037" in read["ours"]
    assert read["key"] == "edd-table3-leaf" and not read["diagnosis"]  # a claim that holds is not diagnosed
    failing = ablation_claims(_table(_row(SHIPPED, 3.0), _row(LEAVES, 3.3, gamma=9.0), _row(SHIPPED + MACHINE, 3.0,
                              ratio=0.2), _row(LEAVES + MACHINE, 3.01, gamma=9.0, ratio=0.2)))[0]
    assert failing["verdict"] == "does not hold"
    assert failing["readings"]["knobs"]["text"].startswith("s_d/s_t (one-token forward ratio t_draft(1)/t_target(1)) "
                                                           "0.200: holds")
    assert failing["diagnosis"].startswith(
        "holds only off the paper's point: knobs (s_d/s_t (one-token forward ratio t_draft(1)/t_target(1)) 0.200)")
    missing = ablation_claims(_table(_row(SHIPPED, 3.0)))
    assert [c["verdict"] for c in missing] == ["inconclusive", "not testable"] and missing[0]["n"] == 0
    assert table3_paper("w/o encoding result, self data").startswith("2.58x") and table3_paper("other") == "—"


def _plan(edd_claims=True):
    return DraftPlan(scored=["smollm2-edd"], runs=[], train=False, edd_claims=edd_claims,
                     ablations={"w/o KL divergence": "t+edd:ce"}, ablation_base="t+edd:base",
                     equal_budget={"EDD": "t+edd:self", "VDM": "smollm2-vdm"},
                     hidden_layers={"last layer (30)": "t+edd:l30"})


def test_table3_runs_decode_only_the_shipped_draft_under_pct_and_its_tree_ablations():
    runs = table3_runs(_plan(), 0.07)
    assert runs == {SHIPPED: ("smollm2-edd", PCT(ratio=0.07)), LEAVES: ("smollm2-edd", PCT(ratio=0.07, leaf_min=0.0)),
                    TIME_GAIN: ("smollm2-edd", OwnConfidencePCT(ratio=0.07))}
    assert table3_runs(_plan(edd_claims=False), 0.07) == {} and table3_claims(pd.DataFrame(), _plan(False)) == []
    both = table3_runs(_plan(), 0.037, machine=0.2)  # this machine's ratio: PCT and the leaf ablation again
    assert both[SHIPPED + MACHINE] == ("smollm2-edd", PCT(ratio=0.2)) and set(both) - set(runs) == {
        SHIPPED + MACHINE, LEAVES + MACHINE} and table3_runs(_plan(), 0.037, machine=0.037).keys() == runs.keys()
    empty = pd.DataFrame(columns=["label", "tau"]).set_index("label", drop=False)
    claims = table3_claims(empty, _plan())
    assert [c["verdict"] for c in claims] == ["inconclusive", "not testable"] and claims_text(claims)
