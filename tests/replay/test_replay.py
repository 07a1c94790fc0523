"""Replay over a `Forest` (every logged tree at once): the per-group selections it relies on, the node table,
and the one clear error where a logbook cannot replay a policy."""
import numpy as np
import pytest
from helpers import tiny_llama

from spectree.core.errors import SpectreeError
from spectree.core.groups import kth_largest, rank_in_group, smallest_in_runs, top_in_groups
from spectree.prompts import Prompt
from spectree.replay.forest import Forest, tile
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay
from spectree.strategies import parse_strategy


class Template:
    def __init__(self, ids):
        self.ids = ids

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return self.ids


@pytest.fixture(scope="module")
def logbook(tiny_target):
    cfg = LogConfig(max_new_tokens=20, K=7, d_max=4, beam=400)  # every node below depth 4 expanded
    draft = tiny_llama(seed=1, layers=1)
    return [log_prompt(tiny_target, draft, Template(ids), Prompt("toy", str(i), f"cat{i % 2}", "x"), cfg, eos_ids=())
            for i, ids in enumerate([[3, 14, 15, 92, 65], [2, 71, 82, 81], [5, 5, 6]])]


def test_replay_of_many_prompts_equals_replay_of_each(logbook):
    """Trees of different prompts never interact: grown together they give what each gives alone."""
    for spec in ("eagle2:K=3,d_max=4,N=8", "dyspec:m=10,K=3,d_max=4", "sequoia:n=6,p=0.6/0.2/0.1"):
        policy = parse_strategy(spec)
        together = replay(logbook, policy)
        alone = [replay([lp], policy) for lp in logbook]
        assert together.tau.tolist() == [t for steps in alone for t in steps.tau], spec
        assert together.gamma.tolist() == [g for steps in alone for g in steps.gamma], spec


def test_unlogged_nodes_give_one_clear_error(logbook):
    with pytest.raises(SpectreeError, match="log with larger"):
        replay(logbook, parse_strategy("kary:b=8,d=2"))
    narrow = LogConfig(max_new_tokens=8, K=4, d_max=3, beam=1, b_env=1, d_env=1)  # only the chain is expanded
    lp = log_prompt(tiny_llama(0, layers=3), tiny_llama(seed=1, layers=1), Template([3, 4, 5]),
                    Prompt("toy", "9", "c", "x"), narrow, eos_ids=())
    with pytest.raises(SpectreeError, match="was not expanded in the logbook"):
        replay([lp], parse_strategy("kary:b=2,d=3"))


def test_rank_in_group():
    group = np.array([1, 0, 1, 0, 1])
    assert rank_in_group(group, -np.array([0.2, 0.5, 0.9, 0.1, 0.2])).tolist() == [1, 0, 0, 1, 2]


@pytest.mark.parametrize("n", [1, 3, 8, 50])
def test_smallest_in_runs_equals_ranking_with_ties_in_input_order(n):
    rng = np.random.default_rng(n)
    group = np.sort(rng.integers(0, 40, size=600))  # contiguous runs of varied length
    key = -rng.choice([0.5, 0.25, 0.125, 0.1, 0.05], size=600)  # many exact ties
    assert (smallest_in_runs(group, key, n) == (rank_in_group(group, key) < n)).all()
    assert smallest_in_runs(group[:0], key[:0], n).shape == (0,)


def test_top_in_groups_breaks_ties_towards_shallower_nodes_and_takes_a_count_per_row():
    group, depth = np.array([0, 0, 0, 1, 1]), np.array([2, 1, 1, 0, 1])
    key = np.array([0.5, 0.5, 0.2, 0.9, 0.9])
    assert top_in_groups(group, key, 1, depth).tolist() == [False, True, False, True, False]
    assert top_in_groups(group, key, np.array([2, 2, 2, 0, 0]), depth).tolist() == [True, True, False, False, False]


def test_kth_largest_per_group():
    bar = kth_largest(np.array([0, 0, 0, 2]), np.array([0.1, 0.7, 0.4, 0.3]), 2, 3)
    assert bar.tolist() == [0.4, -np.inf, -np.inf]


def test_forest_indexes_every_logged_tree(logbook):
    f = Forest.of(logbook)
    assert f.n_trees == sum(lp.nodes.position.nunique() for lp in logbook)
    kids = f.cols["parents"] >= 0
    assert (f.tree[f.cols["parents"][kids]] == f.tree[kids]).all()


def test_tile_repeats_the_logbook_to_the_asked_size(logbook):
    big = tile(logbook, 500)
    assert sum(lp.nodes.position.nunique() for lp in big) >= 500 and len({lp.prompt.id for lp in big}) == len(big)
