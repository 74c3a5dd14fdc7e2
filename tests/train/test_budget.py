"""Sizing a run's schedule (train/budget.py): explicit steps win, a time budget becomes the steps
that fit it (timed on real forward/backward passes) capped by train.epochs, and a resumed budgeted
run keeps the count its first session planned instead of timing again."""

import json
import math

import torch

import headstart as hs
from headstart.config import load_recipe
from headstart.train.budget import schedule_steps, seconds_per_step, timing_batches
from headstart.train.data import Example, ExampleDataset
from headstart.train.hf_trainer import TrainingModule
from headstart.train.resume import TRAINER_STATE
from tests.helpers import VOCAB, tiny_target


def setup(*overrides):
    """A Medusa head's TrainingModule on a tiny target, 30 examples of 12-16 tokens, and the train config."""
    target = tiny_target("llama")
    cfg = load_recipe(None, ["train.batch_size=4", "train.bf16=false", *overrides]).train
    heads = hs.heads.build("medusa", target, num_heads=2).float().train()
    g = torch.Generator().manual_seed(0)
    examples = [
        Example(torch.randint(0, VOCAB, (12 + i % 5,), generator=g).tolist(), [0] * 4 + [1] * (8 + i % 5), f"row {i}")
        for i in range(30)
    ]
    return TrainingModule(heads, target, cfg), ExampleDataset(examples), cfg


def test_explicit_steps_and_no_budget_leave_the_schedule_to_the_recipe():
    module, dataset, cfg = setup("train.max_steps=5", "train.max_minutes=10")
    assert schedule_steps(cfg, module, dataset, None) == 5
    module, dataset, cfg = setup()  # no budget: -1, the Trainer's own epochs schedule
    assert cfg.max_minutes is None and schedule_steps(cfg, module, dataset, None) == -1


def test_a_generous_budget_is_capped_by_epochs_and_a_tight_one_still_trains():
    module, dataset, cfg = setup("train.max_minutes=1000", "train.epochs=2", "train.grad_accum=2")
    assert schedule_steps(cfg, module, dataset, None) == math.ceil(30 * 2 / (4 * 2)) == 8
    module, dataset, cfg = setup("train.max_minutes=0.000001")
    assert schedule_steps(cfg, module, dataset, None) == 1


def test_timing_leaves_no_gradients_behind():
    """The timed passes run backward; the optimizer's first step must not see their gradients."""
    module, dataset, cfg = setup("train.max_minutes=1")
    assert seconds_per_step(module, dataset, cfg) > 0
    assert all(p.grad is None for p in module.parameters())


def test_a_resumed_budgeted_run_keeps_the_steps_it_planned(tmp_path):
    module, dataset, cfg = setup("train.max_minutes=1000")
    assert schedule_steps(cfg, module, dataset, None) == math.ceil(30 / 4) == 8
    (tmp_path / TRAINER_STATE).write_text(json.dumps({"global_step": 4, "max_steps": 7}))
    assert schedule_steps(cfg, module, dataset, tmp_path) == 7


def test_timed_batches_are_short_typical_and_long_rows_of_similar_length():
    lengths = [(i * 37) % 100 + 10 for i in range(100)]  # 10..109, shuffled
    batches = timing_batches(lengths, 4)
    assert len(batches) == 3 and all(len(b) == 4 for b in batches)
    widths = [[lengths[i] for i in b] for b in batches]
    assert all(max(w) - min(w) == 3 for w in widths)  # neighbours in length, as the sampler groups them
    assert [min(w) for w in widths] == [26, 58, 90]  # the middle of the short, typical and long thirds
    assert timing_batches([5, 7], 4) == [[0, 1]] * 3  # fewer rows than a batch: all of them
