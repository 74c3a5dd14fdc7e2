"""The corpus n-gram table: argmax continuations of the training answers, saved with a head."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest

from headstart.heads.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.train.data import Example


def test_drafts_follow_the_most_frequent_continuation_backing_off_to_shorter_contexts():
    table = CorpusNgram.build([[1, 2, 3, 1, 2, 4], [1, 2, 3], [7, 2, 5]], order=2)
    assert table.draft([5, 1, 2], 3) == [3, 1, 2]  # (1, 2) -> 3 twice, 4 once; then (2, 3) -> 1, (3, 1) -> 2
    assert table.draft([9, 7, 2], 1) == [5]  # the longest context that was seen decides: (7, 2) -> 5
    assert table.draft([9, 9, 2], 1) == [3]  # (9, 2) never seen: 2 alone -> 3 (twice) before 4 and 5
    assert table.draft([9, 8], 4) == [] and table.draft([5], 4) == []  # nothing ever followed 8 or 5
    assert CorpusNgram.build([[4, 9], [4, 6]], order=1).draft([4], 1) == [6]  # a tie goes to the smaller id


def test_tables_equal_counting_by_hand_on_random_sequences():
    rng = random.Random(0)
    seqs = [[rng.randrange(6) for _ in range(rng.randrange(1, 30))] for _ in range(40)]
    table = CorpusNgram.build(seqs, order=3)
    for n in range(1, 4):
        counts = defaultdict(Counter)
        for s in seqs:
            for i in range(n, len(s)):
                counts[tuple(s[i - n : i])][s[i]] += 1
        expected = {ctx: min(c, key=lambda t: (-c[t], t)) for ctx, c in counts.items()}
        ctx, nxt, cnt = table.tables[n - 1]
        got = {tuple(row): int(t) for row, t in zip(ctx.tolist(), nxt.tolist())}
        assert got == expected
        assert all(int(k) == counts[tuple(row)][int(t)] for row, t, k in zip(ctx.tolist(), nxt.tolist(), cnt.tolist()))


def test_only_answers_are_counted_and_no_ngram_spans_two():
    prompt_then_answers = Example(input_ids=[50, 51, 1, 2, 60, 61, 3, 4], loss_mask=[0, 0, 1, 1, 0, 0, 1, 1], source="x:1")
    table = CorpusNgram.of_examples([prompt_then_answers], order=2)
    assert table.draft([1], 3) == [2]  # (2) -> 60 would span the next prompt
    assert table.draft([50], 1) == [] and table.draft([3], 1) == [4]


def test_saved_table_reloads_and_damage_is_one_clear_error(tmp_path):
    rng = random.Random(1)
    table = CorpusNgram.build([[rng.randrange(50) for _ in range(200)] for _ in range(5)], order=4)
    assert CorpusNgram.load(tmp_path) is None  # a head saved without one
    path = table.save(tmp_path)
    assert path.name == FILE_NAME
    again = CorpusNgram.load(tmp_path)
    assert again.order == 4 and len(again) == len(table)
    for _ in range(20):
        context = [rng.randrange(50) for _ in range(5)]
        assert again.draft(context, 6) == table.draft(context, 6)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CorpusNgramError, match=FILE_NAME) as e:
        CorpusNgram.load(tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(CorpusNgramError, match="order"):
        CorpusNgram.build([[1, 2]], order=0)


def test_counting_stops_at_the_token_cap():
    examples = [Example(input_ids=[i, i + 1, i + 2], loss_mask=[1, 1, 1], source=f"x:{i}") for i in (10, 20, 30)]
    table = CorpusNgram.of_examples(examples, order=1, max_tokens=4)  # the first two examples: 6 tokens >= 4
    assert table.draft([21], 1) == [22] and table.draft([31], 1) == []
