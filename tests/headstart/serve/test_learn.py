"""The corpus table that learns from served answers (serve/learn.py): before it counts anything it drafts as the
head's table; the counts it adds are training's; it keeps at most its cap of contexts, the least recently used
dropped first; it is saved renamed into place every N answers and continued from on a restart; a learn folder is
never the head folder nor a table that --learn did not write. vLLM learning while it serves:
tests/end_to_end/test_vllm.py (test_served_answers_teach_the_table)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from headstart.decode.corpus import FILE_NAME, CorpusNgram
from headstart.serve.learn import (
    CAP_ENV,
    EVERY_ENV,
    LEARN_ENV,
    MARKER,
    Learner,
    LearningTable,
    learn_folder_refusal,
    learner_from_env,
)


def sequences(n: int, length: int = 30, vocab: int = 40, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(n)]


def contexts_of(seqs: list[list[int]], order: int) -> list[list[int]]:
    """Every context of 1..order tokens in the sequences, and a few never seen."""
    out = [s[i - n : i] for s in seqs for n in range(1, order + 1) for i in range(n, len(s) + 1)]
    return out + [[999], [998, 997]]


def test_before_counting_it_drafts_as_the_table_it_starts_from():
    corpus = CorpusNgram.build(sequences(20), order=3)
    table = LearningTable.of(corpus)
    assert len(table) == len(corpus) and table.prepare() is table  # a server prepares either kind at load
    for context in contexts_of(sequences(5, seed=1), 3):
        assert table.successors(context) == corpus.successors(context), context
        assert table.scored_tree(context, 6) == corpus.scored_tree(context, 6)


def test_counted_answers_give_the_table_training_builds_from_all_of_them():
    """Counting answers one by one into the table of A gives the table of A and the answers counted at once
    (every successor kept: top_k above the vocabulary, so that no count is replaced)."""
    first, answers = sequences(10), sequences(10, seed=2)
    table = LearningTable.of(CorpusNgram.build(first, order=3, top_k=64))
    for answer in answers:
        table.count(answer)
    whole = CorpusNgram.build(first + answers, order=3, top_k=64)
    assert len(table) == len(whole)
    for context in contexts_of(first + answers, 3):
        assert table.successors(context) == whole.successors(context), context


def test_a_later_request_drafts_the_answer_it_learnt():
    table = LearningTable.of(CorpusNgram.build([[1, 2, 3, 4, 5]], order=3))
    answer = [10, 11, 12, 13, 14, 15, 16]
    assert table.tree([10, 11], 4, width=1) == []
    table.count(answer)
    assert table.tree([10, 11], 4, width=1) == [[12, 13, 14, 15]]
    assert table.tree([1, 2], 3, width=1) == [[3, 4, 5]]  # what the corpus held stays


def test_a_successor_the_answers_keep_writing_replaces_the_least_counted_of_a_full_context():
    """Space-Saving: a full context's least counted successor gives way, and the newcomer takes its count."""
    table = LearningTable.of(CorpusNgram.build([[7, 1]] * 5 + [[7, 2]] * 3 + [[7, 3]] * 2 + [[7, 4]], order=1, top_k=4))
    assert table.successors([7])[0] == (1, 2, 3, 4)
    table.count([7, 9])
    assert table.successors([7])[0] == (1, 2, 3, 9)  # 4 (counted once) gave way; 9 holds 1 + 1
    for _ in range(5):
        table.count([7, 9])
    tokens, probs = table.successors([7])
    assert tokens == (9, 1, 2, 3) and probs[0] == pytest.approx(7 / (11 + 6 + 1))


def test_the_cap_drops_the_least_recently_used_contexts_first():
    table = LearningTable(order=2, top_k=4, cap=6)
    table.count([1, 2, 3])  # contexts (1), (2), (1, 2): 3
    table.count([4, 5, 6])  # (4), (5), (4, 5): 6
    table.successors([1, 2])  # (1, 2) used: now the most recent
    table.count([7, 8])  # (7): 7 > 6, the least recently used goes: (1)
    assert len(table) == 6 and table.dropped == 1
    assert table.successors([1]) == ((), ()) and table.successors([1, 2])[0] == (3,)
    table.count([9, 10, 11, 12])  # 5 new contexts: the 5 least recently used go, (1, 2) stays
    assert set(table.seen) == {(1, 2), (9,), (10,), (11,), (9, 10), (10, 11)} and table.dropped == 6
    with pytest.raises(Exception, match="cap must be an integer >= 1"):
        LearningTable(order=2, top_k=4, cap=0)


def test_a_base_table_over_the_cap_keeps_its_shortest_contexts():
    """A head's table larger than the cap keeps its shortest contexts, which every draft backs off to."""
    corpus = CorpusNgram.build(sequences(10), order=3)
    short = len(corpus.tables[0][1])
    table = LearningTable.of(corpus, cap=short)
    assert len(table) == short and all(len(c) == 1 for c in table.seen)


def test_saved_renamed_into_place_and_continued_after_a_restart(tmp_path, monkeypatch):
    """Every N answers (and on save()) the folder gets the table and learned.json, nothing else (written under
    temporary names and renamed); the file is a corpus table any head can carry; a restart with the same
    folder drafts as before, with the same recency, and goes on counting answers."""
    corpus = CorpusNgram.build(sequences(5), order=3)
    folder = tmp_path / "learned"
    monkeypatch.setenv(LEARN_ENV, str(folder))
    monkeypatch.setenv(EVERY_ENV, "3")
    monkeypatch.setenv(CAP_ENV, "500")
    learner = learner_from_env(corpus)
    assert learner.every == 3 and learner.table.cap == 500
    answers = sequences(7, seed=3)
    for answer in answers[:2]:
        learner.learn(answer)
    assert not folder.exists()  # 2 answers: not yet
    learner.learn(answers[2])
    assert sorted(p.name for p in folder.iterdir()) == [FILE_NAME, MARKER]
    for answer in answers[3:]:
        learner.learn([*answer, -1])  # vLLM's placeholders are left out
    learner.save()  # at shutdown
    assert sorted(p.name for p in folder.iterdir()) == [FILE_NAME, MARKER]
    assert json.loads((folder / MARKER).read_text())["answers"] == 7

    restarted = learner_from_env(CorpusNgram.build([[1, 2]], order=3))  # the folder's table, not this one
    assert list(restarted.table.seen) == list(learner.table.seen)  # the same contexts, least recently used first
    plain = CorpusNgram.load(folder)
    for context in contexts_of(answers, 3):
        assert restarted.table.successors(context) == learner.table.successors(context) == plain.successors(context)
    restarted.learn(answers[0])
    restarted.save()
    assert restarted.answers == 8 and json.loads((folder / MARKER).read_text())["answers"] == 8


def test_a_failed_save_warns_and_serving_goes_on(tmp_path, capsys):
    (tmp_path / "a-file").write_text("mine")
    learner = Learner(LearningTable(2, 4), tmp_path / "a-file" / "learned", every=1)
    learner.learn([1, 2, 3])  # the save fails: one warning, no exception
    assert "could not save the learned table" in capsys.readouterr().err
    assert learner.unsaved == 1 and (tmp_path / "a-file").read_text() == "mine"


def test_a_learn_folder_is_never_the_head_folder_nor_a_table_learn_did_not_write(tmp_path):
    head = tmp_path / "head"
    head.mkdir()
    CorpusNgram.build([[1, 2, 3]], order=2).save(head)
    assert "is the head folder" in learn_folder_refusal(head, head)
    assert "did not write" in learn_folder_refusal(head, tmp_path / "another-head")
    (tmp_path / "file").write_text("")
    assert "is not a folder" in learn_folder_refusal(tmp_path / "file", head)
    assert learn_folder_refusal(tmp_path / "new", head) is None
    learner = Learner(LearningTable(2, 4), tmp_path / "learned", every=1)
    learner.learn([1, 2, 3])
    assert learn_folder_refusal(tmp_path / "learned", head) is None  # ours: continued from


def test_learning_is_off_without_the_variable(monkeypatch):
    monkeypatch.delenv(LEARN_ENV, raising=False)
    assert learner_from_env(CorpusNgram.build([[1, 2]], order=2)) is None


def test_a_save_cut_short_leaves_a_temporary_file_the_next_start_removes(tmp_path):
    """A killed process leaves .corpus_ngram.safetensors.<pid>-<hex>.tmp; the next learner on the folder removes
    those of processes no longer running, and nothing else."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "learned"
    folder.mkdir()
    cut = folder / f".{FILE_NAME}.{dead.pid}-0a1b2c3d.tmp"
    live = folder / f".{MARKER}.{os.getpid()}-0a1b2c3d.tmp"
    other = folder / f".notes.{dead.pid}-0a1b2c3d.tmp"
    for path in (cut, live, other):
        path.write_bytes(b"")
    Learner(LearningTable(2, 4), folder)
    assert not cut.exists() and live.exists() and other.exists()
