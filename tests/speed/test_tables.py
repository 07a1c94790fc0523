"""Notebook 03's speed table: the equal-budget rows DySpec's Tables 1–2 compare draft the same number of tokens."""
import pytest

from spectree.core.errors import SpectreeError
from spectree.speed.tables import sampled, speed_strategies


@pytest.mark.parametrize("budget, K, depth, caps", [(64, 8, 6, (8, 11)), (64, 15, 10, (15, 11)), (32, 8, 12, (8, 12))])
def test_equal_budget_rows_draft_budget_tokens_and_dyspec_runs_alg1_uncapped(budget, K, depth, caps):
    """DySpec's row is Alg. 1 as written (K = m: no child cap) at the budget; the threshold tree keeps the profile's K
    (at least 8); both go to depth max(11, the profile's depth) (`DYSPEC_DEPTH`: its trees are rarely deeper)."""
    policies = speed_strategies(0.1, "0.6/0.2", None, budget=budget, K=K, depth=depth)
    dyspec, eagle2 = policies[f"DySpec m={budget}"], policies[f"EAGLE-2 N={budget + 1} (γ {budget})"]
    assert dyspec.m == budget and eagle2.verified() - 1 == budget  # N counts the root: budget drafts, as DySpec's m
    assert policies[f"Sequoia n={budget}"].n == budget
    threshold = policies["DySpec threshold"]
    assert dyspec.K == budget and (threshold.K, threshold.d_max) == caps and dyspec.d_max == caps[1]


def test_sampled_rows_name_rows_that_exist():
    """A profile's `sampled_rows` keeps the rows it names; a label no row has fails loudly, listing the labels."""
    rows = speed_strategies(0.1, "0.6/0.2", None, budget=64)
    assert list(sampled(rows, ["chain-2", "DySpec m=64"])) == ["chain-2", "DySpec m=64"]
    assert sampled(rows, []) == rows
    with pytest.raises(SpectreeError, match="DySpec m=32.*the rows are"):
        sampled(rows, ["chain-2", "DySpec m=32"])
