"""Notebook 03's speed table: the equal-budget rows DySpec's Tables 1–2 compare draft the same number of tokens."""
import pytest

from spectree.speed.tables import speed_strategies


@pytest.mark.parametrize("budget, K, depth, caps", [(32, 8, 6, (8, 8)), (64, 15, 10, (15, 10))])  # default, paper
def test_equal_budget_rows_draft_budget_tokens_and_dyspec_takes_the_profiles_caps(budget, K, depth, caps):
    policies = speed_strategies(0.1, "0.6/0.2", None, budget=budget, K=K, depth=depth)
    dyspec, eagle2 = policies[f"DySpec m={budget}"], policies[f"EAGLE-2 N={budget + 1}"]
    assert dyspec.m == budget and eagle2.verified() - 1 == budget  # N counts the root: budget drafts, as DySpec's m
    assert policies[f"Sequoia n={budget}"].n == budget
    threshold = policies["DySpec threshold"]
    assert (dyspec.K, dyspec.d_max) == (threshold.K, threshold.d_max) == caps  # the profile's K and depth, at least 8
