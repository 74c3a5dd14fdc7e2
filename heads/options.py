"""Checks of a head's options that every kind shares, run when a head is built and when one is loaded.

A head whose options pass here has the shapes its serving engines assume: a draft vocabulary of
1..V distinct target ids, and (EAGLE-3) three distinct target layers in ascending order.
"""

from __future__ import annotations

import torch

from headstart.errors import HeadstartError


class HeadOptionsError(HeadstartError):
    """Head options that cannot make a working head (a draft vocabulary or feature layers out of range)."""


def check_draft_vocab_size(n: object, vocab_size: int, key: str = "draft_vocab_size") -> None:
    """Refuse a draft vocabulary size outside 1..vocab_size (None, the whole vocabulary, is not checked here)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= vocab_size:
        raise HeadOptionsError(
            f"{key}={n!r}: a draft vocabulary holds between 1 and {vocab_size} tokens (the target's vocabulary); "
            f"give a size in that range, or null for the whole vocabulary"
        )


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


def check_feature_layers(layers: list[int], num_layers: int | None) -> None:
    """Refuse EAGLE-3 feature layers that are not three distinct target layers in ascending order
    (within the target's `num_layers`, when it is known).

    vLLM and SGLang capture the auxiliary hidden states of the layers whose ids are in the list,
    in the order the layers run: an unsorted list silently permutes the fc input, and a repeated
    layer is captured once, so fc gets 2D features instead of 3D.
    """
    problems = []
    if len(layers) != 3:
        problems.append(f"{len(layers)} layers instead of three")
    limit = num_layers if num_layers is not None else float("inf")
    outside = [i for i in layers if not isinstance(i, int) or not 0 <= i < limit]
    if outside:
        problems.append(f"{outside} outside the target's layers 0..{limit - 1}")
    if len(set(layers)) != len(layers):
        problems.append("a layer listed twice (serving engines capture it once, which breaks fc's 3D input)")
    elif list(layers) != sorted(layers):
        problems.append("not in ascending order (serving engines capture layers in the order they run, which "
                        "would permute fc's input)")
    if problems:
        raise HeadOptionsError(
            f"EAGLE-3 reads three target layers, distinct and in ascending order, in [0, {limit}); got "
            f"feature_layers={list(layers)}: {'; '.join(problems)}. {_suggest(layers, num_layers)}"
        )


def _suggest(layers: list[int], num_layers: int | None) -> str:
    """What to give instead: the distinct in-range ids of `layers`, sorted, or the first, middle and last layer."""
    if num_layers is not None and num_layers < 3:
        return "EAGLE-3 needs a target with at least three layers."
    ids = sorted({i for i in layers if isinstance(i, int) and 0 <= i and (num_layers is None or i < num_layers)})
    if len(ids) != 3 and num_layers is not None:
        ids = [0, (num_layers - 1) // 2, num_layers - 1]
    return f"Give e.g. {ids}." if len(ids) == 3 else "Give three distinct layers in ascending order."


def check_head_config(config: dict) -> None:
    """Refuse a saved head's config.json whose options no head can be built from (its draft
    vocabulary size; EAGLE-3's feature layers, against the recorded target's layers)."""
    head = config["head"]
    draft_size({**head, "vocab_size": config["vocab_size"]})
    if "feature_layers" in head:
        check_feature_layers(list(head["feature_layers"]), (config.get("target") or {}).get("num_hidden_layers"))
