"""Replay over a `Forest` (every logged tree at once): the per-group selections it relies on, the node table,
and the one clear error where a logbook cannot replay a policy."""
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_llama

from spectree.core.errors import SpectreeError
from spectree.core.groups import kth_largest, rank_in_group, smallest_in_runs, top_in_groups
from spectree.prompts import Prompt
from spectree.replay.forest import Forest, tile
from spectree.replay.logbook import LogConfig, log_prompt, logbook_manifest
from spectree.replay.replay import replay, summarize
from spectree.analysis import sweeps
from spectree.analysis.surfaces import hand_set_classifier
from spectree.core.paths import artifact_path
from spectree.strategies import parse_strategy
from spectree.strategies.c2t import C2T, save_classifier
from spectree.strategies.sequoia import Sequoia


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


def test_c2t_envelope_makes_every_c2t_setting_at_or_above_its_beta_replay(tmp_path, monkeypatch):
    """A classifier that trusts unlikely tokens keeps nodes off every joint-probability beam: a narrow logbook
    cannot replay C2T, the same logbook with C2T's envelope at β 0.5 replays C2T at every β ≥ 0.5 and topk."""
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    save_classifier(hand_set_classifier(-8.0, 0.0, 0.0, bias=1.0), artifact_path("c2t", "contrarian"))
    narrow = LogConfig(max_new_tokens=8, K=4, d_max=3, beam=1, b_env=1, d_env=1)
    enveloped = replace(narrow, c2t="contrarian", c2t_beta=0.5)
    assert narrow.record() == {k: v for k, v in asdict(narrow).items()
                               if not k.startswith(("c2t", "dyspec_")) and k != "shape"}
    assert enveloped.key() != narrow.key()
    with pytest.raises(SpectreeError, match="C2T classifier .* is missing"):  # before any model loads
        logbook_manifest([], replace(narrow, c2t="absent"))
    target, draft = tiny_llama(0, layers=3), tiny_llama(seed=1, layers=1)
    def logged(cfg):
        return [log_prompt(target, draft, Template(ids), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
                for i, ids in enumerate([[3, 4, 5], [9, 8, 7, 6]])]
    narrow_book, env_book = logged(narrow), logged(enveloped)
    settings = [C2T(beta=b, K=k, d_max=3, topk=t, classifier="contrarian")
                for b in (0.5, 0.6, 0.7) for t in (0, 1, 2) for k in (3, 4)]
    with pytest.raises(SpectreeError, match="was not expanded in the logbook"):
        replay(narrow_book, C2T(beta=0.5, K=4, d_max=3, topk=2, classifier="contrarian"))
    for policy in settings:
        steps = replay(env_book, policy)
        assert steps.gamma.sum() > 0, policy.spec  # C2T drafted: its kept nodes were off the joint's beam
    for spec in ("eagle2:K=3,d_max=3,N=6", "chain:k=3"):  # the envelope only adds: other policies score the same
        assert replay(env_book, parse_strategy(spec)).tau.tolist() == replay(narrow_book, parse_strategy(spec)).tau.tolist()
    own_book = logged(replace(enveloped, shape="c2t"))  # C2T's tree alone (`c2t_logbook`): C2T scores the same
    assert sum(len(lp.nodes) for lp in own_book) <= sum(len(lp.nodes) for lp in env_book)
    for policy in settings:
        a, b = replay(own_book, policy), replay(env_book, policy)
        assert (a.tau.tolist(), a.gamma.tolist()) == (b.tau.tolist(), b.gamma.tolist()), policy.spec
    # notebook 02: C2T's settings score on their own logbook, every other policy on the shared one
    chain, c2t = parse_strategy("chain:k=2"), settings[0]
    table = sweeps.sweep(narrow_book, [chain, c2t], own={"c2t": env_book}).set_index("spec")
    assert table.replayable.all() and table.loc[c2t.spec, "tau"] == summarize(replay(env_book, c2t))["tau"]
    assert not sweeps.sweep(narrow_book, [chain, c2t]).set_index("spec").loc[c2t.spec, "replayable"]
    with pytest.raises(SpectreeError, match="other prompts"):
        sweeps.sweep(narrow_book, [c2t], own={"c2t": env_book[:1]})
    # "group:name" gives one group's settings their own logbook; the same spec elsewhere scores on the shared one
    mixed = sweeps.sweep(narrow_book, {"trees": [c2t], "chains": [c2t, chain]}, own={"trees:c2t": env_book})
    assert mixed.set_index("group").loc["trees", "replayable"] and not mixed[
        (mixed.group == "chains") & (mixed.spec == c2t.spec)].replayable.iloc[0]


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


def test_path_shape_logs_exactly_the_tokens_a_greedy_verifier_can_examine(tiny_target):
    """The analysis logbook's shape (notebooks 04–07): expanding only the greedy path and the rank-0 chain stores
    the same examined tokens and rank-0 chain, with the same features and labels, as the complete tree of that K and
    depth, at a fraction of its nodes."""
    from spectree.analysis.token_tables import logbook_tokens

    complete = LogConfig(max_new_tokens=12, K=12, d_max=3, beam=12 * 12)  # every node below depth 3 expanded
    path = replace(complete, beam=1, b_env=1, d_env=1, shape="path")
    assert "shape" not in complete.record() and path.record()["shape"] == "path" and path.key() != complete.key()
    draft = tiny_llama(seed=3, layers=1)
    def logged(cfg):
        return [log_prompt(tiny_target, draft, Template(ids), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
                for i, ids in enumerate([[3, 14, 15, 92, 65], [2, 71, 82, 81], [5, 5, 6]])]
    full_book, path_book = logged(complete), logged(path)
    full, narrow = (logbook_tokens(b).sort_values(["prompt", "position", "depth", "token", "p"], ignore_index=True)
                    for b in (full_book, path_book))
    pd.testing.assert_frame_equal(full, narrow)
    deep = full[full.examined & (full.depth > 1) & ~full.chain]
    assert len(deep) > 0  # the path left the rank-0 chain and was still expanded
    assert sum(len(lp.nodes) for lp in path_book) * 5 < sum(len(lp.nodes) for lp in full_book)


def test_log_shape_is_checked_before_any_model_loads():
    with pytest.raises(SpectreeError, match="shape must be one of"):
        LogConfig(shape="beams")
    with pytest.raises(SpectreeError, match="'c2t' with a C2T classifier"):
        LogConfig(shape="c2t")


def logged_by_workers(prompts, cfg: LogConfig, tmp_path, monkeypatch, models=None) -> dict:
    """{"1", "2"}: the logbook `write_logbook` writes with SPECTREE_WORKERS 1 and 2, this process on one torch
    thread as each of the two workers."""
    import torch

    from spectree.replay.logbook import read_logbook, write_logbook

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        books = {}
        for workers in ("1", "2"):
            monkeypatch.setenv("SPECTREE_WORKERS", workers)
            books[workers] = read_logbook(write_logbook(prompts, cfg, "t", out=tmp_path / workers, models=models))
        return books
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_logging_in_processes_writes_what_one_process_writes(tmp_path, monkeypatch):
    """`write_logbook` with SPECTREE_WORKERS 2 (spawned processes, the pair loaded by name in each) writes the
    same files as one process, and a bad value is one clear error."""
    from spectree.prompts import parse_prompt_spec
    from spectree.replay.logbook import write_logbook

    cfg = LogConfig(pair="smollm2-edd", max_new_tokens=6, K=4, d_max=3, beam=1, b_env=1, d_env=1, shape="path")
    prompts = parse_prompt_spec("mtbench:2+humaneval:1")
    books = logged_by_workers(prompts, cfg, tmp_path, monkeypatch)
    assert len(books["2"]) == 3
    for one, two in zip(books["1"], books["2"]):
        assert (one.prompt, one.continuation) == (two.prompt, two.continuation)
        pd.testing.assert_frame_equal(one.nodes, two.nodes)
    monkeypatch.setenv("SPECTREE_WORKERS", "two")
    with pytest.raises(SpectreeError, match="SPECTREE_WORKERS must be"):
        write_logbook(prompts, cfg, "t", out=tmp_path / "bad")


@pytest.mark.slow
def test_logging_workers_load_the_kernels_of_the_models_given(tmp_path, monkeypatch):
    """Workers log on the kernels of the models a notebook passes (prepacked here): their files equal, float for
    float, what those models log in this process — stock products in the workers differ in the last bits."""
    from spectree.core.kernels import is_packed
    from spectree.models.loading import load_pair
    from spectree.prompts import parse_prompt_spec

    cfg = LogConfig(pair="smollm2-edd", max_new_tokens=4, K=4, d_max=3, beam=2, b_env=1, d_env=1)
    prompts = parse_prompt_spec("mtbench:2")
    models = load_pair(cfg.pair, kernels="packed")
    if not is_packed(models[0]):
        pytest.skip("no oneDNN prepacking on this CPU: every kernel is stock")
    books = logged_by_workers(prompts, cfg, tmp_path, monkeypatch, models)
    for one, two in zip(books["1"], books["2"], strict=True):
        pd.testing.assert_frame_equal(one.nodes, two.nodes, check_exact=True)


def test_dyspec_shape_replays_dyspec_uncapped_and_capped_as_the_complete_tree_does(tiny_target):
    """DySpec's own logbook (shape "dyspec": only the children its Alg. 1 / Alg. 2 select at each budget, uncapped
    K = m and capped, plus each expanded node's first child) replays every one of them, at any depth up to d_max,
    exactly as the complete tree of that width and depth does, at a fraction of its nodes; a DySpec of another K is
    not guaranteed and the complete tree's beam is what a full logbook would need."""
    from spectree.replay.logtree import budget_policies

    complete = LogConfig(max_new_tokens=16, K=8, d_max=3, beam=8 ** 3)  # every node below depth 3 expanded
    own = replace(complete, beam=1, b_env=1, d_env=1, shape="dyspec", dyspec_budgets=(4, 6, 8), dyspec_cap=3,
                  dyspec_sequoia=(0.5, 0.2, 0.1))
    assert own.record()["dyspec_budgets"] == [4, 6, 8] and "dyspec_cap" not in complete.record()
    draft = tiny_llama(seed=1, layers=1)
    def logged(cfg):
        return [log_prompt(tiny_target, draft, Template(ids), Prompt("toy", str(i), "c", "x"), cfg, eos_ids=())
                for i, ids in enumerate([[3, 14, 15, 92, 65], [2, 71, 82, 81], [5, 5, 6]])]
    full_book, own_book = logged(complete), logged(own)
    assert sum(len(lp.nodes) for lp in own_book) * 10 < sum(len(lp.nodes) for lp in full_book)
    policies = budget_policies((4, 6, 8), 3, 3) + budget_policies((6,), 3, 2)
    assert {p.K for p in policies} == {3, 4, 6, 8} and any(p.name == "dyspec_threshold" for p in policies)
    policies += [Sequoia(n=m, p="0.5/0.2/0.1") for m in (4, 6)]  # logged beside them (`sequoia_union`; m = 8's
    assert [(p.K, p.d_max) for p in policies[-2:]] == [(2, 3), (3, 3)]  # tree is 4 deep, past this logbook)
    wide = 0
    for policy in policies:
        a, b = replay(full_book, policy), replay(own_book, policy)
        assert (a.tau.tolist(), a.gamma.tolist()) == (b.tau.tolist(), b.gamma.tolist()), policy.spec
        wide += policy.K > 3 and a.gamma.sum() > 0
    assert wide  # the uncapped settings grew trees the K = 3 cap could not
    caps = sweeps.dyspec_caps(own_book, [4, 8], cap=3)
    assert caps.replayable.all() and (caps.trees > 0).all() and caps.cap_binds.between(0, 1).all()
    assert caps.max_children.max() > 3 and (caps.cap_binds > 0).any()  # the uncapped trees put > 3 under a node
    with pytest.raises(SpectreeError, match="budgets m in 1..K"):
        replace(own, dyspec_budgets=(16,))


def test_dyspec_logbook_replays_uncapped_alg1_past_the_cap_at_budget_16(tiny_target):
    """At a budget past the cap (m = 16, cap 8) on a flat draft (a random tiny model: near-uniform over 97 tokens),
    uncapped Alg. 1 puts all 16 tokens under the root (the sibling slots stay near 1, a child's is ~1/97) and the
    capped one 8: DySpec's own logbook must log the uncapped tree (`budget_policies`: K = m, not the cap), so that
    it replays as the complete tree of width 16 does and as live drafting grows it."""
    from spectree.core.decode import speculative_generate
    from spectree.replay.logtree import budget_policies
    from spectree.strategies.dyspec import DySpec

    m, cap, d_max = 16, 8, 2
    uncapped, capped = DySpec(m=m, K=m, d_max=d_max), DySpec(m=m, K=cap, d_max=d_max)
    assert uncapped in budget_policies([m], cap, d_max) and capped in budget_policies([m], cap, d_max)
    complete = LogConfig(max_new_tokens=8, K=m, d_max=d_max, beam=m)  # every node below depth 2 expanded
    own = replace(complete, beam=1, b_env=1, d_env=1, shape="dyspec", dyspec_budgets=(m,), dyspec_cap=cap)
    draft, ids = tiny_llama(seed=1, layers=1), [3, 14, 15, 92, 65]
    full_book, own_book = ([log_prompt(tiny_target, draft, Template(ids), Prompt("toy", "0", "c", "x"), cfg,
                                       eos_ids=())] for cfg in (complete, own))
    caps = sweeps.dyspec_caps(own_book, [m], cap=cap).iloc[0]
    assert caps.replayable and caps.max_children == m and caps.cap_binds == 1.0  # every tree: 16 root children
    full_caps = sweeps.dyspec_caps(full_book, [m], cap=cap).iloc[0]
    assert (caps.trees, caps.root_children, caps.max_children) == (full_caps.trees, full_caps.root_children,
                                                                   full_caps.max_children)
    live = speculative_generate(tiny_target, draft, ids, uncapped, 8)
    for policy in (uncapped, capped):
        a, b = replay(full_book, policy), replay(own_book, policy)
        assert (a.tau.tolist(), a.gamma.tolist()) == (b.tau.tolist(), b.gamma.tolist()), policy.spec
    steps = replay(own_book, uncapped)
    assert (steps.tau.tolist(), steps.gamma.tolist()) == ([s.tau for s in live.steps], [s.gamma for s in live.steps])
    assert sweeps.dyspec_caps(own_book, [m], cap=m).iloc[0].cap_binds == 0


def test_dyspec_caps_counts_nodes_with_more_children_than_the_cap(logbook):
    """`dyspec_caps` on the complete logbook: at m = 6 with a cap of 1, every tree whose uncapped DySpec keeps two
    children of one node counts; with the cap at the budget, none does."""
    caps = sweeps.dyspec_caps(logbook, [6], cap=1).iloc[0]
    steps = replay(logbook, parse_strategy("dyspec:m=6,K=6,d_max=4"))
    assert caps.trees == len(steps) and caps.d_max == 4
    assert 0 < caps.cap_binds <= 1 and caps.max_children >= 2
    assert sweeps.dyspec_caps(logbook, [6], cap=6).iloc[0].cap_binds == 0
    assert not sweeps.dyspec_caps(logbook, [9], cap=1).iloc[0].replayable  # K = 9 > the logbook's 7


def test_a_narrow_logbook_walks_the_greedy_path_it_is_given_without_generating_it_again(tiny_target):
    """`log_prompt(known=...)` (C2T's and DySpec's own logbooks take the shared logbook's continuations): the same
    trees as generating the path again when `known` is that path, and the given path, not a regenerated one, when it
    is another; too short a path (less than d_max past max_new_tokens) is generated again."""
    cfg = LogConfig(max_new_tokens=10, K=4, d_max=3, beam=4)
    draft, prompt = tiny_llama(seed=1, layers=1), Prompt("toy", "0", "c", "x")
    fresh = log_prompt(tiny_target, draft, Template([3, 14, 15]), prompt, cfg, eos_ids=())
    longer = log_prompt(tiny_target, draft, Template([3, 14, 15]), prompt, replace(cfg, d_max=4), eos_ids=())
    reused = log_prompt(tiny_target, draft, Template([3, 14, 15]), prompt, cfg, eos_ids=(),
                        known=longer.continuation)
    assert reused.continuation == fresh.continuation == longer.continuation[:13] and reused.n_valid == fresh.n_valid
    pd.testing.assert_frame_equal(reused.nodes, fresh.nodes)
    other = [(t + 1) % 97 for t in longer.continuation]
    assert log_prompt(tiny_target, draft, Template([3, 14, 15]), prompt, cfg, eos_ids=(),
                      known=other).continuation == other[:13]
    short = log_prompt(tiny_target, draft, Template([3, 14, 15]), prompt, cfg, eos_ids=(), known=other[:12])
    assert short.continuation == fresh.continuation
