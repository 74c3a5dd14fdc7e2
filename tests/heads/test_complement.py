import torch

from headstart.heads.complement import draft_weights, free_hits
from headstart.train.data import Example, collate


def _example(prompt: list[int], answer: list[int]) -> Example:
    return Example(prompt + answer, [0] * len(prompt) + [1] * len(answer), "test")


def test_lookup_marks_a_token_copied_after_a_match():
    # Prompt 5 6 7; the answer repeats "6 7" after 5: once 5 6 is written, lookup copies 7.
    ex = _example([5, 6, 7], [9, 5, 6, 7])
    (marks,) = free_hits([ex], folds=1)
    # The single fold counts its own answer into the table, so every answer bigram is known;
    # what matters here is lookup: position 6 (token 7) follows 5 6, seen at the prompt's start.
    assert marks[:3] == [False, False, False]  # prompt tokens are never marked
    assert marks[6] is True


def test_cross_fitting_keeps_an_answer_out_of_its_own_table():
    # Two folds: answer A's n-grams appear only in A, answer B's only in B. Nothing in either is
    # predictable from the other's table, and neither repeats its prompt: no marks at all.
    a = _example([1], [10, 11, 12, 13])
    b = _example([2], [20, 21, 22, 23])
    assert free_hits([a, b], folds=2) == [[False] * 5, [False] * 5]
    # With one fold the table holds each answer itself: every answer token after the first is marked.
    same = free_hits([a, b], folds=1)
    assert same[0] == [False, False, True, True, True]


def test_the_table_of_other_answers_marks_a_shared_phrase():
    # The phrase 30 31 32 occurs in three answers; fold 0 = {0, 2}, fold 1 = {1}. Answer 1 is marked
    # by the table of answers 0 and 2, where 30 -> 31 and 31 -> 32 were counted.
    rows = [_example([1], [30, 31, 32]), _example([2], [30, 31, 32, 40]), _example([3], [30, 31, 32])]
    marks = free_hits(rows, folds=2)
    assert marks[1] == [False, False, True, True, False]


def test_weights_reach_the_batch_and_padding_weighs_nothing():
    rows = [_example([1], [30, 31, 32]), _example([2], [30, 31, 32, 40])]
    weights = draft_weights([[False, False, True, True], [False, True, False, True, False]], 0.25)
    assert weights[0] == [1.0, 1.0, 0.25, 0.25]
    for example, w in zip(rows, weights):
        example.draft_weight = w
    batch = collate([e.row() for e in rows])
    assert batch["draft_weight"].shape == batch["input_ids"].shape
    assert torch.equal(batch["draft_weight"][0], torch.tensor([1.0, 1.0, 0.25, 0.25, 0.0]))
    assert "draft_weight" not in collate([Example([1, 2], [0, 1], "x").row()])
