"""An n-gram model of what the target writes, drafting from the self-distilled corpus (no training).

headstart's training data are the target's own answers (`headstart distill`), so the phrases the
target favours ("Here's a step-by-step guide", "1. **", the code idioms it repeats) are in them.
`CorpusNgram` counts, for every context of 1..`order` tokens in those answers, the token that
followed it most often; drafting from a context follows that argmax chain, backing off to shorter
contexts where the longer one was never seen (an n-gram language model without smoothing: only
the argmax is kept). It is the retrieval idea of REST (He et al., 2023), with the target's own
outputs as the datastore. It drafts a chain in microseconds of Python and needs no training, so
it joins a head's tree beside the prompt-lookup branch (`decode.corpus_draft`, decode/hybrid.py's
HybridHead): what the head misses on the target's stock phrases, the corpus often holds.

Teacher-forced along the embedded SmolLM2's greedy answers to the 9 held-out prompts, a chain of
6 from the 4-gram model of its 6.1k shipped answers beside prompt lookup's chain of 10 accepts
τ 2.59 against 1.60 for prompt lookup alone.

Saved with a head as `corpus_ngram.safetensors` (int32 contexts, argmax tokens and counts per
order; no pickles): the table of the 6.1k shipped answers (0.79M tokens, order 4) holds 685k
contexts, 14.5 MB.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from headstart.errors import HeadstartError

FILE_NAME = "corpus_ngram.safetensors"


class CorpusNgramError(HeadstartError):
    """A corpus n-gram table that cannot be built or read."""


def _argmax_table(windows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """windows (M, n + 1): a context of n tokens then the token that followed. Returns the distinct
    contexts (C, n), the most frequent next token of each (C,) and how often it followed (C,);
    ties go to the smaller token id."""
    order = np.lexsort(windows.T[::-1])  # sort rows by context, then by next token
    rows = windows[order]
    new_pair = np.ones(len(rows), dtype=bool)
    new_pair[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    starts = np.flatnonzero(new_pair)
    pair_counts = np.diff(np.append(starts, len(rows)))
    pairs = rows[starts]  # distinct (context, next) rows, sorted
    ctx = pairs[:, :-1]
    new_ctx = np.ones(len(pairs), dtype=bool)
    new_ctx[1:] = (ctx[1:] != ctx[:-1]).any(axis=1)
    group = np.cumsum(new_ctx) - 1  # context index of each pair
    # The most frequent pair of each context: sort by (group, -count), take each group's first.
    pick = np.lexsort((-pair_counts, group))
    first = np.ones(len(pick), dtype=bool)
    first[1:] = group[pick][1:] != group[pick][:-1]
    best = pick[first]
    return ctx[best], pairs[best, -1], pair_counts[best]


class CorpusNgram:
    """For each context of 1..order tokens seen in a corpus, the token that most often followed it.

    `draft(context, k)`: up to k tokens, each the argmax after the longest known context (order
    down to 1) of the context extended by the tokens drafted so far; it stops where even the last
    token alone was never followed by anything.
    """

    def __init__(self, order: int, tables: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
        self.order = order
        self.tables = tables  # [n - 1] = (contexts (C, n) int32, next (C,) int32, counts (C,) int32)
        self._lookup: list[dict[tuple[int, ...], int]] | None = None  # built at the first draft (~1 s for 690k contexts)

    @property
    def _next(self) -> list[dict[tuple[int, ...], int]]:
        if self._lookup is None:
            self._lookup = [dict(zip(map(tuple, ctx.tolist()), nxt.tolist())) for ctx, nxt, _ in self.tables]
        return self._lookup

    @classmethod
    def build(cls, sequences: Iterable[list[int]], order: int = 4) -> CorpusNgram:
        """Count the n-grams (n <= order + 1) of token sequences (each an answer: no n-gram spans two)."""
        if isinstance(order, bool) or not isinstance(order, int) or order < 1:
            raise CorpusNgramError(f"the corpus n-gram order must be an integer >= 1, got {order!r}")
        seqs = [np.asarray(s, dtype=np.int64) for s in sequences if len(s) > 1]
        tables = []
        for n in range(1, order + 1):
            windows = [np.lib.stride_tricks.sliding_window_view(s, n + 1) for s in seqs if len(s) > n]
            if not windows:
                tables.append((np.zeros((0, n), np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32)))
                continue
            ctx, nxt, cnt = _argmax_table(np.concatenate(windows))
            tables.append((ctx.astype(np.int32), nxt.astype(np.int32), cnt.astype(np.int32)))
        return cls(order, tables)

    def __len__(self) -> int:
        return sum(len(t[1]) for t in self.tables)

    @classmethod
    def of_examples(cls, examples, order: int = 4, max_tokens: int = 2_000_000) -> CorpusNgram:
        """The table of training examples' answers: each run of loss-masked (assistant) tokens, from
        the first examples up to max_tokens answer tokens (the table's memory grows with them: about
        0.7M contexts and 14.5 MB on disk for 0.79M tokens, several times that as a dict in memory)."""
        runs: list[list[int]] = []
        total = 0
        for e in examples:
            if total >= max_tokens:
                break
            total += sum(e.loss_mask)
            run: list[int] = []
            for token, in_loss in zip(e.input_ids, e.loss_mask):
                if in_loss:
                    run.append(token)
                elif run:
                    runs.append(run)
                    run = []
            if run:
                runs.append(run)
        return cls.build(runs, order)

    def draft(self, context: list[int], max_tokens: int) -> list[int]:
        """Up to max_tokens tokens after `context` (newest last), each the argmax after the longest
        known context; [] when even the last token never preceded anything."""
        out: list[int] = []
        seq = list(context[-self.order :])
        tables = self._next
        for _ in range(max_tokens):
            token = None
            for n in range(min(self.order, len(seq)), 0, -1):
                token = tables[n - 1].get(tuple(seq[len(seq) - n :]))
                if token is not None:
                    break
            if token is None:
                break
            out.append(token)
            seq = seq[1:] + [token] if len(seq) == self.order else seq + [token]
        return out

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / FILE_NAME
        tensors = {}
        for n, (ctx, nxt, cnt) in enumerate(self.tables, start=1):
            tensors[f"contexts_{n}"] = torch.from_numpy(np.ascontiguousarray(ctx))
            tensors[f"next_{n}"] = torch.from_numpy(np.ascontiguousarray(nxt))
            tensors[f"counts_{n}"] = torch.from_numpy(np.ascontiguousarray(cnt))
        save_file(tensors, str(path), metadata={"order": str(self.order), "format": "headstart-corpus-ngram-1"})
        return path

    @classmethod
    def load(cls, folder: str | Path) -> CorpusNgram | None:
        """The table saved in `folder`, or None when it has none."""
        path = Path(folder) / FILE_NAME
        if not path.is_file():
            return None
        try:
            tensors = load_file(str(path))
            order = max(int(k.rsplit("_", 1)[1]) for k in tensors if k.startswith("next_"))
            tables = [
                (tensors[f"contexts_{n}"].numpy(), tensors[f"next_{n}"].numpy(), tensors[f"counts_{n}"].numpy())
                for n in range(1, order + 1)
            ]
        except Exception as e:  # noqa: BLE001 - a damaged file is one clear error
            raise CorpusNgramError(f"{path}: not a corpus n-gram table ({type(e).__name__}: {e}); delete it or rebuild it") from None
        for n, (ctx, nxt, cnt) in enumerate(tables, start=1):
            if ctx.ndim != 2 or ctx.shape[1] != n or not len(nxt) == len(cnt) == ctx.shape[0]:
                raise CorpusNgramError(f"{path}: order-{n} table has inconsistent shapes; delete it or rebuild it")
        return cls(order, tables)
