"""The corpus n-gram table of the training answers: its counts, its best-first trees, saved with a head."""

from __future__ import annotations

import os
import random
import stat
from collections import Counter, defaultdict

import pytest
import torch
from safetensors.torch import save_file

from headstart.decode.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.train.data import Example


def _chain(table: CorpusNgram, context: list[int], k: int) -> list[int]:
    """The argmax chain: the corpus tree of width 1 (one leaf, or none)."""
    leaves = table.tree(context, k, width=1)
    return leaves[0] if leaves else []


def test_chains_follow_the_most_frequent_continuation_backing_off_to_shorter_contexts():
    table = CorpusNgram.build([[1, 2, 3, 1, 2, 4], [1, 2, 3], [7, 2, 5]], order=2)
    assert _chain(table, [5, 1, 2], 3) == [3, 1, 2]  # (1, 2) -> 3 twice, 4 once; then (2, 3) -> 1, (3, 1) -> 2
    assert _chain(table, [9, 7, 2], 1) == [5]  # the longest context that was seen decides: (7, 2) -> 5
    assert _chain(table, [9, 9, 2], 1) == [3]  # (9, 2) never seen: 2 alone -> 3 (twice) before 4 and 5
    assert _chain(table, [9, 8], 4) == [] and _chain(table, [5], 4) == []  # nothing ever followed 8 or 5
    assert _chain(CorpusNgram.build([[4, 9], [4, 6]], order=1), [4], 1) == [6]  # a tie goes to the smaller id


def test_trees_take_the_most_probable_paths_first():
    table = CorpusNgram.build([[1, 2, 3, 1, 2, 4], [1, 2, 3], [7, 2, 5]], order=2)
    # After (1, 2): 3 p 2/4, 4 p 1/4 (count / (occurrences + 1)); after (2, 3): 1 p 1/2; (3, 1): 2 p 1/2;
    # (2, 4) and 4 were never followed. Best-first: [3] .5, [4] .25, [3 1] .25, [3 1 2] .125, then
    # [3 1 2 3] .0625 and [3 1 2 4] .031; the tree is given as its leaves, in the order they were taken.
    assert table.tree([5, 1, 2], 2) == [[3], [4]]
    assert table.tree([5, 1, 2], 4) == [[4], [3, 1, 2]]
    assert table.tree([5, 1, 2], 6) == [[4], [3, 1, 2, 3], [3, 1, 2, 4]]
    assert table.tree([5, 1, 2], 6, width=1) == [[3, 1, 2, 3, 1, 2]]
    assert table.successors([9, 9, 2]) == ((3, 4, 5), (0.4, 0.2, 0.2))  # 2 alone: seen 4 times
    assert table.tree([5], 4) == [] and table.tree([5, 1, 2], 0) == []


def test_prepared_tables_draft_as_they_did():
    """`prepare` (a server's load) builds what the first draft would; the drafts are the same either way."""
    sequences = [[1, 2, 3, 1, 2, 4], [1, 2, 3], [7, 2, 5]]
    lazy, ready = CorpusNgram.build(sequences, order=2), CorpusNgram.build(sequences, order=2)
    assert ready.prepare() is ready and ready.prepare() is ready  # built once; a second call is free
    for context in ([5, 1, 2], [9, 9, 2], [9, 7, 2], [5]):
        assert ready.successors(context) == lazy.successors(context)
        assert ready.scored_tree(context, 6) == lazy.scored_tree(context, 6)


def test_tables_equal_counting_by_hand_on_random_sequences():
    rng = random.Random(0)
    seqs = [[rng.randrange(6) for _ in range(rng.randrange(1, 30))] for _ in range(40)]
    table = CorpusNgram.build(seqs, order=3, top_k=3)
    for n in range(1, 4):
        counts = defaultdict(Counter)
        for s in seqs:
            for i in range(n, len(s)):
                counts[tuple(s[i - n : i])][s[i]] += 1
        ctx, totals, starts, nxt, cnt = table.tables[n - 1]
        assert len(ctx) == len(counts)
        for row, total, a, b in zip(ctx.tolist(), totals.tolist(), starts[:-1].tolist(), starts[1:].tolist()):
            c = counts[tuple(row)]
            assert total == sum(c.values())
            assert list(zip(nxt[a:b].tolist(), cnt[a:b].tolist())) == sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:3]


def _arrays(table: CorpusNgram) -> list[list[list]]:
    return [[a.tolist() for a in t] for t in table.tables]


def test_merged_tables_count_both_texts():
    """A continued head's table (head.init_from): the old table's counts and the new answers' summed. Where
    top_k holds every successor that is counting both texts at once; where it cuts, each context's
    occurrences are still exact and its kept successors are the largest sums of what each table kept."""
    rng = random.Random(1)
    old = [[rng.randrange(6) for _ in range(rng.randrange(1, 30))] for _ in range(40)]
    new = [[rng.randrange(8) for _ in range(rng.randrange(1, 30))] for _ in range(25)]
    wide = CorpusNgram.build(old, order=3, top_k=8).merged(CorpusNgram.build(new, order=3, top_k=8))
    assert _arrays(wide) == _arrays(CorpusNgram.build(old + new, order=3, top_k=8)) and len(wide) > len(CorpusNgram.build(old, 3))
    a, b = CorpusNgram.build(old, order=3, top_k=2), CorpusNgram.build(new, order=3, top_k=2)
    cut, both = a.merged(b), CorpusNgram.build(old + new, order=3, top_k=2)
    assert cut.top_k == 2 and [t[0].tolist() for t in cut.tables] == [t[0].tolist() for t in both.tables]
    assert [t[1].tolist() for t in cut.tables] == [t[1].tolist() for t in both.tables]  # occurrences exact
    for n in range(1, 4):
        kept = defaultdict(Counter)
        for t in (a, b):
            ctx, _, starts, nxt, cnt = t.tables[n - 1]
            for row, i, j in zip(ctx.tolist(), starts[:-1].tolist(), starts[1:].tolist()):
                kept[tuple(row)].update(dict(zip(nxt[i:j].tolist(), cnt[i:j].tolist())))
        ctx, _, starts, nxt, cnt = cut.tables[n - 1]
        for row, i, j in zip(ctx.tolist(), starts[:-1].tolist(), starts[1:].tolist()):
            assert list(zip(nxt[i:j].tolist(), cnt[i:j].tolist())) == sorted(kept[tuple(row)].items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    # An order only one table holds (or one whose answers were all shorter than it) is that table's.
    short = CorpusNgram.build([[1, 2]], order=3)
    assert _arrays(short.merged(CorpusNgram.build(old, order=3))) == _arrays(CorpusNgram.build(old + [[1, 2]], order=3))
    deeper = CorpusNgram.build(new, order=2).merged(CorpusNgram.build(old, order=3))
    assert deeper.order == 3 and _arrays(deeper)[2] == _arrays(CorpusNgram.build(old, order=3))[2]


def test_only_answers_are_counted_and_no_ngram_spans_two():
    prompt_then_answers = Example(input_ids=[50, 51, 1, 2, 60, 61, 3, 4], loss_mask=[0, 0, 1, 1, 0, 0, 1, 1], source="x:1")
    table = CorpusNgram.of_examples([prompt_then_answers], order=2)
    assert table.tree([1], 3) == [[2]]  # (2) -> 60 would span the next prompt
    assert table.tree([50], 1) == [] and table.tree([3], 1) == [[4]]


def test_saved_table_reloads_and_damage_is_one_clear_error(tmp_path):
    rng = random.Random(1)
    table = CorpusNgram.build([[rng.randrange(50) for _ in range(200)] for _ in range(5)], order=4)
    assert CorpusNgram.load(tmp_path) is None  # a head saved without one
    path = table.save(tmp_path)
    assert path.name == FILE_NAME
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # the umask's mode, as every file a head saves
    again = CorpusNgram.load(tmp_path)
    assert again.order == 4 and len(again) == len(table)
    for _ in range(20):
        context = [rng.randrange(50) for _ in range(5)]
        assert again.tree(context, 8) == table.tree(context, 8)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CorpusNgramError, match=FILE_NAME) as e:
        CorpusNgram.load(tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(CorpusNgramError, match="order"):
        CorpusNgram.build([[1, 2]], order=0)


def test_counting_stops_at_the_token_cap():
    examples = [Example(input_ids=[i, i + 1, i + 2], loss_mask=[1, 1, 1], source=f"x:{i}") for i in (10, 20, 30)]
    table = CorpusNgram.of_examples(examples, order=1, max_tokens=4)  # the first two examples: 6 tokens >= 4
    assert table.tree([21], 1) == [[22]] and table.tree([31], 1) == []


def test_a_table_of_the_first_format_still_loads_as_its_argmax_chain(tmp_path):
    """Heads trained before the trees saved the argmax alone (contexts, next token, count per order)."""
    table = CorpusNgram.build([[1, 2, 3, 1, 2, 4], [1, 2, 3], [7, 2, 5]], order=2)
    first = {}
    for n, (ctx, _, starts, nxt, cnt) in enumerate(table.tables, start=1):
        first |= {f"contexts_{n}": torch.from_numpy(ctx), f"next_{n}": torch.from_numpy(nxt[starts[:-1]]),
                  f"counts_{n}": torch.from_numpy(cnt[starts[:-1]])}
    save_file(first, str(tmp_path / FILE_NAME), metadata={"order": "2", "format": "headstart-corpus-ngram-1"})
    old = CorpusNgram.load(tmp_path)
    assert old.top_k == 1 and len(old) == len(table)
    assert old.tree([5, 1, 2], 3) == [_chain(table, [5, 1, 2], 3)] == [[3, 1, 2]]
