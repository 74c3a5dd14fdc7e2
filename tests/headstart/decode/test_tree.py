import pytest
import torch

from headstart.decode.tree import (
    TreeError,
    best_tree_paths,
    expected_accept_length,
    load_tree,
    shipped_trees,
    tree_from_paths,
)
from headstart.decode.verify import TreeTensors, greedy_accept, greedy_accept_rows, stack_trees


def test_tree_from_paths_by_hand():
    t = tree_from_paths([(0, 0), (1,), (0,)])  # order of the input does not matter
    assert t.paths == ((0,), (1,), (0, 0))
    assert t.depth.tolist() == [0, 1, 1, 2]
    assert t.parent.tolist() == [-1, 0, 0, 1]
    assert t.choice.tolist() == [0, 0, 1, 0]
    assert t.visible.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert t.retrieve.tolist() == [[0, 2, -1], [0, 1, 3]]
    assert t.topk_per_depth() == [2, 1]


@pytest.mark.parametrize(
    "paths, message",
    [
        ([], "at least one path"),
        ([(0,), (1, 0)], "path \\[1, 0\\] has no parent"),
        ([(0,), (0,)], "appears twice"),
        ([(0,), ()], "non-empty list"),
        ([(0,), (-1,)], "non-negative"),
        ([(0,), (0.5,)], "non-negative integers"),
        ("nonsense", "unknown tree"),
    ],
)
def test_malformed_trees_are_clear_errors(paths, message):
    with pytest.raises(TreeError, match=message):
        load_tree(paths) if isinstance(paths, str) else tree_from_paths(paths)


def test_best_tree_by_hand():
    acc = [[0.6, 0.2], [0.5, 0.1]]
    # Node values: (0,) .6, (1,) .2, (0,0) .3, (0,1) .06, (1,0) .1, (1,1) .02
    assert best_tree_paths(acc, 1) == [(0,)]
    assert best_tree_paths(acc, 3) == [(0,), (1,), (0, 0)]
    assert best_tree_paths(acc, 4) == [(0,), (1,), (0, 0), (1, 0)]
    assert expected_accept_length(acc, [(0,), (1,), (0, 0)]) == pytest.approx(2.1)


def test_shipped_trees_are_valid():
    trees = shipped_trees()
    assert {"chain1", "chain3", "tree4", "tree8", "tree16", "tree32", "tree64"} <= set(trees)
    for paths in trees.values():
        assert tree_from_paths(paths).size == len(paths)
    assert len(trees["tree64"]) == 64 and len(trees["tree4"]) == 4


def test_greedy_accept_by_hand():
    t = tree_from_paths([(0,), (1,), (0, 0), (0, 1)])  # inputs: root, a, b, aa, ab
    tokens = torch.tensor([10, 11, 12, 13, 14])
    # Target after root wants 11 (= node a); after a wants 14 (= node ab); after ab wants 99.
    predicted = torch.tensor([11, 14, 0, 0, 99])
    accepted, kept = greedy_accept(tokens, predicted, t.retrieve)
    assert accepted == 2 and kept.tolist() == [0, 1, 4]
    predicted = torch.tensor([50, 14, 0, 0, 99])  # nothing matches
    accepted, kept = greedy_accept(tokens, predicted, t.retrieve)
    assert accepted == 0 and kept.tolist() == [0]


def test_stacked_trees_pad_smaller_ones_with_nodes_never_accepted():
    small = TreeTensors.of(tree_from_paths([(0,), (0, 0)]), "cpu")  # root, a, aa
    large = TreeTensors.of(tree_from_paths([(0,), (1,), (0, 0), (0, 1)]), "cpu")
    visible, depths, retrieve = stack_trees([small, large], width=5)
    assert torch.equal(visible[0, :3, :3], small.visible) and torch.equal(visible[1], large.visible)
    assert visible[0, 3:].int().tolist() == [[0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]  # padding sees only itself
    assert not visible[0, :, 3:].any(dim=1)[:3].any()  # and no real node sees it
    assert depths.tolist() == [[0, 1, 2, 1, 1], [0, 1, 1, 2, 2]]
    assert retrieve[0].tolist() == [[0, 1, 2], [-1, -1, -1], [-1, -1, -1]]  # (P, L) of the larger tree
    # Padding nodes carry the token the target wants after the root, yet lie on no path.
    tokens = torch.tensor([[9, 1, 2, 7, 7], [9, 7, 8, 7, 7]])
    predicted = torch.full((2, 5), 7)
    accepted, paths = greedy_accept_rows(tokens, predicted, retrieve)
    assert accepted.tolist() == [0, 2] and paths[1, :3].tolist() == [0, 1, 3]
    shared = stack_trees([large, large], width=5)  # one tree for every row: expanded, not copied
    assert shared[0].shape == (2, 5, 5) and shared[0].stride(0) == 0


def test_best_tree_for_cost_by_hand():
    from headstart.decode.tune import best_tree_for_cost

    acc = [[0.6, 0.2], [0.5, 0.1]]
    # Plain step 1.0 s. Trees of 1 node (2 inputs) cost 1.0 s, 3 nodes (4 inputs) 2.0 s.
    paths, table = best_tree_for_cost(acc, {1: 1.0, 2: 1.0, 4: 2.0})
    assert table[1] == {"expected_tau": 1.6, "step_cost": 1.0, "expected_speedup": 1.6}
    assert table[3]["expected_tau"] == 2.1 and table[3]["expected_speedup"] == 1.05
    assert paths == [(0,)]
    paths, _ = best_tree_for_cost(acc, {1: 1.0, 2: 1.0, 4: 1.1})
    assert paths == [(0,), (1,), (0, 0)]
