"""Checks of a head's options that every kind shares, run when a head is built and when one is loaded.

A head whose options pass here has the shapes its serving engines assume: a draft vocabulary of
1..V tokens, and (EAGLE-3) three distinct target layers in ascending order. The draft vocabulary's
own tensors (its ids checked against the target, its index, its EAGLE-3 maps) are heads/vocab.py.
"""

from __future__ import annotations

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
    if head.get("draft_vocab_size") is not None:
        check_draft_vocab_size(head["draft_vocab_size"], config["vocab_size"])
    if "feature_layers" in head:
        check_feature_layers(list(head["feature_layers"]), (config.get("target") or {}).get("num_hidden_layers"))
