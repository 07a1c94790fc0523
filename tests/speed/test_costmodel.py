"""The cost model: timing plumbing on a tiny model, interpolation and the tree-size chooser."""
import json

import pytest
from helpers import tiny_llama

from spectree.speed.costmodel import CostModel, best_tree_size, load_or_measure, measure, padded
from spectree.speed.load import REUSE_BUSY


def test_measure_times_every_size_and_caches(tmp_path, monkeypatch, tiny_target):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    draft = tiny_llama(seed=1, layers=1)
    cost = measure(tiny_target, draft, sizes=(1, 4, 16), prefix=8, repeats=2)
    assert len(cost.target_s) == len(cost.draft_s) == 3 and min(cost.target_s + cost.draft_s) > 0
    first = load_or_measure("tiny", tiny_target, draft, sizes=(1, 4), prefix=8, repeats=1)
    assert load_or_measure("tiny", tiny_target, draft, sizes=(1, 4), prefix=8) == first  # read from the cache
    assert load_or_measure("tiny", tiny_target, draft, sizes=(1, 2), prefix=8, repeats=1).sizes == [1, 2]  # re-measured


def test_the_padding_bound_caps_each_size_by_every_larger_one():
    # the first H100 run's 135M curve after 256 tokens (ms): the sizes timed first came out ~1.9x slow
    measured = [37.28, 35.26, 37.11, 37.28, 36.77, 19.24, 20.32, 19.59]
    assert padded(measured) == [19.24, 19.24, 19.24, 19.24, 19.24, 19.24, 19.59, 19.59]
    assert padded([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]  # a monotone curve is its own bound


def test_interpolation_ratio_and_chooser():
    cost = CostModel("m", 0, [1, 16, 64], target_s=[0.044, 0.099, 0.240], draft_s=[0.004, 0.006, 0.012])
    assert cost.t_target(8) == pytest.approx(0.044 + 7 / 15 * 0.055)
    assert cost.ratio == pytest.approx(0.004 / 0.044)
    # bigger trees accept more but cost more: on this curve 30 tokens at τ 3.0 beat both 4 and 63
    taus, layers = {4: 1.1, 30: 3.0, 63: 3.1}, {4: [1, 2], 30: [1, 2, 4, 8], 63: [1, 2, 4, 8, 16]}
    assert best_tree_size(cost, taus, layers) == 30


def test_timings_taken_under_contention_are_not_trusted_from_the_cache(tmp_path, monkeypatch, tiny_target):
    # the shape of a cache written while training jobs shared the CPU: 2 tokens 6x slower than 16
    contended = CostModel("m", 8, [1, 2, 16], target_s=[0.77, 4.7, 0.47], draft_s=[0.02, 0.13, 0.21])
    assert not contended.plausible
    assert CostModel("m", 8, [1, 2, 16], target_s=[0.035, 0.034, 0.068], draft_s=[0.006, 0.006, 0.012]).plausible
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    monkeypatch.delenv(REUSE_BUSY, raising=False)  # the test command sets it
    from dataclasses import asdict

    from spectree.speed.costmodel import cache_path, read_cached

    path = cache_path("tiny")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(asdict(contended)))
    assert read_cached(path) is None
    monkeypatch.setenv(REUSE_BUSY, "1")
    assert read_cached(path) == contended  # as the test command runs (two test processes side by side)
    monkeypatch.delenv(REUSE_BUSY)
    remeasured = load_or_measure("tiny", tiny_target, tiny_llama(seed=1, layers=1), sizes=(1, 4), prefix=8, repeats=1)
    assert remeasured.sizes == [1, 4] and json.loads(path.read_text())["sizes"] == [1, 4]


def test_pct_without_a_ratio_takes_the_measured_one_and_nothing_else_changes():
    from spectree.speed.costmodel import calibrate
    from spectree.strategies import parse_strategy

    specs = ["ar", "pct", "pct:k=4", "pct:ratio=0.2", "chain:k=3"]
    policies = {s: parse_strategy(s) for s in specs}
    assert [p.needs_calibration for p in policies.values()] == [False, True, True, False, False]
    measured = CostModel("m", 8, [1, 4], [0.04, 0.05], [0.006, 0.007])
    out = calibrate(policies, lambda: measured)
    assert [p.spec for p in out.values()] == ["chain:k=0", "pct:ratio=0.15", "pct:ratio=0.15,k=4", "pct:ratio=0.2",
                                              "chain:k=3"]
    assert out["ar"] is policies["ar"]
    untouched = {s: policies[s] for s in ("ar", "pct:ratio=0.2")}
    assert calibrate(untouched, lambda: pytest.fail("the cost model is read only when a policy needs it")) == untouched


def test_length_table_times_every_prefix_and_size():
    from spectree.core.errors import SpectreeError
    from spectree.speed.lengths import length_table

    model = tiny_llama(seed=2, layers=1, context=512)
    table = length_table(model, sizes=(1, 4, 16), prefixes=(8, 64, 256), repeats=1)
    assert list(table.columns) == ["prefix", "n", "seconds", "ratio_to_one_token"]
    assert table[["prefix", "n"]].values.tolist() == [[p, n] for p in (8, 64, 256) for n in (1, 4, 16)]
    assert (table.seconds > 0).all() and table[table.n == 1].ratio_to_one_token.tolist() == [1.0] * 3
    for _, rows in table.groupby("prefix"):  # each size against one token at the same prefix (no timing asserted:
        one = rows.seconds[rows.n == 1].iloc[0]  # a loaded CI host may time any size slower; speed is a benchmark's)
        assert rows.ratio_to_one_token.tolist() == pytest.approx((rows.seconds / one).tolist())
    with pytest.raises(SpectreeError, match="needs n = 1"):
        length_table(model, sizes=(2, 4), prefixes=(8,))
