"""Draft vocabularies: a head that ranks only N of the target's V tokens (the most frequent in the
training answers) makes every projection V / N times cheaper.

Two forms name the same set of target ids. Medusa and EAGLE keep `draft_ids` (N,), the target ids in
frequency order. EAGLE-3 keeps them sorted, as its serving engines load them (vLLM, SGLang, the
EAGLE-3 release): `d2t` (N,), target id = draft id + d2t[draft id], and `t2d` (V,), a bool per
target id that says whether it is in the draft vocabulary. Tokens outside the draft vocabulary are
index -1: a head cannot propose them, and accuracy counts them as misses.

The range check of a recipe's or a config's `draft_vocab_size` number is `check_draft_vocab_size` in
heads/options.py, with the other option checks (checkpoint loading runs them without building a head).
"""

from __future__ import annotations

import torch

from headstart.heads.options import HeadOptionsError, check_draft_vocab_size


def draft_size(options: dict) -> int:
    """The number of tokens a head ranks: `draft_vocab_size`, or the whole vocabulary when it is None."""
    n = options.get("draft_vocab_size")
    if n is None:
        return options["vocab_size"]
    check_draft_vocab_size(n, options["vocab_size"])
    return n


def draft_vocab_size(target, draft_vocab: torch.Tensor | None) -> int | None:
    """Check a draft vocabulary (target ids) against the target; returns its size (None: the whole vocabulary)."""
    if draft_vocab is None:
        return None
    v = target.vocab_size
    if draft_vocab.ndim != 1:
        raise HeadOptionsError(f"a draft vocabulary is a 1-D tensor of target ids, got shape {tuple(draft_vocab.shape)}")
    n = int(draft_vocab.numel())
    if n > v:
        raise HeadOptionsError(f"a draft vocabulary of {n} tokens is larger than the target's {v}")
    check_draft_vocab_size(n, v, "the draft vocabulary's size")
    if int(draft_vocab.min()) < 0 or int(draft_vocab.max()) >= v:
        raise HeadOptionsError(f"draft vocabulary ids must lie in [0, {v}); got ids from {int(draft_vocab.min())} to {int(draft_vocab.max())}")
    if int(draft_vocab.unique().numel()) != n:
        raise HeadOptionsError(f"the draft vocabulary lists {n - int(draft_vocab.unique().numel())} token ids twice; give distinct ids")
    return n


def frequent_tokens(examples, n: int, vocab_size: int) -> torch.Tensor:
    """The n most frequent assistant tokens of `examples` (each with `input_ids` and `loss_mask`),
    most frequent first (ties by id): the draft vocabulary a new head is built with."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for e in examples:
        ids = torch.tensor(e.input_ids)[torch.tensor(e.loss_mask, dtype=torch.bool)]
        counts += torch.bincount(ids, minlength=vocab_size)
    n = min(n, vocab_size)
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))[:n]
    return torch.tensor(order, dtype=torch.long)


def index_in_draft_vocab(draft_ids: torch.Tensor, vocab_size: int, ids: torch.Tensor) -> torch.Tensor:
    """Target ids -> their index in `draft_ids` (the draft vocabulary), -1 where absent."""
    table = torch.full((vocab_size,), -1, dtype=torch.long, device=ids.device)
    table[draft_ids.to(ids.device)] = torch.arange(draft_ids.numel(), device=ids.device)
    return table[ids]


def ids_from_d2t(d2t: torch.Tensor) -> torch.Tensor:
    """(N,) the target id of each draft id of an EAGLE-3 map: draft id + d2t."""
    return torch.arange(d2t.numel(), device=d2t.device) + d2t


def d2t_from_ids(ids: torch.Tensor) -> torch.Tensor:
    """(N,) EAGLE-3's d2t of a draft vocabulary given as sorted target ids: target id − draft id."""
    return ids - torch.arange(ids.numel(), device=ids.device)


def t2d_from_ids(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(V,) EAGLE-3's t2d: True at the target ids of the draft vocabulary."""
    t2d = torch.zeros(vocab_size, dtype=torch.bool, device=ids.device)
    t2d[ids] = True
    return t2d
