"""Sizing the schedule of a run with a time budget (`train.max_minutes`, no `train.max_steps`).

It trains for as long as the budget, at most `train.epochs` over the data. Real batches are timed at
the start to tell which ends first. When the budget does, the learning rate follows the clock
(`Plan.clock_seconds`, `ClockSchedule`): it warms up, decays and ends with the budget whatever the
machine's speed does meanwhile; a count of steps planned from that timing went wrong on the shared
2-core machines, whose speed drifts within minutes (a run that sped up finished early, one that slowed
down stopped with its schedule unfinished: docs/results.md#the-demo-budget-eagle-3-head-batches-of-4). When the epochs end first, the schedule spans
their steps. A resumed run keeps what its first session planned.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers.trainer import SCHEDULER_NAME

from headstart.config import TrainConfig
from headstart.train.data import ExampleDataset, collate
from headstart.train.hf_trainer import CLOCK_SCHEDULES, TrainingModule, use_bf16
from headstart.train.resume import planned_steps


@dataclass(frozen=True)
class Plan:
    """How a run is scheduled: HF's max_steps, and the time budget its learning rate follows
    (`ClockSchedule`, train/hf_trainer.py), None for a schedule over the steps."""

    max_steps: int
    clock_seconds: float | None = None


def plan_schedule(cfg: TrainConfig, module: TrainingModule, dataset: ExampleDataset, resume: Path | None) -> Plan:
    """The run's schedule. train.max_steps, or without a time budget train.epochs: over the steps.
    With train.max_minutes (and no max_steps), when the budget ends before train.epochs do (timed on
    real batches): the learning rate follows the clock over the budget and training stops with it,
    however the machine's speed changes meanwhile (max_steps, the epochs' steps, is only a bound).
    Where the epochs end first, or under DeepSpeed, or with a schedule the clock cannot drive: the
    steps that fit, over the steps. A resumed budgeted run keeps what its first session planned.
    A partitioned target (ZeRO-3) runs only inside DeepSpeed's engine, which does not exist yet:
    nothing can be timed, so its schedule spans train.epochs and the budget only stops training."""
    if cfg.max_minutes is None or cfg.max_steps > 0 or module.target.partitioned:
        return Plan(cfg.max_steps)
    if resume is not None:  # timing again would change the schedule
        return Plan(planned_steps(resume), clock_of(resume))
    by_epochs = epoch_steps(len(dataset), cfg)
    by_time = steps_in_budget(module, dataset, cfg)
    if by_time < by_epochs and cfg.deepspeed is None and cfg.scheduler in CLOCK_SCHEDULES:
        return Plan(by_epochs, cfg.max_minutes * 60)
    return Plan(by_time)


def clock_of(checkpoint: Path) -> float | None:
    """The time budget a checkpoint's schedule followed (its saved ClockSchedule state), else None."""
    path = checkpoint / SCHEDULER_NAME  # HF's file for the schedule's state
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("seconds") if isinstance(state, dict) and "spent_before" in state else None


def epoch_steps(examples: int, cfg: TrainConfig) -> int:
    """Optimizer steps in train.epochs over `examples`."""
    return math.ceil(examples * cfg.epochs / (cfg.batch_size * cfg.grad_accum))


def timing_batches(lengths: list[int], batch_size: int, count: int = 3) -> list[list[int]]:
    """Row indices of `count` batches to time: rows of similar length, as the length-grouped sampler
    batches them, from the middle of each of `count` equal bins of the rows sorted by length (short,
    typical, long), so that their mean cost is a typical step's."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    size = max(1, min(batch_size, len(order)))
    groups = [order[i : i + size] for i in range(0, max(1, len(order) - size + 1), size)]
    return [groups[int((i + 0.5) * len(groups) / count)] for i in range(count)]


def seconds_per_step(module: TrainingModule, dataset: ExampleDataset, cfg: TrainConfig) -> float:
    """Time forward/backward passes on real batches, to turn a time budget into steps.

    One untimed pass warms up (the shortest rows), then three batches are timed once each: short,
    typical and long rows (`timing_batches`), each a width the run has not seen yet, as most of a
    run's first steps are. Their mean is a step (it used to be one batch of the first rows, timed twice
    and scaled by length). A machine whose speed drifts during the run (as shared 2-core machines do
    within minutes) still makes any count planned at the start wrong: the run then ends early, or at
    the 1.15 x cap with its schedule unfinished.
    """
    target = module.target
    lengths = dataset.lengths

    def batch_of(rows: list[int]) -> dict:
        batch = collate([dataset[i] for i in rows])
        return {k: v.to(target.device) if torch.is_tensor(v) else v for k, v in batch.items()}

    def one_pass(batch: dict) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16(cfg, target) and target.device.type == "cpu"):
            loss, _ = module(**batch)
        loss.backward()
        return time.perf_counter() - t0

    shortest = sorted(range(len(lengths)), key=lengths.__getitem__)[: max(1, min(cfg.batch_size, len(lengths)))]
    one_pass(batch_of(shortest))  # warm-up: first-call costs no step pays
    times = [one_pass(batch_of(rows)) for rows in timing_batches(lengths, cfg.batch_size)]
    module.zero_grad(set_to_none=True)
    return sum(times) / len(times) * 1.1  # optimizer and logging overhead


def steps_in_budget(module: TrainingModule, dataset: ExampleDataset, cfg: TrainConfig) -> int:
    """Optimizer steps that fit train.max_minutes (at most train.epochs over the data), by timing a few."""
    per_step = seconds_per_step(module, dataset, cfg) * cfg.grad_accum
    by_time = int(cfg.max_minutes * 60 / per_step)
    return max(1, min(by_time, epoch_steps(len(dataset), cfg)))
