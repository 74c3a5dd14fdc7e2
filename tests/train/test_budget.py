"""Sizing a run's schedule (train/budget.py): explicit steps win, a time budget becomes the steps
that fit it (timed on real forward/backward passes) capped by train.epochs, and a resumed budgeted
run keeps the count its first session planned instead of timing again."""

import json
import math

import pytest
import torch
from transformers.trainer import SCHEDULER_NAME

import headstart as hs
from headstart.recipe import load_recipe
from headstart.train.budget import (
    Plan,
    clock_of,
    plan_schedule,
    seconds_per_step,
    timing_batches,
)
from headstart.train.data import Example, ExampleDataset
from headstart.train.hf_trainer import ClockSchedule, TrainingModule, clock_factor
from headstart.train.resume import TRAINER_STATE
from headstart.train.trainer import train
from tests.helpers import VOCAB, recipe, tiny_target


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
    assert plan_schedule(cfg, module, dataset, None).max_steps == 5
    module, dataset, cfg = setup()  # no budget: -1, the Trainer's own epochs schedule
    assert cfg.max_minutes is None and plan_schedule(cfg, module, dataset, None).max_steps == -1


def test_a_generous_budget_is_capped_by_epochs_and_a_tight_one_follows_the_clock():
    module, dataset, cfg = setup("train.max_minutes=1000", "train.epochs=2", "train.grad_accum=2")
    assert plan_schedule(cfg, module, dataset, None) == Plan(math.ceil(30 * 2 / (4 * 2))) == Plan(8)  # over the steps
    module, dataset, cfg = setup("train.max_minutes=0.00001")  # the budget ends first: the clock, the epochs a bound
    plan = plan_schedule(cfg, module, dataset, None)
    assert plan.max_steps == 8 and plan.clock_seconds == pytest.approx(0.0006)
    module, dataset, cfg = setup("train.max_minutes=0.00001", "train.scheduler=cosine_with_restarts")  # no clock for it
    assert plan_schedule(cfg, module, dataset, None) == Plan(1)  # the steps that fit, at least one


def test_timing_leaves_no_gradients_behind():
    """The timed passes run backward; the optimizer's first step must not see their gradients."""
    module, dataset, cfg = setup("train.max_minutes=1")
    assert seconds_per_step(module, dataset, cfg) > 0
    assert all(p.grad is None for p in module.parameters())


def test_a_resumed_budgeted_run_keeps_the_steps_it_planned(tmp_path):
    module, dataset, cfg = setup("train.max_minutes=1000")
    assert plan_schedule(cfg, module, dataset, None).max_steps == math.ceil(30 / 4) == 8
    (tmp_path / TRAINER_STATE).write_text(json.dumps({"global_step": 4, "max_steps": 7}))
    assert plan_schedule(cfg, module, dataset, tmp_path).max_steps == 7


def test_timed_batches_are_short_typical_and_long_rows_of_similar_length():
    lengths = [(i * 37) % 100 + 10 for i in range(100)]  # 10..109, shuffled
    batches = timing_batches(lengths, 4)
    assert len(batches) == 3 and all(len(b) == 4 for b in batches)
    widths = [[lengths[i] for i in b] for b in batches]
    assert all(max(w) - min(w) == 3 for w in widths)  # neighbours in length, as the sampler groups them
    assert [min(w) for w in widths] == [26, 58, 90]  # the middle of the short, typical and long thirds
    assert timing_batches([5, 7], 4) == [[0, 1]] * 3  # fewer rows than a batch: all of them


def test_the_clock_schedule_warms_up_decays_and_ends_with_the_budget():
    assert clock_factor(0.025, 0.05, "cosine") == 0.5  # halfway through the warmup
    assert clock_factor(0.05, 0.05, "cosine") == 1.0 and clock_factor(0.525, 0.05, "cosine") == pytest.approx(0.5)
    assert clock_factor(1.0, 0.05, "cosine") == clock_factor(1.7, 0.05, "cosine") == pytest.approx(0.0)
    assert clock_factor(0.525, 0.05, "linear") == pytest.approx(0.5) and clock_factor(2.0, 0.05, "linear") == 0.0
    assert clock_factor(0.01, 0.05, "constant") == 1.0 and clock_factor(0.01, 0.05, "constant_with_warmup") == pytest.approx(0.2)
    assert clock_factor(0.5, 1.0, "cosine") == 0.5 and clock_factor(1.5, 1.0, "cosine") == 0.0  # all warmup


def test_the_clock_goes_on_where_a_checkpoint_stopped(tmp_path):
    """The time spent is saved with the schedule (weights-only loadable), and a resumed run's plan reads its budget."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    clock = ClockSchedule(opt, 60.0, 0.05, "cosine")
    clock.spent_before = 30.0  # as if half the budget had gone by
    torch.save(clock.state_dict(), tmp_path / SCHEDULER_NAME)
    later = ClockSchedule(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0), 60.0, 0.05, "cosine")
    later.load_state_dict(torch.load(tmp_path / SCHEDULER_NAME, weights_only=True))
    assert 30.0 <= later.spent() < 31.0 and 0.5 <= later.fraction() < 0.52
    assert clock_of(tmp_path) == 60.0 and clock_of(tmp_path / "nowhere") is None


def test_a_budget_shorter_than_the_epochs_is_followed_by_the_clock(tmp_path, smol_shaped_target):  # noqa: F811
    """The budget ends before the epochs: the learning rate follows the clock and the run stops with it,
    not at a step count planned from a timing (which a machine's drift made end early or late)."""
    target = smol_shaped_target
    heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
    r = recipe(tmp_path, "train.max_minutes=0.05", "train.epochs=1000", "train.save_steps=100000", "train.corpus_ngram=0",
               "train.logging_steps=1")
    summary = train(r, target, heads)
    epochs_steps = math.ceil(summary.train_examples * 1000 / 4)
    assert 3.0 <= summary.train_seconds < 8.0 and 1 < summary.steps < epochs_steps
    state = json.loads(next((tmp_path / "run").glob("checkpoint-*/trainer_state.json")).read_text())
    rates = [e["learning_rate"] for e in state["log_history"] if "learning_rate" in e]
    # lr 1e-2: up to nearly all of it, then down to nearly nothing as the budget ends (logged after each step)
    assert max(rates) > 0.5e-2 and rates[-1] < 0.05 * max(rates)
    peak = rates.index(max(rates))
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1 :]))
