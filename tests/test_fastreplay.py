"""Vectorised replay equals the layer-loop replay, policy by policy, on a tiny-model logbook."""
import numpy as np
import pytest
import torch
from helpers import tiny_llama
from test_strategies import SPECS

from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.forest import (
    Forest,
    fast_replay,
    rank_in_group,
    smallest_in_runs,
    vectorised_select,
)
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay
from spectree.strategies import parse_strategy
from spectree.strategies.c2t import C2TPolicy
from spectree.strategies.c2t_classifier import C2TClassifier


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


def c2t(beta: float, topk: int) -> C2TPolicy:
    torch.manual_seed(0)
    return C2TPolicy(K=4, d_max=4, beta=beta, topk=topk, classifier=C2TClassifier().eval())


POLICIES = [pytest.param(lambda s=s: parse_strategy(s), id=s) for s in SPECS] + [
    pytest.param(lambda: c2t(0.3, 0), id="c2t-b0.3"), pytest.param(lambda: c2t(0.45, 3), id="c2t-b0.45-top3")]


@pytest.mark.parametrize("make", POLICIES)
def test_fast_replay_equals_replay(logbook, make):
    policy = make()
    fast, slow = fast_replay(logbook, policy), replay(logbook, policy)
    assert fast.to_dict("list") == slow.to_dict("list")


def test_the_policies_of_the_papers_are_vectorised():
    for spec in ("chain:k=4,stop=dyjoint,threshold=0.08", "kary:b=2,d=4", "eagle2", "dyspec:m=32", "pct", "cape",
                 "entropy:d=4", "dyspec_threshold"):
        assert vectorised_select(parse_strategy(spec)) is not None, spec
    assert vectorised_select(c2t(0.5, 0)) is not None


def test_unlogged_nodes_give_the_same_error(logbook):
    with pytest.raises(SpectreeError, match="log with larger"):
        fast_replay(logbook, parse_strategy("kary:b=8,d=2"))


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


def test_forest_indexes_every_logged_tree(logbook):
    f = Forest.of(logbook)
    assert f.n_trees == sum(lp.nodes.position.nunique() for lp in logbook)
    kids = f.cols["parents"] >= 0
    assert (f.tree[f.cols["parents"][kids]] == f.tree[kids]).all()
