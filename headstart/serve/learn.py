"""Drafts that learn from what is served (`headstart serve --method corpus|hybrid --learn`).

The corpus table (decode/corpus.py) counts the n-grams of the target's answers at training time. Served
answers are more of the same text, and often closer to what the next users ask, so with --learn each
finished answer's tokens are counted into the table that drafts (`LearningTable.count`: the counts of
`CorpusNgram.build`, merged in) and later requests draft from earlier answers. A table only proposes: the
target verifies every draft, so what it learns changes acceptance, never the output.

Bounded: the table holds at most `cap` contexts (all orders together, DEFAULT_CAP); past it the least
recently used context (counted or drafted from) is dropped first. A context keeps the `top_k` successors it
had (4); a new successor of a full context takes the place of its least counted one and that count plus its
own (the Space-Saving count of Metwally et al., 2005), so that what the answers keep writing rises past what
the corpus held instead of being shut out; a count may overstate by the one it replaced, which changes what is
proposed, never what is accepted.

Saved by `Learner`: `corpus_ngram.safetensors` (CorpusNgram's format, readable as any head's table, plus each
context's recency, `used_<n>`) and `learned.json` (what wrote it, answers counted) in the learn folder, written
under a temporary name and renamed into place every `every` answers and at shutdown. A restart with the same
folder continues from it. The learn folder is never the head folder: the table training saved there stays as
it was (`headstart serve` keeps learned tables in its cache, or in --learn-dir).
"""

from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from headstart.decode.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.errors import HeadstartError
from headstart.files import process_alive, write_safetensors, write_text

#: the learn folder (set by `headstart serve --learn` in vLLM's environment)
LEARN_ENV = "HEADSTART_LEARN"
#: contexts kept at most (HEADSTART_LEARN_CAP); about 0.5 kB of memory each (docs/serving.md#learning-from-what-is-served)
CAP_ENV, DEFAULT_CAP = "HEADSTART_LEARN_CAP", 1_000_000
#: answers counted between saves (HEADSTART_LEARN_EVERY)
EVERY_ENV, DEFAULT_EVERY = "HEADSTART_LEARN_EVERY", 100
#: written beside the learned table: it marks the folder as one `--learn` writes
MARKER = "learned.json"
WRITTEN_BY = "headstart serve --learn"


class LearningTable(CorpusNgram):
    """A corpus table whose counts grow (see the module doc): `count(tokens)` adds an answer's n-grams, at most
    `cap` contexts are kept (least recently used dropped first). Drafts as CorpusNgram does (`tree`,
    `scored_tree`); before anything is counted, exactly as the table it started from."""

    def __init__(self, order: int, top_k: int, cap: int = DEFAULT_CAP):
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise CorpusNgramError(f"the learning table's cap must be an integer >= 1 (contexts), got {cap!r}")
        self.order, self.top_k, self.cap = order, top_k, cap
        # context (1..order tokens) -> [occurrences, {next token: count}], least recently used first
        self.seen: OrderedDict[tuple[int, ...], list] = OrderedDict()
        self.dropped = 0

    @classmethod
    def of(cls, corpus: CorpusNgram, cap: int = DEFAULT_CAP, used: dict[int, np.ndarray] | None = None) -> LearningTable:
        """The table holding `corpus`'s counts; `used` (order -> each context's recency rank, as saved) restores
        which were used last, else they count as used in the file's order, the longest contexts longest ago (the
        shortest, which every draft backs off to, are dropped last)."""
        table = cls(corpus.order, corpus.top_k, cap)
        rows = []
        for n, (ctx, totals, starts, nxt, cnt) in enumerate(corpus.tables, start=1):
            ranks = used[n].tolist() if used and n in used else [0] * len(totals)
            tokens, counts, bounds = nxt.tolist(), cnt.tolist(), starts.tolist()
            rows += [((rank, -n), tuple(c), [total, dict(zip(tokens[a:b], counts[a:b]))])
                     for rank, c, total, a, b in zip(ranks, ctx.tolist(), totals.tolist(), bounds[:-1], bounds[1:])]
        rows.sort(key=lambda row: row[0])  # stable: within an order and rank, the file's order
        table.seen.update((c, entry) for _, c, entry in rows)
        table.trim()
        return table

    @classmethod
    def resume(cls, folder: str | Path, cap: int = DEFAULT_CAP) -> LearningTable | None:
        """The table a learn folder holds (its recency restored), or None when it holds none."""
        corpus = CorpusNgram.load(folder)
        if corpus is None:
            return None
        tensors = load_file(str(Path(folder) / FILE_NAME))
        used = {int(k.rsplit("_", 1)[1]): v.numpy() for k, v in tensors.items() if k.startswith("used_")}
        return cls.of(corpus, cap, used)

    def __len__(self) -> int:
        return len(self.seen)

    def prepare(self) -> LearningTable:
        """Nothing to build: its counts are dicts already."""
        return self

    def count(self, tokens: list[int]) -> None:
        """Add the n-grams of one answer (its token ids, in order), as training counts an answer's."""
        if len(tokens) < 2:
            return
        answer = CorpusNgram.build([tokens], self.order, top_k=len(tokens))  # every successor, counted
        for ctx, totals, starts, nxt, cnt in answer.tables:
            following, counts, bounds = nxt.tolist(), cnt.tolist(), starts.tolist()
            for c, total, a, b in zip(ctx.tolist(), totals.tolist(), bounds[:-1], bounds[1:]):
                self.add(tuple(c), total, zip(following[a:b], counts[a:b]))
        self.trim()

    def add(self, context: tuple[int, ...], occurrences: int, successors) -> None:
        """Count `occurrences` more of `context`, followed by `successors` ((token, count) pairs, most frequent
        first); the context becomes the most recently used."""
        entry = self.seen.pop(context, None) or [0, {}]
        entry[0] += occurrences
        nexts = entry[1]
        for token, count in successors:
            if token not in nexts and len(nexts) >= self.top_k:  # full: the least counted gives way (Space-Saving)
                least = min(nexts, key=lambda t: (nexts[t], -t))
                count += nexts.pop(least)
            nexts[token] = nexts.get(token, 0) + count
        self.seen[context] = entry

    def trim(self) -> None:
        """Drop the least recently used contexts beyond the cap."""
        while len(self.seen) > self.cap:
            self.seen.popitem(last=False)
            self.dropped += 1

    def successors(self, context: list[int]) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """As CorpusNgram's (count / (occurrences + 1), most probable first, ties to the smaller token id); the
        context found becomes the most recently used."""
        for n in range(min(self.order, len(context)), 0, -1):
            key = tuple(context[len(context) - n :])
            entry = self.seen.get(key)
            if entry is not None:
                self.seen.move_to_end(key)
                total, nexts = entry
                ranked = sorted(nexts.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_k]
                return tuple(t for t, _ in ranked), tuple(c / (total + 1.0) for _, c in ranked)
        return (), ()

    def tensors(self) -> dict[str, torch.Tensor]:
        """The table in CorpusNgram's file layout (contexts, totals, starts, next, counts per order) plus
        `used_<n>`, each context's rank from least to most recently used."""
        by_order: list[list] = [[] for _ in range(self.order)]
        for rank, (context, (total, nexts)) in enumerate(self.seen.items()):
            ranked = sorted(nexts.items(), key=lambda kv: (-kv[1], kv[0]))
            by_order[len(context) - 1].append((rank, context, total, ranked))
        out = {}
        for n, rows in enumerate(by_order, start=1):
            sizes = [len(r[3]) for r in rows]
            out |= {
                f"contexts_{n}": np.array([r[1] for r in rows], dtype=np.int32).reshape(len(rows), n),
                f"totals_{n}": np.array([r[2] for r in rows], dtype=np.int32),
                f"starts_{n}": np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int32),
                f"next_{n}": np.array([t for r in rows for t, _ in r[3]], dtype=np.int32),
                f"counts_{n}": np.array([c for r in rows for _, c in r[3]], dtype=np.int32),
                f"used_{n}": np.array([r[0] for r in rows], dtype=np.int64),
            }
        return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}

    def save(self, folder: str | Path) -> Path:
        """Write the table into `folder` as `corpus_ngram.safetensors`, renamed into place."""
        path = Path(folder) / FILE_NAME
        meta = {"order": str(self.order), "top_k": str(self.top_k), "format": "headstart-corpus-ngram-2", "learned": "1"}
        write_safetensors(path, self.tensors(), metadata=meta)
        return path


def marker(folder: str | Path) -> dict | None:
    """The learn folder's `learned.json`, or None when it has none (or it is not one `--learn` wrote)."""
    try:
        record = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("written_by") == WRITTEN_BY else None


def learn_folder_refusal(folder: str | Path, head_folder: str | Path) -> str | None:
    """Why `folder` cannot be a learn folder (None when it can): the head folder itself (its table is training's),
    something other than a folder, or a folder holding a corpus table that `--learn` did not write."""
    folder, head_folder = Path(folder), Path(head_folder)
    if folder.resolve() == head_folder.resolve():
        return "is the head folder: its corpus table is the one training saved; give another folder"
    if folder.exists() and not folder.is_dir():
        return "is not a folder"
    if (folder / FILE_NAME).exists() and marker(folder) is None:
        return f"holds a {FILE_NAME} that `{WRITTEN_BY}` did not write (no {MARKER}); give another folder"
    return None


class Learner:
    """The served table and where it is kept: `learn(answer)` counts a finished answer, the folder is written
    every `every` answers and by `save()` (at shutdown)."""

    def __init__(self, table: LearningTable, folder: str | Path, every: int = DEFAULT_EVERY):
        self.table, self.folder, self.every = table, Path(folder), every
        remove_unfinished(self.folder)
        before = marker(folder) or {}
        self.answers = int(before.get("answers", 0))  # since the folder's first start
        self.unsaved = 0

    def learn(self, answer: list[int]) -> None:
        """Count one finished answer's tokens (vLLM's placeholders, negative, left out)."""
        tokens = [int(t) for t in answer if t >= 0]
        self.table.count(tokens)
        self.answers, self.unsaved = self.answers + 1, self.unsaved + 1
        if self.unsaved >= self.every:
            self.save()

    def save(self) -> None:
        """Write the table and learned.json if anything was counted since the last save."""
        if not self.unsaved:
            return
        record = {"written_by": WRITTEN_BY, "answers": self.answers, "contexts": len(self.table), "cap": self.table.cap,
                  "dropped_since_start": self.table.dropped}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.table.save(self.folder)
            write_text(self.folder / MARKER, json.dumps(record, indent=1) + "\n")
        except (OSError, HeadstartError) as e:  # serving goes on; the next save tries again
            print(f"headstart: could not save the learned table to {self.folder}: {e}", file=sys.stderr, flush=True)
            return
        self.unsaved = 0


def remove_unfinished(folder: Path) -> list[Path]:
    """Remove the temporary files of saves cut short (their process killed while writing: files.py names them
    .<name>.<pid>-<hex>.tmp) whose process no longer runs; returns them."""
    removed = []
    for path in folder.glob(".*.tmp") if folder.is_dir() else []:
        name, _, rest = path.name[1:].rpartition(".tmp")[0].rpartition(".")
        pid = rest.split("-", 1)[0]
        if name in (FILE_NAME, MARKER) and pid.isdigit() and not process_alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _positive(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = 0
    if value < 1:
        raise CorpusNgramError(f"{name} must be an integer >= 1, got {raw!r}")
    return value


def learner_from_env(corpus: CorpusNgram | None) -> Learner | None:
    """The learner HEADSTART_LEARN asks for (None when it is not set): the learn folder's table when it holds
    one (a restart), else `corpus`'s counts (the head's table), else an empty table of order 4."""
    folder = os.environ.get(LEARN_ENV)
    if not folder:
        return None
    cap, every = _positive(CAP_ENV, DEFAULT_CAP), _positive(EVERY_ENV, DEFAULT_EVERY)
    table = LearningTable.resume(folder, cap)
    start = "continued from" if table is not None else "new, saved to"
    if table is None:
        table = LearningTable.of(corpus, cap) if corpus is not None else LearningTable(4, 4, cap)
    print(f"headstart: the corpus table learns from served answers ({start} {folder}; {len(table)} contexts, cap {cap}, "
          f"saved every {every} answers)", file=sys.stderr, flush=True)
    return Learner(table, folder, every)
