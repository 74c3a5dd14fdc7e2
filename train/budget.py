"""Sizing the schedule: how many optimizer steps a run plans, by timing real steps for a time budget.

A recipe with `train.max_minutes` and no `train.max_steps` trains for as many steps as fit the
budget (at most `train.epochs` over the data); the learning-rate schedule spans those steps, so it
ends as the budget does. A resumed run keeps the count its first session planned.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from headstart.config import TrainConfig
from headstart.train.data import ExampleDataset, collate
from headstart.train.hf_trainer import TrainingModule, use_bf16
from headstart.train.resume import planned_steps


def schedule_steps(cfg: TrainConfig, module: TrainingModule, dataset: ExampleDataset, resume: Path | None) -> int:
    """The run's max_steps: train.max_steps, or the steps that fit train.max_minutes when that is set
    and max_steps is not (<= 0). A partitioned target (ZeRO-3) runs only inside DeepSpeed's engine,
    which does not exist yet: nothing can be timed, so its schedule spans train.epochs and the time
    budget only stops training at its deadline."""
    if cfg.max_minutes is None or cfg.max_steps > 0 or module.target.partitioned:
        return cfg.max_steps
    # A resumed budgeted run keeps the schedule it planned when it started (timing again would change it).
    return planned_steps(resume) if resume is not None else steps_in_budget(module, dataset, cfg)


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
    and scaled by length). A machine whose speed drifts during the run (2x within minutes on shared
    2-core machines) still makes any count planned at the start wrong: the run then ends early, or at
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
    by_epochs = math.ceil(len(dataset) * cfg.epochs / (cfg.batch_size * cfg.grad_accum))
    return max(1, min(by_time, by_epochs))
