"""Block sparsity of the tree attention mask (DySpec App. C) and C2T classifier surfaces, on cases small
enough to count by hand."""
import json

import numpy as np
import pytest
import torch
from helpers import Chat, make_tree

from spectree.analysis import sparsity, sparsity_claims, surfaces
from spectree.core.treeattn import additive_mask

#  0 ─ 1 ─ 3 ─ 5      two chains, stored layer by layer (BFS) as grow_tree stores them
#  └── 2 ─ 4 ─ 6
TWO_CHAINS = [-1, 0, 0, 1, 2, 3, 4]


def test_block_count_on_a_hand_drawn_mask():
    allowed = torch.zeros(4, 6, dtype=torch.bool)
    allowed[0, 0] = allowed[2, 5] = True
    assert sparsity.nonzero_blocks(allowed, 2).tolist() == [[True, False, False], [False, False, True]]
    assert sparsity.block_count(allowed, 2) == 2
    assert sparsity.nonzero_blocks(allowed, 4).tolist() == [[True, True]]  # edge tiles padded with False
    assert sparsity.block_count(torch.ones(5, 5, dtype=torch.bool), 4) == 4


def test_chain_mask_with_prefix_counts_lower_triangular_tiles():
    chain = make_tree([-1, 0, 1, 2, 3, 4, 5, 6])
    assert sparsity.block_count(sparsity.verify_mask(chain, 0), 4) == 3  # (0,0) (1,0) (1,1)
    assert sparsity.block_count(sparsity.verify_mask(chain, 4), 4) == 5  # + one prefix tile per row tile
    assert sparsity.dfs_tree(chain).parents.tolist() == chain.parents.tolist()


def test_verify_mask_is_prefix_then_ancestors():
    tree = make_tree(TWO_CHAINS)
    mask = sparsity.verify_mask(tree, 3)
    assert mask.shape == (7, 10) and bool(mask[:, :3].all())
    assert torch.equal(mask[:, 3:], tree.ancestor_mask())


def test_dfs_order_makes_each_chain_contiguous_and_saves_blocks():
    tree = make_tree(TWO_CHAINS)
    dfs = sparsity.dfs_tree(tree)
    assert dfs.parents.tolist() == [-1, 0, 1, 2, 0, 4, 5]
    assert dfs.tokens.tolist() == [100, 101, 103, 105, 102, 104, 106]
    # block 2, by hand: BFS row tiles touch 1 + 2 + 3 + 4 column tiles, DFS ones 1 + 2 + 2 + 3
    assert sparsity.count_orders(tree, [0], block=2)[0] == {
        "nodes": 7, "depth": 3, "prefix": 0, "original": 10, "dfs": 8, "bfs": 10, "ratio": 10 / 8}


def test_dfs_order_puts_every_subtree_in_one_run_of_indices():
    dfs = sparsity.dfs_tree(sparsity.random_tree(300, torch.Generator().manual_seed(1)))
    below = dfs.ancestor_mask()  # below[j, i]: i is j or an ancestor of j
    for i in range(len(dfs)):
        members = below[:, i].nonzero().flatten()
        assert members.tolist() == list(range(i, i + len(members)))


def alg1_pop_order_parents(n: int, seed: int, skew: float) -> list[int]:
    """DySpec Alg. 1 by hand: a list of open slots (v, parent, residual mass), the largest v taken each time
    (no heap), each drawn token taking the share u = U^(1/skew) of its slot's mass, U from the same seeded
    generator as `random_tree`. Returns the parent of each node in the order the slots were taken."""
    uniforms = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).tolist()
    joint, parents, slots = [1.0], [-1], [(1.0, 0, 1.0)]
    while len(parents) < n:
        v, parent, mass = max(slots, key=lambda slot: slot[0])
        slots.remove((v, parent, mass))
        u = uniforms[len(parents)] ** (1.0 / skew)
        parents.append(parent)
        joint.append(joint[parent] * mass * u)
        slots += [(joint[parent] * mass * (1 - u), parent, mass * (1 - u)), (joint[-1], len(parents) - 1, 1.0)]
    return parents


def test_random_tree_is_numbered_in_dyspec_heap_pop_order():
    tree = sparsity.random_tree(60, torch.Generator().manual_seed(3), skew=1.5)
    assert tree.parents.tolist() == alg1_pop_order_parents(60, 3, 1.5)  # DySpec's generation ("original") order
    earlier_siblings = [float(tree.draft_prob[1:i][tree.parents[1:i] == tree.parents[i]].sum()) for i in range(1, 60)]
    slot_value = tree.joint[tree.parents[1:]] * (1 - torch.tensor(earlier_siblings, dtype=tree.joint.dtype))
    assert bool((slot_value[1:] <= slot_value[:-1] + 1e-12).all())  # a heap pops values in decreasing order
    assert not bool((tree.depth[1:] >= tree.depth[:-1]).all())  # not breadth-first
    bfs = sparsity.bfs_tree(tree)
    assert bool((bfs.depth[1:] >= bfs.depth[:-1]).all())
    row = sparsity.count_orders(tree, [0], block=8)[0]
    assert row["original"] != row["bfs"] and row["ratio"] == row["original"] / row["dfs"]


def test_random_tree_is_seeded_and_sized():
    a = sparsity.random_tree(500, torch.Generator().manual_seed(3))
    b = sparsity.random_tree(500, torch.Generator().manual_seed(3))
    assert len(a) == 500 and torch.equal(a.parents, b.parents)
    assert bool((a.parents[1:] < torch.arange(1, 500)).all())
    assert a.joint.sum() <= len(a) and bool((a.joint[1:] <= a.joint[a.parents[1:]]).all())


def test_block_sparse_attention_equals_dense_masked_sdpa_in_both_orders():
    gen = torch.Generator().manual_seed(0)
    tree = sparsity.random_tree(90, gen)
    dfs = sparsity.dfs_tree(tree)
    prefix, order = 13, tree.dfs_order()
    q, k, v = (torch.randn(1, 3, n, 8, generator=gen) for n in (90, 103, 103))
    dense = sparsity.dense_attention(q, k, v, additive_mask(sparsity.verify_mask(tree, prefix), q.dtype))
    sparse = sparsity.block_sparse_attention(q, k, v, sparsity.sparse_plan(sparsity.verify_mask(tree, prefix), 16))
    assert torch.allclose(dense, sparse, atol=1e-5)
    keys = torch.cat([torch.arange(prefix), prefix + order])  # the DFS layout of the same keys
    dfs_out = sparsity.dense_attention(q[:, :, order], k[:, :, keys], v[:, :, keys],
                                       additive_mask(sparsity.verify_mask(dfs, prefix), q.dtype))
    assert torch.allclose(dfs_out, dense[:, :, order], atol=1e-5)


def test_timing_table_has_both_orders_and_equal_block_ratios():
    times = sparsity.time_orders([40], reps=3, heads=2, head_dim=8, block=8, device=torch.device("cpu"))
    assert sorted(times.order) == ["dfs", "original"] and bool((times.dense_ms > 0).all())
    for kernel in ("dense", "sparse"):  # the median lies within the spread of the rounds
        assert bool((times[f"{kernel}_ms_min"] <= times[f"{kernel}_ms"]).all())
        assert bool((times[f"{kernel}_ms"] <= times[f"{kernel}_ms_max"]).all())
    assert (times.reps == 3).all() and all(len(r) == 3 for r in times.dense_rounds)  # every round, for pairing
    assert all(min(r) == pytest.approx(lo, abs=1e-4) for r, lo in zip(times.sparse_rounds, times.sparse_ms_min))
    ratios = sparsity.timing_ratios(times)
    assert ratios.blocks.iloc[0] >= 1.0
    dfs = times.set_index("order").loc["dfs"]  # the speed claim's reading: dense ÷ block-sparse, DFS order
    assert ratios.dense_over_sparse.iloc[0] == pytest.approx(dfs.dense_ms / dfs.sparse_ms)
    assert sparsity_claims.dense_over_sparse(times, 40) == pytest.approx(np.divide(dfs.dense_rounds, dfs.sparse_rounds))


def test_hand_set_classifier_is_the_linear_form_at_alg1_depth():
    model = surfaces.hand_set_classifier(2.0, -0.5, 0.25, bias=1.0)
    logit, conf = surfaces.outputs(model, [0.5, 1.0], [2.0, 0.0], [4.0, 8.0])
    # Alg. 1's d = 4 is our node depth 5 (first drafted layer: d = 0 there, depth 1 in `Nodes`)
    assert logit.tolist() == pytest.approx([2 * 0.5 - 0.5 * 2 + 0.25 * 5 + 1, 2 + 0.25 * 9 + 1])
    assert conf == pytest.approx(1 / (1 + np.exp(-logit)))


def test_random_points_cover_the_papers_ranges_with_h_within_the_top_m_ceiling():
    pts = surfaces.random_points(2000, seed=0)
    assert pts.P.between(0, 1).all() and pts.H.between(0, np.log(1000)).all() and pts.H.max() > 6.8
    assert set(pts.d.unique()) == set(range(11))


def test_surfaces_and_partial_dependence_stay_where_the_features_can_be():
    model = surfaces.hand_set_classifier(3.0, 0.1, -0.2)
    surf = surfaces.surface_table(model, grid=12)
    assert surf.H.max() <= np.log(1000) + 1e-6 and surf.H.min() == 0  # the entropy of 1,000 probabilities
    assert set(surf[surf.fixed == "H"].value) == {1.0, 2.0, 6.0} and set(surf[surf.fixed == "d"].value) == {0, 3, 7}
    assert surf.d.min() == 0 and surf.d.max() == 10  # Alg. 1's depths
    pdep = surfaces.partial_dependence(model, surfaces.random_points(50), grid=5)
    assert pdep[pdep.feature == "H"].value.max() == pytest.approx(np.log(1000))


def test_scatter_colour_is_min_max_normalised_logit():
    scatter = surfaces.scatter_table(surfaces.hand_set_classifier(3.0, 0.1, -0.2), n=200)
    assert scatter.colour.min() == pytest.approx(0) and scatter.colour.max() == pytest.approx(1)
    assert np.corrcoef(scatter.colour, scatter.logit)[0, 1] == pytest.approx(1)


def test_seed_readings_train_one_classifier_per_seed_on_the_same_trees(tmp_path, monkeypatch):
    from helpers import tiny_llama

    from spectree.replay.logbook import LogConfig, notebook_logbook
    from spectree.strategies.c2t import ClassifierTraining

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    cfg = LogConfig(max_new_tokens=6, K=3, d_max=3, beam=4, b_env=1, d_env=1)
    notebook_logbook("mtbench:2", cfg, models=(tiny_llama(seed=0, layers=2), tiny_llama(seed=1, layers=1), Chat()))
    readings = surfaces.seed_readings(cfg, "mtbench:2", [0, 1, 2], surfaces.random_points(50),
                                      ClassifierTraining(epochs=2, patience=0), grid=6)
    assert readings.seed.tolist() == [0, 1, 2] and readings.classifier.nunique() == 3  # a classifier per seed
    assert set(surfaces.READINGS) <= set(readings.columns) and readings[list(surfaces.READINGS)].notna().all().all()
    assert readings.p_dominance.nunique() == 3  # the seeds train different weights
    cards = [json.loads((tmp_path / "data/c2t" / f"{c}.json").read_text()) for c in readings.classifier]
    assert {tuple(c["prompts"]) for c in cards} == {("mtbench/81",)}  # the same trees: the logbook's first half
    assert [c["training"]["seed"] for c in cards] == [0, 1, 2]
