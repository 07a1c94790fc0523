import numpy as np
import pytest
import torch
from helpers import PARENTS, make_tree

from spectree.core.errors import SpectreeError
from spectree.core.treeattn import tree_allowed


def test_ancestor_mask_marks_exactly_self_and_ancestors():
    mask = make_tree(PARENTS).ancestor_mask()
    expected = {0: {0}, 1: {0, 1}, 2: {0, 2}, 3: {0, 1, 3}, 4: {0, 1, 4}, 5: {0, 2, 5}, 6: {0, 1, 3, 6}}
    for i, anc in expected.items():
        assert set(mask[i].nonzero().flatten().tolist()) == anc


def test_positions_are_committed_length_minus_one_plus_depth():
    tree = make_tree(PARENTS, prefix_len=10)
    assert tree.position_ids().tolist() == [9, 10, 10, 11, 11, 11, 12]


def test_dfs_order_visits_subtrees_contiguously():
    assert make_tree(PARENTS).dfs_order().tolist() == [0, 1, 3, 6, 4, 2, 5]


def test_paths_and_leaves():
    tree = make_tree(PARENTS)
    assert tree.path_to(6) == [0, 1, 3, 6]
    assert tree.leaves().tolist() == [4, 5, 6]


def test_subtree_reindexes_parents_and_keeps_features():
    tree = make_tree(PARENTS)
    keep = torch.tensor([1, 1, 0, 1, 0, 0, 1], dtype=torch.bool)
    sub = tree.subtree(keep)
    assert sub.tokens.tolist() == [100, 101, 103, 106]
    assert sub.parents.tolist() == [-1, 0, 1, 2]
    assert sub.joint.tolist() == pytest.approx([1, 0.5, 0.25, 0.125])


def test_subtree_rejects_a_node_without_its_parent():
    keep = torch.tensor([1, 0, 0, 1, 0, 0, 0], dtype=torch.bool)
    with pytest.raises(SpectreeError, match="root-connected"):
        make_tree(PARENTS).subtree(keep)


def test_tree_allowed_sees_prefix_and_fed_ancestors_only():
    tree = make_tree(PARENTS)
    slots = np.array([-1, 5, 6, 7, 8, 9, 10])  # root in the prefix (5 slots); nodes fed after it
    allowed = tree_allowed(tree.parents.numpy(), np.array([6]), slots, prefix_len=5, cache_len=11)
    assert allowed[0].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 7, 10]
