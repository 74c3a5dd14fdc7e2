"""Dynamic draft trees (EAGLE-2, Li et al., 2024): the tree a drafter grows each step.

A dynamic head is not given a tree: within a `DynamicTreeSpec` it expands the best frontier by
cumulative log-probability (`grow_tree`), keeps the `total_tokens` best candidates
(`select_dynamic_tree`) and returns their `Tree` (built from parent pointers by
`tree_from_parents`) with its proposal. `frontier_attention` is the mask a drafter with its own
KV cache feeds each new frontier layer with. Static trees are in `decode/tree.py`.
"""

from __future__ import annotations

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
    return tokens[kept], tree_from_parents(tree_parents), scores[kept]


def grow_tree(root_logp: torch.Tensor, spec: DynamicTreeSpec, expand, token_ids: torch.Tensor | None = None):
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
