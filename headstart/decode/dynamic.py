"""Dynamic draft trees (EAGLE-2, Li et al., 2024): the tree a drafter grows each step.

A dynamic head is not given a tree: within a `DynamicTreeSpec` it expands the best frontier by
cumulative log-probability (`grow_tree`), keeps the `total_tokens` best candidates
(`select_dynamic_tree`) and returns their `Tree` (built from parent pointers by
`tree_from_parents`) with its proposal. `frontier_attention` is the mask a drafter with its own
KV cache feeds each new frontier layer with. Static trees are in `decode/tree.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from headstart.decode.tree import Tree, TreeError


@dataclass(frozen=True)
class DynamicTreeSpec:
    """The budget a dynamic drafter (EAGLE-2) grows its tree within; also the tree a dynamic head decodes
    with unless told otherwise (`head.default_tree`; a static head's is a `tree.StaticTreeSpec`)."""

    depth: int = 5  # draft steps from the root
    top_k: int = 8  # children per expanded node, and nodes expanded per step
    total_tokens: int = 32  # nodes kept after reranking (the verification width minus the root)

    def __post_init__(self):
        for name in ("depth", "top_k", "total_tokens"):
            if int(getattr(self, name)) < 1:
                raise TreeError(f"dynamic tree {name} must be at least 1, got {getattr(self, name)}")

    def to_json(self) -> dict[str, int]:
        """{depth, top_k, total_tokens}: how config.json saves a head's dynamic tree (head.tree)."""
        return {"depth": self.depth, "top_k": self.top_k, "total_tokens": self.total_tokens}


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
    # Built as Python lists, one tensor per field at the end: a step's tree has a few dozen nodes at most,
    # where a tensor operation per node cost more than the lists (this runs at every decoding step).
    depth = [0] * n
    paths: list[tuple[int, ...]] = [()] * n
    ancestors: list[list[int]] = [[0]] + [[] for _ in range(1, n)]  # each node's path from the root, itself last
    has_child = [False] * n
    for i, p in enumerate(parents, start=1):
        depth[i] = depth[p] + 1
        paths[i] = paths[p] + (choice[i - 1],)
        ancestors[i] = [*ancestors[p], i]
        has_child[p] = True
    visible = torch.zeros(n, n, dtype=torch.bool)
    rows = [i for i in range(n) for _ in ancestors[i]]
    visible[rows, [j for chain in ancestors for j in chain]] = True
    leaves = [i for i in range(1, n) if not has_child[i]]
    max_depth = max(depth)
    retrieve = torch.tensor([ancestors[leaf] + [-1] * (max_depth - depth[leaf]) for leaf in leaves], dtype=torch.long)
    return Tree(
        tuple(paths[1:]),
        torch.tensor(depth, dtype=torch.long),
        torch.tensor([-1, *parents], dtype=torch.long),
        torch.tensor([0, *choice], dtype=torch.long),
        visible,
        retrieve,
    )


def select_dynamic_tree(
    parents: torch.Tensor, scores: torch.Tensor, tokens: torch.Tensor, total_tokens: int
) -> tuple[torch.Tensor, Tree, torch.Tensor]:
    """EAGLE-2's reranking: keep the `total_tokens` candidates of highest cumulative score.

    Candidates are the nodes a drafter grew, in topological order: parents (M,) index of each
    candidate's parent among the candidates (-1 for a child of the root), scores (M,) cumulative
    log-probabilities (a child never scores above its parent), tokens (M,). The kept set is closed
    under ancestors (ties favour the shallower, earlier node) and keeps the drafter's order.
    Returns the kept tokens (n,), their Tree and their scores (n,).
    """
    m = parents.numel()
    if m == 0:
        raise TreeError("the drafter proposed no candidates")
    par = parents.tolist()
    kept = kept_candidates(par, scores.float().tolist(), total_tokens)
    new_index = {c: n for n, c in enumerate(kept, start=1)}
    index = torch.tensor(kept, dtype=torch.long)
    return (tokens[index.to(tokens.device)], tree_from_parents([new_index[par[i]] if par[i] >= 0 else 0 for i in kept]),
            scores[index.to(scores.device)])


def kept_candidates(parents: list[int], scores: list[float], total_tokens: int) -> list[int]:
    """`select_dynamic_tree`'s choice on lists: the indices of the `total_tokens` candidates of highest
    score, closed under ancestors (ties favour the earlier candidate), in the drafter's order."""
    m = len(parents)
    order = sorted(range(m), key=lambda i: -scores[i])  # stable: ties keep the drafter's order
    keep = [False] * m
    for i in order[: int(total_tokens)]:
        keep[i] = True
    # Close under ancestors: a parent whose score ties with the cut may have been left out.
    for i in order[: int(total_tokens)]:
        j = parents[i]
        while j >= 0 and not keep[j]:
            keep[j] = True
            j = parents[j]
    return [i for i in range(m) if keep[i]]


def grow_tree(root_logp: torch.Tensor, spec: DynamicTreeSpec, expand, token_ids: torch.Tensor | None = None,
              floor: float = -math.inf):
    """EAGLE-2's tree growth (Li et al., 2024): expand the best frontier by cumulative log-probability.

    root_logp (V',) is the drafter's log-distribution after the root. Depth 1 takes its top_k
    tokens; each later step feeds the top_k candidates of the newest layer (by cumulative score)
    to `expand(frontier, parents, tokens, depths) -> (len(frontier), V')` child log-probabilities,
    and adds top_k children of each. token_ids (V',) maps drafter indices to target ids (a draft
    vocabulary); `tokens` passed to `expand` are target ids. Returns candidate lists
    (parents, scores, tokens, depths), parents as candidate indices (-1: a child of the root),
    ready for `select_dynamic_tree`.

    `floor`: a cumulative score below which no candidate can be used (a hybrid's shared budget already holds
    enough better paths). A child never scores above its parent, so frontier nodes below it are not
    expanded, and the growth stops (a forward saved) when none is left; the candidates at or above the
    floor are the same as without it, in the same order.
    """
    k = spec.top_k

    def ids(index: torch.Tensor) -> list[int]:
        return (index if token_ids is None else token_ids[index.to(token_ids.device)]).tolist()

    top = root_logp.float().topk(min(k, root_logp.numel()))
    tokens, scores = ids(top.indices), top.values.tolist()
    parents, depths = [-1] * len(tokens), [1] * len(tokens)
    frontier = list(range(len(tokens)))
    for _ in range(spec.depth - 1):
        frontier = [c for c in frontier if scores[c] >= floor]
        if not frontier:
            break
        child_logp = expand(frontier, parents, tokens, depths).float()  # (n, V')
        best = child_logp.topk(min(k, child_logp.shape[-1]), dim=-1)
        new = []
        for c, row_ids, row_logp in zip(frontier, ids(best.indices), best.values.tolist()):  # one conversion per layer
            for t, s in zip(row_ids, row_logp):
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
