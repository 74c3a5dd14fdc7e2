"""Greedy verification of a drafted tree: pure functions over the target's predictions."""

from __future__ import annotations

import torch


def greedy_accept(tokens: torch.Tensor, predicted: torch.Tensor, retrieve: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Find the root-to-leaf path whose drafts the target agrees with longest.

    tokens (N + 1,): verification inputs (root first); predicted (N + 1,): the target's greedy
    next token after each input; retrieve (P, L): root-to-leaf index paths padded with -1.
    Returns (accepted drafts a, indices of the a + 1 kept inputs, root first). The target's next
    token after the kept path, the bonus, is predicted[kept[-1]].
    """
    safe = retrieve.clamp(min=0)  # (P, L)
    drafted = tokens[safe[:, 1:]]  # (P, L - 1) token at each depth of each path
    expected = predicted[safe[:, :-1]]  # (P, L - 1) what the target wanted there
    ok = (drafted == expected) & (retrieve[:, 1:] >= 0)
    run = ok.long().cumprod(dim=1).sum(dim=1)  # (P,) accepted prefix length per path
    best = int(run.argmax())
    accepted = int(run[best])
    return accepted, retrieve[best, : accepted + 1]
