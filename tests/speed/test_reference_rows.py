"""Reference rows: the same policies on another drafter of the same target in one run (`run_strategies(drafts=)`,
`tables.head_reference`), the fastest tree of a table, and the tree a speed notebook recorded for later ones."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import ToyChat, tiny_llama

from spectree.core.decode import as_drafter
from spectree.core.errors import SpectreeError
from spectree.models.loading import reference_draft
from spectree.prompts import Prompt
from spectree.speed.bench import run_strategies
from spectree.speed.references import HF
from spectree.speed.tables import best_tree, head_reference, saved_best_tree, speed_table
from spectree.strategies import parse_strategy

PROMPTS = [Prompt("toy", "0", "a", "x"), Prompt("toy", "1", "b", "y")]


@pytest.fixture(scope="module")
def models():
    return tiny_llama(0, layers=2), tiny_llama(1, layers=1), ToyChat()


def test_reference_rows_draft_with_their_own_drafter_in_the_same_run(models):
    target = models[0]
    twin = as_drafter(target)  # the target as its own draft: every drafted token is accepted
    runs = head_reference(models, (twin, "twin"), {"chain-2": parse_strategy("chain:k=2")}, PROMPTS, 12,
                          warmup=False)
    assert [(r.prompt, r.strategy) for r in runs] == [(p.key, m) for p in PROMPTS for m in (HF, "chain-2", "chain-2 (twin)")]
    table = speed_table(runs).set_index("method")
    assert table.exact.eq(1.0).all()  # both drafters decode losslessly
    twin_runs = [r for r in runs if r.strategy == "chain-2 (twin)"]
    assert sum(r.tau_sum for r in twin_runs) / sum(r.forwards for r in twin_runs) > 2.5  # the twin's chains pass
    assert table.loc["chain-2", "tau"] < table.loc["chain-2 (twin)", "tau"]
    with pytest.raises(SpectreeError, match="drafts for labels that are no policy's: \\['nope'\\]"):
        run_strategies(models, PROMPTS, {"ar": parse_strategy("ar")}, 4, drafts={"nope": twin})


def test_best_tree_is_the_fastest_row_that_is_neither_a_reference_nor_plain_decoding():
    """Plain decoding through our loop verifies no draft token (γ = 0), whatever it is called."""
    table = pd.DataFrame({"method": ["HF generate", "HF generate, our kernels", "AR (our loop)", "ar", "chain-2", "PCT"],
                          "speedup": [1.0, 1.3, 1.2, 1.25, 1.1, 0.9], "gamma": [0.0, 0.0, 0.0, 0.0, 2.0, 9.0]})
    assert best_tree(table) == "chain-2"
    with pytest.raises(SpectreeError, match="no timed model-tree row"):
        best_tree(table[table.method.isin(["HF generate", "AR (our loop)", "ar"])])


def test_a_saved_best_tree_serves_only_its_own_pair_and_machine(tmp_path):
    path = tmp_path / "summary.json"
    assert saved_best_tree("p", "m", path) == (None, f"no {path}")
    path.write_text(json.dumps({"pair": "p", "machine": "m", "best_tree": {"label": "chain-2", "spec": "chain:k=2",
                                                                             "speedup": 1.2}}))
    spec, why = saved_best_tree("p", "m", path)
    assert spec == "chain:k=2" and "chain-2 was the fastest" in why
    assert saved_best_tree("q", "m", path)[0] is None and saved_best_tree("p", "other", path)[0] is None
    path.write_text(json.dumps({"pair": "p", "machine": "m"}))
    assert saved_best_tree("p", "m", path) == (None, f"{path} records no best tree")


def test_a_reference_pair_must_draft_for_the_same_target(tmp_path):
    from helpers import own_pair_folders

    target, draft = own_pair_folders(tmp_path / "a")
    other, _ = own_pair_folders(tmp_path / "b", seed=3)
    with pytest.raises(SpectreeError, match="reference pair .* a reference row must draft for the same target"):
        reference_draft(f"{target}+hf:{draft}", f"{other}+hf:{draft}", (None, None, None))


def test_hf_rows_count_their_forwards_and_have_a_twin_on_our_kernels():
    """Every HF reference row reads τ and γ off the forwards HF ran (`references.counted`): 1 and 0 for plain
    generate; HF prompt lookup's equal those of `ar` + HF's rule on our loop (the same proposals on the same greedy
    text: the same accepted tokens, up to the last forward, where HF trims its candidates to the tokens left); on
    packed kernels each HF row has its twin there, and the same-kernel speedup of a stock row is against HF generate."""
    from spectree.core.kernels import pack_linears
    from spectree.retrieval.proposers import HF_RULE
    from spectree.speed.bench import summarize_runs
    from spectree.speed.references import HF_LOOKUP, HF_LOOKUP_PACKED, HF_PACKED, REFERENCES

    target, draft = tiny_llama(seed=3, layers=2, vocab=31), tiny_llama(seed=1, layers=1, vocab=31)
    pack_linears(target, draft)
    rule = f"ar+{HF_RULE.replace('len=10', 'len=4')}"
    runs = run_strategies((target, draft, ToyChat()), PROMPTS, {rule: parse_strategy(rule)}, 40, warmup=False,
                          hf_lookup=4)
    table = summarize_runs(runs).set_index("strategy")
    assert set(table.index) == {HF, HF_PACKED, HF_LOOKUP, HF_LOOKUP_PACKED, rule} <= {*REFERENCES, rule}
    assert table.exact.eq(1.0).all()
    assert table.loc[[HF, HF_PACKED], "tau"].eq(1.0).all() and table.loc[[HF, HF_PACKED], "gamma"].eq(0).all()
    hf = [r for r in runs if r.strategy == HF_LOOKUP]
    ours = [r for r in runs if r.strategy == rule]
    assert table.loc[rule, "tau"] > 1.2 and table.loc[HF_LOOKUP, "tau"] > 1.2  # the lookups were accepted
    for a, b in zip(hf, ours):
        assert abs(a.forwards - b.forwards) <= 1 and a.forwards >= b.forwards
    assert table.loc[HF_LOOKUP, "tau"] == pytest.approx(table.loc[HF_LOOKUP_PACKED, "tau"])
    assert table.loc[HF_LOOKUP, "speedup_same_kernels"] == table.loc[HF_LOOKUP, "speedup"]
    assert table.loc[HF_LOOKUP_PACKED, "speedup_same_kernels"] == pytest.approx(
        table.loc[HF_LOOKUP_PACKED, "tokens_per_s"] / table.loc[HF_PACKED, "tokens_per_s"])
