"""The cost model: timing plumbing on a tiny model, interpolation and the tree-size chooser."""
import pytest

from helpers import tiny_llama
from spectree.costmodel import CostModel, best_tree_size, load_or_measure, measure


def test_measure_times_every_size_and_caches(tmp_path, monkeypatch, tiny_target):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    draft = tiny_llama(seed=1, layers=1)
    cost = measure(tiny_target, draft, sizes=(1, 4, 16), prefix=8, repeats=2)
    assert len(cost.target_s) == len(cost.draft_s) == 3 and min(cost.target_s + cost.draft_s) > 0
    first = load_or_measure("tiny", tiny_target, draft, sizes=(1, 4), prefix=8, repeats=1)
    assert load_or_measure("tiny", tiny_target, draft) == first  # second call reads the cache


def test_interpolation_ratio_and_chooser():
    cost = CostModel("m", 0, [1, 16, 64], target_s=[0.044, 0.099, 0.240], draft_s=[0.004, 0.006, 0.012])
    assert cost.t_target(8) == pytest.approx(0.044 + 7 / 15 * 0.055)
    assert cost.ratio == pytest.approx(0.004 / 0.044)
    # bigger trees accept more but cost more: on this curve 30 tokens at τ 3.0 beat both 4 and 63
    taus, layers = {4: 1.1, 30: 3.0, 63: 3.1}, {4: [1, 2], 30: [1, 2, 4, 8], 63: [1, 2, 4, 8, 16]}
    assert best_tree_size(cost, taus, layers) == 30
