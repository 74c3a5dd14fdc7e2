"""An n-gram model of what the target writes, drafting from the self-distilled corpus (no training).

headstart's training data are the target's own answers (`headstart distill`), so the phrases the
target favours ("Here's a step-by-step guide", "1. **", the code idioms it repeats) are in them.
`CorpusNgram` counts, for every context of 1..`order` tokens in those answers, how often it
occurred and the `top_k` (4) tokens that followed it most often. Drafting from a context grows a
small tree best-first: each path's probability is the product of its steps', each step's taken
after the longest known context (backing off to shorter ones where the longer was never seen: an
n-gram language model, kept to its top 4). It is the retrieval idea of REST (He et al., 2023),
with the target's own outputs as the datastore. It drafts in well under a millisecond of Python
and needs no training, so it joins a head's tree beside the prompt-lookup branch
(`decode.corpus_draft` nodes, decode/hybrid.py's HybridHead): what the head misses on the
target's stock phrases, the corpus often holds.

A best-first tree accepts more than the argmax chain of as many nodes (docs/results.md#choices-made-teacher-forced).

Saved with a head as `corpus_ngram.safetensors` (int32 contexts, totals, and the top tokens with
their counts per order; no pickles); its size grows with the answer tokens counted.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from headstart.errors import HeadstartError
from headstart.files import write_safetensors

FILE_NAME = "corpus_ngram.safetensors"


class CorpusNgramError(HeadstartError):
    """A corpus n-gram table that cannot be built or read."""


def _sum_rows(rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `rows` (M, w), sorted, and the sum of `weights` (M,) over each."""
    order = np.lexsort(rows.T[::-1])
    rows = rows[order]
    new_row = np.ones(len(rows), dtype=bool)
    new_row[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first_row = np.flatnonzero(new_row)
    return rows[first_row], np.add.reduceat(weights[order], first_row) if len(rows) else weights[:0]


def _successor_table(windows: np.ndarray, top_k: int, weights: np.ndarray | None = None,
                     contexts: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """windows (M, n + 1): a context of n tokens then the token that followed (each seen `weights`
    times, once by default). Returns the distinct contexts (C, n), how often each occurred (C,), and
    its `top_k` most frequent next tokens flattened (P,) with their counts (P,), context i's at
    starts[i]:starts[i + 1] (starts (C + 1,)), most frequent first, ties to the smaller token id.
    `contexts` (rows, counts): how often each context occurred, where that is more than its windows
    say (tables merged: each kept only its top_k successors)."""
    weights = np.ones(len(windows), dtype=np.int64) if weights is None else weights.astype(np.int64)
    pairs, pair_counts = _sum_rows(windows, weights)  # distinct (context, next) rows, sorted
    ctx = pairs[:, :-1]
    new_ctx = np.ones(len(pairs), dtype=bool)
    new_ctx[1:] = (ctx[1:] != ctx[:-1]).any(axis=1)
    group = np.cumsum(new_ctx) - 1  # context index of each pair
    if contexts is None:
        totals = np.bincount(group, weights=pair_counts).astype(np.int64)
    else:  # the same distinct contexts in the same (sorted) order: each one held at least one successor
        totals = _sum_rows(*contexts)[1]
    # Each context's pairs by count, most frequent first (a stable sort keeps ties in token order).
    ranked = np.lexsort((-pair_counts, group))
    rank = np.arange(len(ranked)) - np.flatnonzero(new_ctx)[group[ranked]]
    kept = ranked[rank < top_k]
    starts = np.searchsorted(group[kept], np.arange(group[-1] + 2))
    return ctx[new_ctx], totals, starts, pairs[kept, -1], pair_counts[kept]


class CorpusNgram:
    """For each context of 1..order tokens seen in a corpus, how often it occurred and its `top_k`
    most frequent next tokens with their counts.

    `tree(context, nodes)`: the corpus tree, best-first: the `nodes` most probable token paths after
    the context, each step's probability count / (occurrences + 1) after the longest known context
    (order down to 1) of the context extended by the path (the + 1 keeps a context seen once from
    counting as certain). With width 1 it is the argmax chain.
    """

    def __init__(self, order: int, tables: list[tuple[np.ndarray, ...]], top_k: int = 4):
        self.order, self.top_k = order, top_k
        self.tables = tables  # [n - 1] = (contexts (C, n), totals (C,), starts (C + 1,), next (P,), counts (P,)), int32
        self._lookup: list[dict] | None = None  # built at the first draft (seconds for the shipped corpus)

    @property
    def _next(self) -> list[dict[tuple[int, ...], tuple[tuple[int, ...], tuple[float, ...]]]]:
        """Per order: context -> (next tokens, their probabilities), most probable first."""
        if self._lookup is None:
            self._lookup = []
            for ctx, totals, starts, nxt, cnt in self.tables:
                tokens, probs = nxt.tolist(), (cnt / (totals.repeat(np.diff(starts)) + 1.0)).tolist()
                bounds = starts.tolist()
                self._lookup.append({
                    tuple(c): (tuple(tokens[a:b]), tuple(probs[a:b]))
                    for c, a, b in zip(ctx.tolist(), bounds[:-1], bounds[1:])
                })
        return self._lookup

    def prepare(self) -> CorpusNgram:
        """Build the lookup dicts now (seconds for the shipped corpus) instead of at the first draft: a server
        calls it at load, so that its first request does not pay them. Returns the table."""
        self._next  # noqa: B018 (built on first use)
        return self

    @classmethod
    def build(cls, sequences: Iterable[list[int]], order: int = 4, top_k: int = 4) -> CorpusNgram:
        """Count the n-grams (n <= order + 1) of token sequences (each an answer: no n-gram spans two)."""
        for name, value in (("order", order), ("top_k", top_k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CorpusNgramError(f"the corpus n-gram {name} must be an integer >= 1, got {value!r}")
        seqs = [np.asarray(s, dtype=np.int64) for s in sequences if len(s) > 1]
        tables = []
        for n in range(1, order + 1):
            windows = [np.lib.stride_tricks.sliding_window_view(s, n + 1) for s in seqs if len(s) > n]
            if not windows:
                empty = np.zeros(0, np.int32)
                tables.append((np.zeros((0, n), np.int32), empty, np.zeros(1, np.int32), empty, empty))
                continue
            tables.append(tuple(a.astype(np.int32) for a in _successor_table(np.concatenate(windows), top_k)))
        return cls(order, tables, top_k)

    def merged(self, other: CorpusNgram) -> CorpusNgram:
        """The table of both tables' text: each context's occurrences and its successors' counts summed, then its
        top_k (the larger of the two) kept. Each table kept only its top_k successors, so a token that was
        outside one table's top_k counts only the other's occurrences. An order only one of them holds is
        that one's."""
        tables = []
        for n in range(1, max(self.order, other.order) + 1):
            parts = [t[n - 1] for t in (self.tables, other.tables) if n <= len(t)]
            full = [t for t in parts if len(t[1])]  # an order may be empty (answers shorter than it)
            if len(full) < 2:
                tables.append((full or parts)[0])
                continue
            a, b = full
            windows = np.concatenate([np.column_stack([np.repeat(t[0], np.diff(t[2]), axis=0), t[3]]) for t in (a, b)])
            contexts = (np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]).astype(np.int64))
            table = _successor_table(windows, max(self.top_k, other.top_k), np.concatenate([a[4], b[4]]), contexts)
            tables.append(tuple(x.astype(np.int32) for x in table))
        return CorpusNgram(max(self.order, other.order), tables, max(self.top_k, other.top_k))

    def __len__(self) -> int:
        """Contexts held, over all orders."""
        return sum(len(t[1]) for t in self.tables)

    @classmethod
    def of_examples(cls, examples, order: int = 4, max_tokens: int = 2_000_000) -> CorpusNgram:
        """The table of training examples' answers: each run of loss-masked (assistant) tokens, from
        the first examples up to max_tokens answer tokens (the table's memory grows with them: about
        0.7M contexts and 20 MB on disk for 0.79M tokens, several times that as a dict in memory)."""
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

    def successors(self, context: list[int]) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The next tokens and their probabilities after the longest known suffix of `context`
        (newest last); empty when even its last token never preceded anything."""
        tables = self._next
        for n in range(min(self.order, len(context)), 0, -1):
            found = tables[n - 1].get(tuple(context[len(context) - n :]))
            if found is not None:
                return found
        return (), ()

    def scored_tree(self, context: list[int], nodes: int, width: int | None = None) -> list[tuple[list[int], float]]:
        """The corpus tree after `context`: up to `nodes` token paths from the root with their
        probabilities, taken best-first (each a step's `width` most probable next tokens, default all
        kept); a path's parent always comes before it."""
        width = width or self.top_k
        tokens, probs = self.successors(context)
        heap = [(-p, i, [t]) for i, (t, p) in enumerate(zip(tokens[:width], probs[:width]))]
        heapq.heapify(heap)
        taken: list[tuple[list[int], float]] = []
        serial = len(heap)  # breaks probability ties in the order paths were found
        while heap and len(taken) < nodes:
            neg_p, _, path = heapq.heappop(heap)
            taken.append((path, -neg_p))
            tokens, probs = self.successors(context[-self.order :] + path)
            for t, p in zip(tokens[:width], probs[:width]):
                heapq.heappush(heap, (neg_p * p, serial, [*path, t]))
                serial += 1
        return taken

    def tree(self, context: list[int], nodes: int, width: int | None = None) -> list[list[int]]:
        """`scored_tree`'s paths as the tree's leaves (the paths no other path extends), in the order
        they were taken."""
        taken = [path for path, _ in self.scored_tree(context, nodes, width)]
        return leaves(taken)

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / FILE_NAME
        tensors = {}
        for n, table in enumerate(self.tables, start=1):
            for name, array in zip(_ARRAYS, table):
                tensors[f"{name}_{n}"] = torch.from_numpy(np.ascontiguousarray(array))
        meta = {"order": str(self.order), "top_k": str(self.top_k), "format": "headstart-corpus-ngram-2"}
        write_safetensors(path, tensors, metadata=meta)  # renamed into place, the umask's mode (not safetensors' 0600)
        return path

    @classmethod
    def load(cls, folder: str | Path, vocab_size: int | None = None) -> CorpusNgram | None:
        """The table saved in `folder`, or None when it has none. A table saved by the first format
        (the argmax alone, no totals) reads as width 1, drafting its argmax chain. Its shapes and
        ranges are checked (`table_problem`; token ids below `vocab_size` when given)."""
        path = Path(folder) / FILE_NAME
        if not path.is_file():
            return None
        try:
            tensors = {k: v.numpy() for k, v in load_file(str(path)).items()}
            order = max(int(k.rsplit("_", 1)[1]) for k in tensors if k.startswith("next_"))
            first_format = "totals_1" not in tensors
            tables = [_first_format(tensors, n) if first_format else tuple(tensors[f"{a}_{n}"] for a in _ARRAYS)
                      for n in range(1, order + 1)]
        except Exception as e:  # noqa: BLE001 - a damaged file is one clear error
            raise CorpusNgramError(f"{path}: not a corpus n-gram table ({type(e).__name__}: {e}); delete it or rebuild it") from None
        for n, table in enumerate(tables, start=1):
            problem = table_problem(n, table, vocab_size)
            if problem:
                raise CorpusNgramError(f"{path}: the order-{n} table {problem}; delete it or rebuild it (train.corpus_ngram)")
        return cls(order, tables, 1 if first_format else max(int(np.diff(t[2]).max(initial=1)) for t in tables))


_ARRAYS = ("contexts", "totals", "starts", "next", "counts")


def table_problem(n: int, table: tuple[np.ndarray, ...], vocab_size: int | None = None) -> str | None:
    """What makes an order-n table unusable (shapes that disagree, counts out of range, token ids
    outside the vocabulary), or None: drafting indexes and repeats by these values unchecked."""
    ctx, totals, starts, nxt, cnt = table
    if ctx.ndim != 2 or ctx.shape[1] != n or not len(totals) + 1 == len(starts) or len(nxt) != len(cnt) \
            or ctx.shape[0] != len(totals) or starts[-1] != len(nxt):
        return "has inconsistent shapes"
    if starts[0] != 0 or (np.diff(starts) < 0).any():
        return "has successor offsets that are not ascending from 0"
    if (totals < 0).any() or (cnt < 0).any():
        return "has negative counts"
    high = vocab_size if vocab_size is not None else np.iinfo(np.int32).max
    for name, ids in (("context", ctx), ("next", nxt)):
        if ids.size and (ids.min() < 0 or ids.max() >= high):
            return f"has {name} token ids outside [0, {high})"
    return None


def leaves(paths: list[list[int]]) -> list[list[int]]:
    """The paths of a prefix-closed set that no other path of it extends, in their order."""
    inner = {tuple(p[:-1]) for p in paths}
    return [p for p in paths if tuple(p) not in inner]


def _first_format(tensors: dict, n: int) -> tuple[np.ndarray, ...]:
    """An order-n table of the first format (contexts, the argmax and its count) as one successor each."""
    ctx, nxt, cnt = tensors[f"contexts_{n}"], tensors[f"next_{n}"], tensors[f"counts_{n}"]
    return ctx, cnt, np.arange(len(nxt) + 1, dtype=np.int32), nxt, cnt
