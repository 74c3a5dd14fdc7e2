"""Complementary training: weight a head's loss toward the tokens head-free drafting misses.

In a hybrid tree (decode/hybrid.py) the head drafts beside two sources that need no training: the
prompt-lookup branch (the continuation of the latest earlier match of the newest tokens) and the
corpus table (the most frequent continuations in the target's own training answers). Where one of
them already drafts the right token, the head's draft adds nothing; its capacity is worth most at
the tokens they miss. `free_hits` marks, for every answer token, whether head-free drafting
predicts it from what precedes it; `draft_weights` turns the marks into per-token loss weights
(1 where they miss, `hit_weight` where they hit), which the head's loss averages by.

The table that decides a training answer's marks must not contain that answer, or every answer
would look predictable by its own n-grams: the answers are split into `folds`, and each fold is
marked with the table counted from the others (cross-fitting). Lookup needs no such care: it
reads only the tokens before the mark, as decoding does.
"""

from __future__ import annotations

from collections.abc import Sequence

from headstart.decode.corpus import CorpusNgram
from headstart.decode.lookup import NgramIndex


def free_hits(examples: Sequence, order: int = 4, folds: int = 4, width: int = 1, max_ngram: int = 2) -> list[list[bool]]:
    """Per example, per token: True where head-free drafting predicts that (assistant) token from
    the tokens before it: the prompt-lookup continuation's first token, or one of the corpus table's
    `width` most probable next tokens (the table counted from the other folds' answers). Non-answer
    tokens are False. `examples` have `input_ids` and `loss_mask`; fold i holds examples i, i + folds, ..."""
    folds = max(1, min(folds, len(examples)))
    hits: list[list[bool]] = [[] for _ in examples]
    for f in range(folds):
        others = [e for i, e in enumerate(examples) if folds == 1 or i % folds != f]
        table = CorpusNgram.of_examples(others, order)
        for i in range(f, len(examples), folds):
            hits[i] = _marks(examples[i], table, width, max_ngram)
    return hits


def _marks(example, table: CorpusNgram, width: int, max_ngram: int) -> list[bool]:
    """One example's marks (see free_hits)."""
    ids, mask = example.input_ids, example.loss_mask
    index = NgramIndex(max_ngram)
    marks = [False] * len(ids)
    for j in range(1, len(ids)):
        index.extend(ids[j - 2 : j - 1] if j >= 2 else [])  # the index holds ids[:j - 1]; ids[j - 1] is the root
        if not mask[j]:
            continue
        copied = index.continuation(ids[j - 1], 1)
        guessed = table.successors(ids[max(0, j - table.order) : j])[0][:width]
        marks[j] = (bool(copied) and copied[0] == ids[j]) or ids[j] in guessed
    return marks


def draft_weights(hits: list[list[bool]], hit_weight: float) -> list[list[float]]:
    """Loss weights from `free_hits`' marks: `hit_weight` where head-free drafting hits, else 1."""
    return [[hit_weight if h else 1.0 for h in row] for row in hits]
