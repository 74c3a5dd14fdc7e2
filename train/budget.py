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


def seconds_per_step(module: TrainingModule, dataset: ExampleDataset, cfg: TrainConfig) -> float:
    """Time two forward/backward passes on a real batch, to turn a time budget into steps.

    The timed batch's cost is scaled to an average batch by tokens: batches group similar lengths,
    so an average one holds about batch_size x the mean length (timing whatever batch comes first
    as if it were typical misjudged the steps by up to 2x on the SmolLM2 corpus).
    """
    target = module.target
    rows = list(range(min(cfg.batch_size, len(dataset))))
    lengths = dataset.lengths
    scale = (sum(lengths) / len(lengths)) / max(lengths[i] for i in rows)
    batch = collate([dataset[i] for i in rows])
    batch = {k: v.to(target.device) if torch.is_tensor(v) else v for k, v in batch.items()}
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16(cfg, target) and target.device.type == "cpu"):
            loss, _ = module(**batch)
        loss.backward()
        times.append(time.perf_counter() - t0)
    module.zero_grad(set_to_none=True)
    return min(times) * scale * 1.1  # optimizer and logging overhead


def steps_in_budget(module: TrainingModule, dataset: ExampleDataset, cfg: TrainConfig) -> int:
    """Optimizer steps that fit train.max_minutes (at most train.epochs over the data), by timing two."""
    per_step = seconds_per_step(module, dataset, cfg) * cfg.grad_accum
    by_time = int(cfg.max_minutes * 60 / per_step)
    by_epochs = math.ceil(len(dataset) * cfg.epochs / (cfg.batch_size * cfg.grad_accum))
    return max(1, min(by_time, by_epochs))
