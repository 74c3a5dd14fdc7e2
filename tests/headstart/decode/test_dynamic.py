"""Dynamic trees (decode/dynamic.py): growth, reranking, trees from parent pointers, drafter masks, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from headstart.decode.dynamic import (
    DynamicTreeSpec,
    frontier_attention,
    grow_tree,
    select_dynamic_tree,
    tree_from_parents,
)
from headstart.decode.tree import TreeError, tree_from_paths


def test_tree_from_parents_matches_tree_from_paths():
    paths = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
    by_paths = tree_from_paths(paths)
    parents = [0, 0, 1, 1, 2, 3]  # the same nodes, in the same (depth, path) order
    by_parents = tree_from_parents(parents)
    assert by_parents.paths == by_paths.paths
    for name in ("depth", "parent", "choice", "visible"):
        assert torch.equal(getattr(by_parents, name), getattr(by_paths, name)), name
    assert {tuple(r) for r in by_parents.retrieve.tolist()} == {tuple(r) for r in by_paths.retrieve.tolist()}


def test_tree_from_parents_rejects_bad_parents():
    with pytest.raises(TreeError, match="before its child"):
        tree_from_parents([0, 2])
    with pytest.raises(TreeError, match="at least one"):
        tree_from_parents([])


@pytest.mark.parametrize("name", ["depth", "top_k", "total_tokens"])
def test_a_dynamic_budget_below_one_is_refused(name):
    with pytest.raises(TreeError, match=f"{name} must be at least 1"):
        DynamicTreeSpec(**{name: 0})


def test_select_dynamic_tree_keeps_best_scores_closed_under_ancestors():
    # candidates: 0,1 children of the root; 2,3 children of 0; 4 child of 2
    parents = torch.tensor([-1, -1, 0, 0, 2])
    scores = torch.tensor([-0.1, -2.0, -0.3, -3.0, -0.5])
    tokens = torch.tensor([10, 11, 12, 13, 14])
    kept, tree, kept_scores = select_dynamic_tree(parents, scores, tokens, total_tokens=3)
    assert kept.tolist() == [10, 12, 14] and kept_scores.tolist() == pytest.approx([-0.1, -0.3, -0.5])
    assert tree.parent.tolist() == [-1, 0, 1, 2]
    assert tree.depth.tolist() == [0, 1, 2, 3]
    # A tie at the cut keeps the shallower node, and the set stays closed under ancestors.
    kept, tree, _ = select_dynamic_tree(torch.tensor([-1, 0]), torch.tensor([-1.0, -1.0]), torch.tensor([5, 6]), 1)
    assert kept.tolist() == [5]


def test_grow_tree_by_hand():
    """top_k = 2, depth 3, a draft vocabulary of 4 tokens mapped to target ids 10..13."""
    log = math.log
    root = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()  # depth 1: drafter tokens 0 and 1
    layers = [
        torch.tensor([[0.1, 0.2, 0.6, 0.1], [0.7, 0.05, 0.15, 0.1]]).log(),  # children of candidates 0 and 1
        torch.tensor([[0.8, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.8]]).log(),  # children of the frontier
    ]
    fed = []

    def expand(frontier, parents, tokens, depths):
        fed.append((list(frontier), list(tokens), list(depths)))
        return layers[len(fed) - 1]

    parents, scores, tokens, depths = grow_tree(root, DynamicTreeSpec(depth=3, top_k=2), expand, torch.arange(10, 14))
    # Depth 2: each of 0, 1 gets its two best children; values .5*.6=.3, .5*.2=.1, .3*.7=.21, .3*.15=.045.
    assert fed[0] == ([0, 1], [10, 11], [1, 1])
    # Depth 3 expands the two best of the newest layer: candidate 2 (.3), then candidate 4 (.21).
    assert fed[1][0] == [2, 4]
    assert tokens == [10, 11, 12, 11, 10, 12, 10, 11, 13, 12]
    assert parents == [-1, -1, 0, 0, 1, 1, 2, 2, 4, 4]
    assert depths == [1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    expected = [0.5, 0.3, 0.3, 0.1, 0.21, 0.045, 0.3 * 0.8, 0.3 * 0.1, 0.21 * 0.8, 0.21 * 0.1]
    assert scores == pytest.approx([log(v) for v in expected], abs=1e-5)


def test_grow_tree_not_grown_below_a_floor():
    """The by-hand tree with a floor: frontier nodes below it are not fed (at 0.25 the second layer feeds
    candidate 2 (0.3) and not candidate 4 (0.21)); where no frontier node reaches it the growth stops, a forward
    saved (at 0.31 after the first layer, at 0.6 before it); the candidates at or above the floor are the
    unfloored tree's, in its order."""
    root = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    layers = [
        torch.tensor([[0.1, 0.2, 0.6, 0.1], [0.7, 0.05, 0.15, 0.1]]).log(),
        torch.tensor([[0.8, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.8]]).log(),
    ]

    def grown(floor: float):
        fed = []

        def expand(frontier, parents, tokens, depths):
            fed.append(list(frontier))
            return layers[len(fed) - 1][: len(frontier)]

        parents, scores, tokens, _ = grow_tree(root, DynamicTreeSpec(depth=3, top_k=2), expand, torch.arange(10, 14),
                                               floor=math.log(floor))
        paths = {}
        for i, (par, tok) in enumerate(zip(parents, tokens)):
            paths[i] = [*paths[par], tok] if par >= 0 else [tok]
        return fed, [(paths[i], s) for i, s in enumerate(scores)]

    _, whole = grown(1e-9)
    for floor, forwards in ((0.25, 2), (0.31, 1), (0.6, 0)):
        fed, kept = grown(floor)
        assert len(fed) == forwards, floor
        assert [c for c in kept if c[1] >= math.log(floor)] == [c for c in whole if c[1] >= math.log(floor)], floor
    assert grown(0.25)[0] == [[0, 1], [2]] and grown(0.31)[0] == [[0]]


def test_frontier_attention_by_hand():
    """Two committed entries, candidates 0..3 fed at cache entries 2..5; candidate 4 (child of 2, grandchild of 0)
    is fed at entry 6: it sees the prefix, its ancestors' entries (2 for candidate 0, 4 for candidate 2) and itself."""
    parents = [-1, -1, 0, 1, 2]
    entry = {0: 2, 1: 3, 2: 4, 3: 5}
    allowed = frontier_attention([4], parents, entry, prefix=2, base=6)
    assert allowed.int().tolist() == [[1, 1, 1, 0, 1, 0, 1]]
    allowed = frontier_attention([2, 3], parents, {0: 2, 1: 3}, prefix=2, base=4)
    assert allowed.int().tolist() == [[1, 1, 1, 0, 1, 0], [1, 1, 0, 1, 0, 1]]
