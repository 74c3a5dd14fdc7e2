"""Static draft trees: pure functions from Medusa-style paths to the index tensors of verification.

A tree is given as a list of paths; a path (c1, c2, ..., cd) is the node reached by taking the
c1-th best proposal at depth 1, then the c2-th best at depth 2, and so on (Medusa's format).
The verification input is the root (the last token the target produced, not yet in the cache)
followed by the N nodes in (depth, path) order, so index 0 is the root and nodes are 1..N.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from headstart.errors import HeadstartError


class TreeError(HeadstartError):
    """A tree whose paths are malformed."""


@dataclass(frozen=True)
class Tree:
    """Index tensors for one static tree of N nodes below the root (N + 1 verification inputs)."""

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
    """A Tree from a shipped name, a JSON file of paths, a list of paths, or 'auto'.

    'auto' builds the best tree of `size` nodes from `accuracy` (a head's measured per-depth top-k
    accuracy); without it, the shipped tree closest to `size`.
    """
    if isinstance(spec, Tree):
        return spec
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


def tree_from_parents(parents, choice=None) -> Tree:
    """Build a Tree from parent pointers, keeping the nodes in the order given (dynamic trees).

    parents[i] is the verification index (0 = root, j = node j) of the parent of node i + 1, and
    must be < i + 1 (topological order). choice[i] is node i + 1's rank among its siblings (default:
    order of appearance). Paths are the choice sequences, so `paths` reads like a static tree's.
    """
    parents = [int(p) for p in (parents.tolist() if isinstance(parents, torch.Tensor) else parents)]
    if not parents:
        raise TreeError("a tree needs at least one node")
    n = len(parents) + 1
    for i, p in enumerate(parents):
        if not 0 <= p <= i:
            raise TreeError(f"node {i + 1} has parent {p}: a parent must come before its child (0..{i})")
    if choice is None:
        seen: dict[int, int] = {}
        choice = []
        for p in parents:
            choice.append(seen.get(p, 0))
            seen[p] = choice[-1] + 1
    else:
        choice = [int(c) for c in (choice.tolist() if isinstance(choice, torch.Tensor) else choice)]
    parent_t = torch.tensor([-1, *parents], dtype=torch.long)
    depth = [0] * n
    paths: list[tuple[int, ...]] = [()] * n
    visible = torch.eye(n, dtype=torch.bool)
    visible[:, 0] = True
    has_child = [False] * n
    for i, p in enumerate(parents, start=1):
        depth[i] = depth[p] + 1
        paths[i] = paths[p] + (choice[i - 1],)
        visible[i] |= visible[p]
        has_child[p] = True
    leaves = [i for i in range(1, n) if not has_child[i]]
    max_depth = max(depth)
    retrieve = torch.full((len(leaves), max_depth + 1), -1, dtype=torch.long)
    for r, leaf in enumerate(leaves):
        chain = [leaf]
        while chain[-1] != 0:
            chain.append(parents[chain[-1] - 1])
        retrieve[r, : len(chain)] = torch.tensor(chain[::-1])
    return Tree(
        tuple(paths[1:]),
        torch.tensor(depth, dtype=torch.long),
        parent_t,
        torch.tensor([0, *choice], dtype=torch.long),
        visible,
        retrieve,
    )


def select_dynamic_tree(
    parents: torch.Tensor, scores: torch.Tensor, tokens: torch.Tensor, total_tokens: int
) -> tuple[torch.Tensor, Tree]:
    """EAGLE-2's reranking: keep the `total_tokens` candidates of highest cumulative score.

    Candidates are the nodes a drafter grew, in topological order: parents (M,) index of each
    candidate's parent among the candidates (-1 for a child of the root), scores (M,) cumulative
    log-probabilities (a child never scores above its parent), tokens (M,). The kept set is closed
    under ancestors (ties favour the shallower, earlier node) and keeps the drafter's order.
    Returns the kept tokens (n,) and their Tree.
    """
    m = parents.numel()
    if m == 0:
        raise TreeError("the drafter proposed no candidates")
    k = min(int(total_tokens), m)
    order = torch.argsort(scores.float(), descending=True, stable=True)
    keep = torch.zeros(m, dtype=torch.bool)
    keep[order[:k]] = True
    par = parents.tolist()
    # Close under ancestors: a parent whose score ties with the cut may have been left out.
    for i in order[:k].tolist():
        j = par[i]
        while j >= 0 and not keep[j]:
            keep[j] = True
            j = par[j]
    kept = keep.nonzero().flatten()
    new_index = torch.full((m,), 0, dtype=torch.long)
    new_index[kept] = torch.arange(1, kept.numel() + 1)
    kept_par = parents[kept]
    tree_parents = torch.where(kept_par >= 0, new_index[kept_par.clamp(min=0)], torch.zeros_like(kept_par))
    return tokens[kept], tree_from_parents(tree_parents)


def grow_tree(root_logp: torch.Tensor, spec: "DynamicTreeSpec", expand, token_ids: torch.Tensor | None = None):
    """EAGLE-2's tree growth (Li et al., 2024): expand the best frontier by cumulative log-probability.

    root_logp (V',) is the drafter's log-distribution after the root. Depth 1 takes its top_k
    tokens; each later step feeds the top_k candidates of the newest layer (by cumulative score)
    to `expand(frontier, parents, tokens, depths) -> (len(frontier), V')` child log-probabilities,
    and adds top_k children of each. token_ids (V',) maps drafter indices to target ids (a draft
    vocabulary); `tokens` passed to `expand` are target ids. Returns candidate lists
    (parents, scores, tokens, depths), parents as candidate indices (-1: a child of the root),
    ready for `select_dynamic_tree`.
    """
    k = spec.top_k

    def ids(index: torch.Tensor) -> list[int]:
        return (index if token_ids is None else token_ids[index.to(token_ids.device)]).tolist()

    top = root_logp.float().topk(min(k, root_logp.numel()))
    tokens, scores = ids(top.indices), top.values.tolist()
    parents, depths = [-1] * len(tokens), [1] * len(tokens)
    frontier = list(range(len(tokens)))
    for _ in range(spec.depth - 1):
        child_logp = expand(frontier, parents, tokens, depths).float()  # (n, V')
        best = child_logp.topk(min(k, child_logp.shape[-1]), dim=-1)
        new = []
        for row, c in enumerate(frontier):
            for t, s in zip(ids(best.indices[row]), best.values[row].tolist()):
                tokens.append(t)
                scores.append(scores[c] + s)
                parents.append(c)
                depths.append(depths[c] + 1)
                new.append(len(tokens) - 1)
        frontier = sorted(new, key=lambda i: -scores[i])[:k]
    return parents, scores, tokens, depths


def frontier_attention(frontier: list[int], parents: list[int], entry: dict[int, int], prefix: int, base: int, device=None) -> torch.Tensor:
    """(len(frontier), base + len(frontier)) bool: what each newly fed frontier node may attend in a drafter's cache.

    The cache holds `prefix` committed entries, then the tree entries fed so far (`entry[c]`: the
    cache index of candidate c), and the frontier is appended at `base`. A node sees the prefix,
    its ancestors' entries and itself.
    """
    m = len(frontier)
    allowed = torch.zeros(m, base + m, dtype=torch.bool, device=device)
    allowed[:, :prefix] = True
    for row, c in enumerate(frontier):
        j = parents[c]
        while j >= 0:
            allowed[row, entry[j]] = True
            j = parents[j]
        allowed[row, base + row] = True
    return allowed


@dataclass(frozen=True)
class DynamicTreeSpec:
    """The budget a dynamic drafter (EAGLE-2) grows its tree within."""

    depth: int = 5  # draft steps from the root
    top_k: int = 8  # children per expanded node, and nodes expanded per step
    total_tokens: int = 32  # nodes kept after reranking (the verification width minus the root)

    def __post_init__(self):
        for name in ("depth", "top_k", "total_tokens"):
            if int(getattr(self, name)) < 1:
                raise TreeError(f"dynamic tree {name} must be at least 1, got {getattr(self, name)}")


@dataclass
class DraftState:
    """What the decoding loop tells a head before each proposal.

    A head that drafts for the whole batch (Medusa) gets hidden and root for all unfinished rows
    (B rows); a head that drafts row by row gets one row (B = 1) with features and committed.
    features/committed cover the target positions committed since the previous call: the whole
    prompt at prefill (start == 0), then the accepted path [root, drafts...] of each step.
    """

    hidden: torch.Tensor  # (B, D) target's last hidden state at the last committed position
    root: torch.Tensor  # (B,) the token the target chose next (the root of the next tree)
    features: torch.Tensor | None = None  # (B, n, F) features at the n newly committed positions
    committed: torch.Tensor | None = None  # (B, n) token ids at those positions
    start: int = 0  # absolute position of committed[:, 0]; 0 means a new sequence

    def next_tokens(self) -> torch.Tensor:
        """(B, n) the token after each committed position: committed[:, 1:] then the root."""
        return torch.cat([self.committed[:, 1:], self.root[:, None]], dim=1)


@dataclass
class Proposal:
    """A head's draft: one token per tree node (nodes 1..N, the root excluded).

    draft_probs, when given, is the distribution (B, N, V) each node's token was *sampled* from
    (its parent's draft distribution); without it, drafts are deterministic choices (q = 1 on the
    token), which verification treats exactly.
    """

    tokens: torch.Tensor  # (B, N)
    tree: Tree
    draft_probs: torch.Tensor | None = None


@runtime_checkable
class DraftHead(Protocol):
    """What the decoding loop needs of a head (structural: heads do not inherit from it).

    Optional attributes: `dynamic` (True: the head grows its own tree within a DynamicTreeSpec
    and returns it in the Proposal), `feature_layers` (target layers whose outputs, concatenated,
    form DraftState.features; empty: the final hidden state), `needs_features` (fill features
    and committed at all; dynamic heads imply it), `drafter()` (a fresh drafting state for one
    sequence, an object with `propose`: the engine makes one per row of a batch).

    How a batch is drafted: with `drafter()`, one drafter per row; else a static head without
    `needs_features` drafts for all rows in one call (B rows in, tokens (B, N) out); else the
    engine drafts row by row through a shallow copy of the head per row.
    """

    kind: str

    def propose(self, state: DraftState, tree) -> Proposal:
        """Draft a token for every node of a static `tree`, or grow a tree within a DynamicTreeSpec."""
        ...
