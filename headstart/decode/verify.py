"""Verification of a drafted tree: pure functions over the target's predictions.

- `greedy_accept`: temperature 0; the longest path the target's argmax agrees with.
- `sample_accept`: temperature > 0; recursive rejection sampling over siblings, exact: the kept
  tokens and the bonus token follow the target's own (warped) distribution.
- `typical_accept`: Medusa's typical acceptance, LOSSY and opt-in: a draft is kept when the target
  gives it enough probability, so the output no longer follows the target's distribution.
- `acceptance_length`: τ, the measure of all three (every report computes it here).
- `TreeTensors`, `stack_trees`: a tree's index tensors on the target's device, and the rows of a
  batch stacked (their trees padded to one width) for one verification forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from headstart.decode.tree import Tree


def acceptance_length(accepted_per_step: list[int]) -> float:
    """τ: the mean of (a + 1) over verification steps that accepted a drafts each, i.e. tokens per
    target forward after prefill, the bonus token counted; plain decoding (no step) scores 1.0."""
    steps = len(accepted_per_step)
    return (sum(accepted_per_step) + steps) / steps if steps else 1.0


def greedy_accept(tokens: torch.Tensor, predicted: torch.Tensor, retrieve: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Find the root-to-leaf path whose drafts the target agrees with longest.

    tokens (N + 1,): verification inputs (root first); predicted (N + 1,): the target's greedy
    next token after each input; retrieve (P, L): root-to-leaf index paths padded with -1.
    Returns (accepted drafts a, indices of the a + 1 kept inputs, root first). The target's next
    token after the kept path, the bonus, is predicted[kept[-1]].
    """
    accepted, paths = greedy_accept_rows(tokens[None], predicted[None], retrieve[None])
    a = int(accepted[0])
    return a, paths[0, : a + 1]


def greedy_accept_rows(
    tokens: torch.Tensor, predicted: torch.Tensor, retrieve: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`greedy_accept` for every row of a batch at once, without leaving the device.

    tokens, predicted (B, N + 1); retrieve (B, P, L), each row's paths padded with -1 (a padding
    path is all -1 after its root). Returns accepted (B,) and paths (B, L): row b keeps the inputs
    paths[b, : accepted[b] + 1].
    """
    b, p, length = retrieve.shape
    safe = retrieve.clamp(min=0)
    drafted = tokens.gather(1, safe[:, :, 1:].reshape(b, -1)).view(b, p, length - 1)  # token at each depth
    expected = predicted.gather(1, safe[:, :, :-1].reshape(b, -1)).view(b, p, length - 1)  # what the target wanted
    ok = (drafted == expected) & (retrieve[:, :, 1:] >= 0)
    run = ok.long().cumprod(dim=2).sum(dim=2)  # (B, P) accepted prefix length per path
    best = run.argmax(dim=1)  # (B,) the first longest: a real path, never padding
    rows = torch.arange(b, device=retrieve.device)
    return run[rows, best], retrieve[rows, best]


def _longest(ok: torch.Tensor, retrieve: torch.Tensor) -> tuple[int, torch.Tensor]:
    run = ok.long().cumprod(dim=1).sum(dim=1)  # (P,) accepted prefix length per path
    best = int(run.argmax())
    accepted = int(run[best])
    return accepted, retrieve[best, : accepted + 1]


def children_lists(parent: torch.Tensor) -> list[list[int]]:
    """children[i]: the inputs whose parent is input i, in index order (the drafter's rank order)."""
    kids: list[list[int]] = [[] for _ in range(parent.numel())]
    for i, p in enumerate(parent.tolist()):
        if p >= 0:
            kids[p].append(i)
    return kids


def sample_accept(
    tokens: torch.Tensor,
    probs: torch.Tensor,
    children: list[list[int]],
    generator: torch.Generator,
    draft_probs: torch.Tensor | None = None,
) -> tuple[int, torch.Tensor, int]:
    """Recursive rejection sampling down the tree (SpecInfer; EAGLE's tree sampling).

    tokens (N + 1,) verification inputs; probs (N + 1, V) the target's warped distribution after
    each input; children from `children_lists`. At a node with target distribution p, each child
    x (in order) is accepted with probability min(1, p(x) / q(x)), where q is the distribution the
    child was drawn from (draft_probs[x - 1], shape (N, V)), or a point mass on x for a
    deterministic draft (then the test is p(x)). On rejection p becomes max(0, p - q), renormalised
    (for a point mass: p with x removed) and the next sibling is tried. When no child is accepted
    the bonus token is drawn from what remains of p. Returns (accepted, kept inputs, bonus).
    """
    node, kept = 0, [0]
    while True:
        p = probs[node]
        accepted_child = -1
        for c in children[node]:
            x = int(tokens[c])
            u = float(torch.rand((), generator=generator, device=p.device))
            if draft_probs is None:
                if u < float(p[x]):
                    accepted_child = c
                    break
                p = p.clone()
                p[x] = 0.0
            else:
                q = draft_probs[c - 1].to(p.dtype)
                qx = float(q[x])
                if qx <= 0 or u < min(1.0, float(p[x]) / qx):
                    accepted_child = c
                    break
                p = (p - q).clamp(min=0.0)
            total = float(p.sum())
            if total <= 0:  # only possible through rounding when p had no mass left to reject into
                p = probs[node]
                total = float(p.sum())
            p = p / total
        if accepted_child < 0:
            bonus = int(torch.multinomial(p, 1, generator=generator))
            return len(kept) - 1, torch.tensor(kept, device=tokens.device), bonus
        node = accepted_child
        kept.append(node)


def typical_accept(
    tokens: torch.Tensor, probs: torch.Tensor, retrieve: torch.Tensor, threshold: float = 0.09, alpha: float = 0.3
) -> tuple[int, torch.Tensor]:
    """Medusa's typical acceptance (lossy): keep a draft x when p(x) > min(threshold, alpha·e^(-H(p))).

    probs (N + 1, V) the target's distribution after each input. Returns (accepted, kept inputs);
    the caller draws the bonus token from probs[kept[-1]].
    """
    entropy = -(probs * probs.clamp(min=1e-12).log()).sum(-1)  # (N + 1,)
    cut = torch.minimum(torch.full_like(entropy, threshold), alpha * torch.exp(-entropy))  # (N + 1,)
    safe = retrieve.clamp(min=0)
    parent_idx, child_idx = safe[:, :-1], safe[:, 1:]
    p_child = probs[parent_idx, tokens[child_idx]]  # (P, L - 1)
    ok = (p_child > cut[parent_idx]) & (retrieve[:, 1:] >= 0)
    return _longest(ok, retrieve)


@dataclass(frozen=True)
class TreeTensors:
    """One tree as verification reads it: its index tensors on the target's device."""

    tree: Tree
    depths: torch.Tensor  # (N + 1,) each input's depth below the root: its position after the root's
    visible: torch.Tensor  # (N + 1, N + 1) bool: input i attends input j
    retrieve: torch.Tensor  # (P, L) root-to-leaf index paths, padded with -1
    children: list[list[int]]  # children[i]: the inputs whose parent is input i (`children_lists`)

    @classmethod
    def of(cls, tree: Tree, device) -> TreeTensors:
        return cls(tree, tree.depth.to(device), tree.visible.to(device), tree.retrieve.to(device), children_lists(tree.parent))


def stack_trees(trees: list[TreeTensors], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Visibility (B, N + 1, N + 1), depths (B, N + 1) and paths (B, P, L) of each row's tree.

    A static tree shared by all rows is only expanded. Trees smaller than the widest are padded
    with nodes that see only themselves, that no node sees and that lie on no path: whatever the
    head put there, they are never accepted.
    """
    first = trees[0]
    b = len(trees)
    if all(t is first for t in trees):
        return first.visible.expand(b, -1, -1), first.depths.expand(b, -1), first.retrieve.expand(b, -1, -1)
    dev = first.visible.device
    visible = torch.eye(width, dtype=torch.bool, device=dev).repeat(b, 1, 1)
    depths = torch.ones(b, width, dtype=torch.long, device=dev)
    shape = (b, max(t.retrieve.shape[0] for t in trees), max(t.retrieve.shape[1] for t in trees))
    retrieve = torch.full(shape, -1, dtype=torch.long, device=dev)
    for i, t in enumerate(trees):
        n, (p, length) = t.visible.shape[0], t.retrieve.shape
        visible[i, :n, :n], depths[i, :n], retrieve[i, :p, :length] = t.visible, t.depths, t.retrieve
    return visible, depths, retrieve
