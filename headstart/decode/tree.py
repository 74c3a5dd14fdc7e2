"""Static draft trees: pure functions from Medusa-style paths to the index tensors of verification.

A tree is given as a list of paths; a path (c1, c2, ..., cd) is the node reached by taking the
c1-th best proposal at depth 1, then the c2-th best at depth 2, and so on (Medusa's format).
The verification input is the root (the last token the target produced, not yet in the cache)
followed by the N nodes in (depth, path) order, so index 0 is the root and nodes are 1..N.
`Tree` also carries the trees a dynamic head grows (`decode/dynamic.py`); what a head receives
and returns is in `decode/contract.py`.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from headstart.errors import HeadstartError


class TreeError(HeadstartError):
    """A tree whose paths are malformed."""


@dataclass(frozen=True)
class Tree:
    """Index tensors for one tree of N nodes below the root (N + 1 verification inputs)."""

    paths: tuple[tuple[int, ...], ...]  # N paths, sorted by (depth, path)
    depth: torch.Tensor  # (N + 1,) 0 for the root
    parent: torch.Tensor  # (N + 1,) index of the parent input, -1 for the root
    choice: torch.Tensor  # (N + 1,) rank of the node among its depth's proposals (root: 0)
    visible: torch.Tensor  # (N + 1, N + 1) bool: input i attends input j (ancestors and itself)
    retrieve: torch.Tensor  # (P, max_depth + 1) root-to-leaf index paths, padded with -1

    @property
    def size(self) -> int:
        """Draft nodes, the root excluded."""
        return len(self.paths)

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    def topk_per_depth(self) -> list[int]:
        """How many ranked proposals each depth 1..max_depth needs."""
        need = [0] * self.max_depth
        for p in self.paths:
            need[len(p) - 1] = max(need[len(p) - 1], p[-1] + 1)
        return need


def path_scores(node_probs: torch.Tensor, tree: Tree) -> torch.Tensor:
    """node_probs (B, N): each node's own draft probability. Returns (B, N) the product of the
    probabilities along each node's path from the root (its ancestors and itself: `tree.visible`)."""
    on_path = tree.visible[1:, 1:].to(node_probs.device)  # (N, N): node i's path holds node j
    return torch.where(on_path, node_probs[:, None, :], 1.0).prod(-1)


def tree_from_paths(paths) -> Tree:
    """Build a Tree from paths; every prefix of a path must itself be a path."""
    try:
        norm = [tuple(int(c) for c in p) for p in paths]
    except (TypeError, ValueError):
        raise TreeError(f"a tree is a list of paths (lists of non-negative ints), got {paths!r}") from None
    if not norm:
        raise TreeError("a tree needs at least one path")
    for p, raw in zip(norm, paths):
        if not p or any(c < 0 for c in p) or any(isinstance(c, bool) or float(c) != int(c) for c in raw):
            raise TreeError(f"path {list(raw)!r}: a path is a non-empty list of non-negative integers")
    if len(set(norm)) != len(norm):
        dup = next(p for p in norm if norm.count(p) > 1)
        raise TreeError(f"path {list(dup)} appears twice")
    known = set(norm)
    for p in norm:
        if len(p) > 1 and p[:-1] not in known:
            raise TreeError(f"path {list(p)} has no parent: add {list(p[:-1])} to the tree")
    ordered = tuple(sorted(norm, key=lambda p: (len(p), p)))
    index = {p: i + 1 for i, p in enumerate(ordered)}
    n = len(ordered) + 1
    depth = torch.zeros(n, dtype=torch.long)
    parent = torch.full((n,), -1, dtype=torch.long)
    choice = torch.zeros(n, dtype=torch.long)
    visible = torch.eye(n, dtype=torch.bool)
    visible[:, 0] = True
    for p, i in index.items():
        depth[i], choice[i] = len(p), p[-1]
        parent[i] = index.get(p[:-1], 0)
        for k in range(1, len(p)):
            visible[i, index[p[:k]]] = True
    leaves = [p for p in ordered if not any(q[: len(p)] == p and len(q) > len(p) for q in ordered)]
    max_depth = max(len(p) for p in ordered)
    retrieve = torch.full((len(leaves), max_depth + 1), -1, dtype=torch.long)
    for r, leaf in enumerate(leaves):
        retrieve[r, 0] = 0
        for k in range(1, len(leaf) + 1):
            retrieve[r, k] = index[leaf[:k]]
    return Tree(ordered, depth, parent, choice, visible, retrieve)


@dataclass(frozen=True)
class StaticTreeSpec:
    """The static tree a head (Medusa) decodes with unless told otherwise (`head.default_tree`): its
    paths, checked and sorted by (depth, path) as `Tree.paths`, whatever form they were given in.
    config.json saves it as head.tree, a list of paths; a dynamic head's is a `DynamicTreeSpec`."""

    paths: tuple[tuple[int, ...], ...]

    def __post_init__(self):
        object.__setattr__(self, "paths", tree_from_paths(self.paths).paths)  # a TreeError names a bad path

    @property
    def size(self) -> int:
        """Draft nodes, the root excluded."""
        return len(self.paths)

    def to_json(self) -> list[list[int]]:
        return [list(p) for p in self.paths]


@dataclass(frozen=True)
class HeldOutAccuracy:
    """A static head's accuracy measured on held-out examples after training (`head.held_out`):
    topk[d][c] is the share of held-out assistant tokens whose c-th ranked proposal at depth d + 1
    (Medusa: head d) was the token. 'auto' trees are built from it (`best_tree_paths`); config.json
    saves it as head.accuracy, a list of lists."""

    topk: tuple[tuple[float, ...], ...]

    def __post_init__(self):
        rows = tuple(tuple(float(x) for x in row) for row in self.topk)
        if not rows or not all(rows) or not all(0.0 <= x <= 1.0 for row in rows for x in row):
            raise TreeError(
                f"held-out accuracy: expected one non-empty list of shares in [0, 1] per depth, got {self.topk!r}"
            )
        object.__setattr__(self, "topk", rows)

    def to_json(self) -> list[list[float]]:
        return [list(row) for row in self.topk]


def best_tree_paths(accuracy: list[list[float]], size: int) -> list[tuple[int, ...]]:
    """The tree of `size` nodes that maximises expected accepted length, best-first (Medusa §3.3).

    accuracy[d][c]: probability that the c-th ranked proposal at depth d+1 is the target's token.
    Assuming depths independent, a node's value is the product of its path's accuracies, and the
    expected number of accepted drafts is the sum of the values of all nodes. Values only shrink
    along a path, so adding the best frontier node each time yields the optimal tree.
    """
    if size < 1:
        raise TreeError(f"tree size must be at least 1, got {size}")
    frontier = [(-accuracy[0][c], (c,)) for c in range(len(accuracy[0]))]
    heapq.heapify(frontier)
    chosen: list[tuple[int, ...]] = []
    while frontier and len(chosen) < size:
        neg, path = heapq.heappop(frontier)
        chosen.append(path)
        if len(path) < len(accuracy):
            for c in range(len(accuracy[len(path)])):
                heapq.heappush(frontier, (neg * accuracy[len(path)][c], path + (c,)))
    return sorted(chosen, key=lambda p: (len(p), p))


def expected_accept_length(accuracy: list[list[float]], paths) -> float:
    """τ the tree would reach under the independence assumption (bonus token included)."""
    total = 1.0
    for p in paths:
        value = 1.0
        for d, c in enumerate(p):
            value *= accuracy[d][c]
        total += value
    return total


# Per-depth top-k accuracies typical of Medusa heads (the Medusa paper's Vicuna-7B figure shape,
# rounded); used only to shape the shipped default trees. `tree=auto` uses the head's own numbers.
_TYPICAL_ACCURACY = [
    [0.60, 0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.01, 0.008, 0.006],
    [0.35, 0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.01, 0.008, 0.006],
    [0.25, 0.08, 0.04, 0.03, 0.02, 0.015, 0.01, 0.01, 0.008, 0.006],
    [0.20, 0.07, 0.04, 0.02, 0.02, 0.015, 0.01, 0.01, 0.008, 0.006],
    [0.15, 0.06, 0.03, 0.02, 0.01, 0.01, 0.01, 0.01, 0.008, 0.006],
]


def shipped_trees() -> dict[str, list[tuple[int, ...]]]:
    """The named trees `decode.tree` accepts: chains, and best-first trees of 4 to 64 nodes."""
    trees: dict[str, list[tuple[int, ...]]] = {}
    for k in (1, 2, 3, 4, 5):
        trees[f"chain{k}"] = [(0,) * d for d in range(1, k + 1)]
    for n in (4, 8, 16, 32, 64):
        trees[f"tree{n}"] = best_tree_paths(_TYPICAL_ACCURACY, n)
    return trees


def load_tree(spec, accuracy: list[list[float]] | None = None, size: int = 16, max_depth: int | None = None) -> Tree:
    """A Tree from a shipped name, a JSON file of paths, a list of paths, a StaticTreeSpec, or 'auto'.

    'auto' builds the best tree of `size` nodes from `accuracy` (a head's measured per-depth top-k
    accuracy); without it, the shipped tree closest to `size`.
    """
    if isinstance(spec, Tree):
        return spec
    if isinstance(spec, StaticTreeSpec):
        return tree_from_paths(spec.paths)
    if isinstance(spec, (list, tuple)):
        return tree_from_paths(spec)
    named = shipped_trees()
    if spec == "auto":
        if accuracy:
            acc = accuracy[:max_depth] if max_depth else accuracy
            return tree_from_paths(best_tree_paths(acc, size))
        nearest = min((n for n in named if n.startswith("tree")), key=lambda n: abs(int(n[4:]) - size))
        return tree_from_paths([p for p in named[nearest] if max_depth is None or len(p) <= max_depth])
    if spec in named:
        return tree_from_paths(named[spec])
    path = Path(spec)
    if path.is_file():
        try:
            return tree_from_paths(json.loads(path.read_text()))
        except json.JSONDecodeError as e:
            raise TreeError(f"{path}: not valid JSON: {e}") from None
    raise TreeError(f"unknown tree {spec!r}: use one of {', '.join(named)}, 'auto', or a JSON file of paths")
