"""The corpus proposer vLLM serves (serve/proposer.py): its chain by hand, and the counts it
predicts for vLLM along a text. vLLM itself runs it in tests/end_to_end/test_vllm.py."""

from __future__ import annotations

from headstart.decode.corpus import CorpusNgram
from headstart.serve.proposer import along_text_counts, chain_draft

# Answers the table is counted from: after 7 comes 8 9 (twice), after 3 comes 4 5.
TABLE = CorpusNgram.build([[7, 8, 9], [7, 8, 9], [3, 4, 5]], order=2)


def test_a_bigram_match_first_then_the_corpus_then_a_single_token_match():
    assert chain_draft(TABLE, [1, 2, 6, 1, 2], 3) == [6, 1, 2]  # (1, 2) occurred before: what followed it
    assert chain_draft(TABLE, [7, 5, 1, 7], 3) == [8, 9]  # no bigram (1, 7) before: the table's chain after 7
    assert chain_draft(TABLE, [6, 5, 1, 6], 2) == [5, 1]  # neither: 6 alone occurred before
    assert chain_draft(TABLE, [1, 2, 6, 1, 2], 1) == [6] and chain_draft(TABLE, [11, 12], 4) == []
    assert chain_draft(TABLE, [], 3) == [] and chain_draft(TABLE, [1, 2, 1, 2], 0) == []


def test_counts_along_a_text_follow_each_last_accepted_position():
    # Prompt [3, 7]; the text 2 8 9 4 1: the first token comes from the prefill. After [3, 7, 2]: 2 never
    # occurred before nor in the table -> no draft, 8 written. After [.., 2, 8]: the table's 8 -> 9 (and 9
    # was never followed: a chain of 1), accepted, 4 written as the bonus. After [.., 9, 4]: 4 -> 5, rejected.
    counts = along_text_counts(TABLE, [[3, 7]], [[2, 8, 9, 4, 1]], k=2)
    assert counts == {"drafts": 2, "draft_tokens": 2, "accepted": 1, "accepted_per_pos": [1, 0]}
    # A text that copies: prompt [1, 2, 9], text 1 2 9 1 2. After [1, 2, 9, 1]: no earlier (9, 1), nothing after
    # 1 in the table, 1 alone occurred -> 2 9, both accepted, 1 written. After [.., 9, 1]: (9, 1) now occurred
    # -> 2 9; 2 accepted, where the text ends.
    counts = along_text_counts(TABLE, [[1, 2, 9]], [[1, 2, 9, 1, 2]], k=2)
    assert counts == {"drafts": 2, "draft_tokens": 4, "accepted": 3, "accepted_per_pos": [2, 1]}


def test_hybrid_chain_copies_then_trusts_a_sure_table_then_the_head():
    from headstart.serve.proposer import hybrid_chain

    # 7 -> 8 twice (probability 2/3: the table keeps a share for what it never saw); 3 -> 4 or 6 (1/3 each)
    table = CorpusNgram.build([[7, 8, 9], [7, 8, 9], [3, 4, 5], [3, 6, 5]], order=2)
    assert hybrid_chain(table, [1, 2, 6, 1, 2], 3, head_first=40) == [6, 1, 2]  # (1, 2) occurred before: copied
    assert hybrid_chain(table, [5, 1, 7], 3, head_first=40) == [8, 9]  # 8 after 7 at 2/3 >= CORPUS_FIRST: the table's chain
    assert hybrid_chain(table, [5, 1, 3], 2, head_first=40) == [40]  # after 3 the table is split (1/3 each): the head's
    # nothing copied and nothing known after 11: the head's draft, then the table's chain after it
    assert hybrid_chain(table, [5, 1, 11], 3, head_first=7) == [7, 8, 9]
    assert hybrid_chain(table, [5, 1, 11], 3, head_first=40) == [40]  # nothing follows 40 in the table
    assert hybrid_chain(table, [5, 1, 11], 1, head_first=7) == [7]
    assert hybrid_chain(None, [5, 1, 11], 3, head_first=7) == [7]  # no table: lookup, else the head
    assert hybrid_chain(None, [1, 2, 6, 1, 2], 2, head_first=7) == [6, 1]
    assert hybrid_chain(table, [5, 1, 11], 3, head_first=None) == [] and hybrid_chain(table, [], 3, head_first=7) == []


def test_a_split_table_below_the_threshold_leaves_the_step_to_the_head():
    from headstart.serve.proposer import CORPUS_FIRST, hybrid_chain

    table = CorpusNgram.build([[3, 4], [3, 5], [3, 6], [3, 6]], order=2)  # 6 after 3 at 2/5
    assert table.successors([3])[1][0] < CORPUS_FIRST <= CorpusNgram.build([[3, 6]] * 3, order=2).successors([3])[1][0]
    assert hybrid_chain(table, [9, 3], 2, head_first=4) == [4]  # below the threshold: the head's 4, nothing after 4
    assert hybrid_chain(CorpusNgram.build([[3, 6]] * 3, order=2), [9, 3], 2, head_first=4) == [6]


def test_a_rows_index_follows_its_request_and_restarts_for_another():
    """RowIndexes: each serving row's index extended by the tokens it gained, built anew when the row now
    holds another request; the drafts are those of an index built over the whole context at every step."""
    import random

    from headstart.decode.lookup import NgramIndex
    from headstart.serve.proposer import RowIndexes, hybrid_chain

    rng = random.Random(3)
    indexes = RowIndexes()
    for request in range(6):  # requests take turns in two rows; each grows by 1-4 tokens a step
        row, tokens = request % 2, [rng.randrange(6) for _ in range(rng.randrange(1, 9))]
        for _ in range(25):
            tokens += [rng.randrange(6) for _ in range(rng.randrange(1, 5))]
            index = indexes.of(row, tokens[:-1])
            assert index.tokens == tokens[:-1]
            assert chain_draft(TABLE, tokens, 4, index=index) == chain_draft(TABLE, tokens, 4)
            assert hybrid_chain(TABLE, tokens, 4, 9, index) == hybrid_chain(TABLE, tokens, 4, 9)
        kept = indexes.rows[row]
        assert indexes.of(row, tokens[:-1]) is kept  # the same request again: nothing rebuilt
    fresh = indexes.of(0, [5, 4, 3])  # another request in row 0: not a continuation of what it held
    assert fresh.tokens == [5, 4, 3] and fresh.latest == NgramIndex(2, [5, 4, 3]).latest
