"""Training a head on the frozen target with `transformers.Trainer`.

Only the head is handed to the Trainer as its model, so the optimizer, DeepSpeed, gradient
accumulation, schedules, `report_to` and checkpoint/resume all act on the head alone. The target
runs inside `compute_loss` under `torch.no_grad()` (online features). Checkpoints hold the head
only (config.json + model.safetensors, plus the Trainer's optimizer and state files).
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

import headstart.heads as heads_registry
from headstart.config import Recipe, recipe_to_dict
from headstart.heads.checkpoint import CONFIG_NAME
from headstart.target import Target
from headstart.train.data import ExampleDataset, build_examples, collate, split


class TimeBudget(TrainerCallback):
    """Stop cleanly (and save) when the wall-clock budget is spent."""

    def __init__(self, minutes: float):
        self.deadline = time.monotonic() + minutes * 60

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() >= self.deadline:
            control.should_training_stop = True
            control.should_save = True
        return control


class HeadTrainer(Trainer):
    """Trainer whose model is the head; the target supplies features inside compute_loss."""

    def __init__(self, target: Target, loss_decay: float, **kwargs):
        super().__init__(**kwargs)
        self.target = target
        self.loss_decay = loss_decay
        self._metrics: dict[str, list[float]] = defaultdict(list)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        with torch.no_grad():
            features = self.target(inputs["input_ids"], attention_mask=inputs["attention_mask"])
        loss, metrics = model.loss(features.hidden, inputs["input_ids"], inputs["loss_mask"], self.loss_decay)
        for k, v in metrics.items():
            self._metrics[k].append(v)
        return (loss, None) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self._metrics and "loss" in logs:
            logs.update({k: round(sum(v) / len(v), 4) for k, v in self._metrics.items()})
            self._metrics.clear()
        super().log(logs, start_time)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if self.args.should_save:
            self.accelerator.unwrap_model(self.model).save_pretrained(output_dir or self.args.output_dir, self.target)


def last_complete_checkpoint(output_dir: str | Path) -> str | None:
    """The newest checkpoint-N with both a head config and the Trainer's state (written last)."""
    found = []
    for path in Path(output_dir).glob("checkpoint-*"):
        step = path.name.split("-")[-1]
        if step.isdigit() and (path / CONFIG_NAME).is_file() and (path / "trainer_state.json").is_file():
            found.append((int(step), str(path)))
    return max(found)[1] if found else None


def frequent_tokens(examples, n: int, vocab_size: int) -> torch.Tensor:
    """The n most frequent assistant tokens of `examples`, most frequent first (ties by id)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for e in examples:
        ids = torch.tensor(e.input_ids)[torch.tensor(e.loss_mask, dtype=torch.bool)]
        counts += torch.bincount(ids, minlength=vocab_size)
    n = min(n, vocab_size)
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))[:n]
    return torch.tensor(order, dtype=torch.long)


def _seconds_per_step(target: Target, heads, dataset, batch_size: int, decay: float, bf16: bool) -> float:
    """Time two forward/backward passes on real batches, to turn a time budget into steps."""
    batch = collate([dataset[i] for i in range(min(batch_size, len(dataset)))])
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16 and target.device.type == "cpu"):
            features = target(batch["input_ids"], attention_mask=batch["attention_mask"])
            loss, _ = heads.loss(features.hidden, batch["input_ids"], batch["loss_mask"], decay)
        loss.backward()
        times.append(time.perf_counter() - t0)
    heads.zero_grad(set_to_none=True)
    return min(times) * 1.1  # optimizer and logging overhead


def train(recipe: Recipe, target: Target, heads=None) -> dict:
    """Train the recipe's head on `target`; returns a summary. The final head is in output_dir/final."""
    cfg, hcfg = recipe.train, recipe.head
    torch.manual_seed(cfg.seed)
    examples, data_stats = build_examples(
        target.tokenizer, recipe.data.train_files, recipe.data.max_length, recipe.data.limit
    )
    train_ex, eval_ex = split(examples, recipe.data.eval_size, recipe.data.seed)
    if heads is None:
        options = {k: v for k, v in vars(hcfg).items() if k not in ("kind", "draft_vocab_size")}
        if hcfg.draft_vocab_size:
            options["draft_vocab"] = frequent_tokens(train_ex, hcfg.draft_vocab_size, target.vocab_size)
        heads = heads_registry.build(hcfg.kind, target, **options)
    heads.float().train()
    dataset = ExampleDataset(train_ex)

    max_steps = cfg.max_steps
    if cfg.max_minutes is not None and max_steps <= 0:
        per_step = _seconds_per_step(target, heads, dataset, cfg.batch_size, cfg.loss_decay, cfg.bf16) * cfg.grad_accum
        by_time = int(cfg.max_minutes * 60 / per_step)
        by_epochs = math.ceil(len(dataset) * cfg.epochs / (cfg.batch_size * cfg.grad_accum))
        max_steps = max(1, min(by_time, by_epochs))
    resume = cfg.resume_from_checkpoint
    if resume == "last":
        resume = last_complete_checkpoint(cfg.output_dir)

    args = TrainingArguments(
        output_dir=cfg.output_dir,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        lr_scheduler_type=cfg.scheduler,
        warmup_steps=cfg.warmup_ratio,
        num_train_epochs=cfg.epochs,
        max_steps=max_steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        max_grad_norm=cfg.max_grad_norm,
        bf16=cfg.bf16,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        report_to=[] if cfg.report_to == "none" else [cfg.report_to],
        seed=cfg.seed,
        dataloader_num_workers=cfg.dataloader_workers,
        remove_unused_columns=False,
        train_sampling_strategy="group_by_length",
        deepspeed=cfg.deepspeed,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=False,
    )
    callbacks = [TimeBudget(cfg.max_minutes * 1.15)] if cfg.max_minutes else []
    pad_id = target.tokenizer.pad_token_id or 0 if target.tokenizer is not None else 0
    trainer = HeadTrainer(
        target=target,
        loss_decay=cfg.loss_decay,
        model=heads,
        args=args,
        train_dataset=dataset,
        data_collator=lambda rows: collate(rows, pad_id),
        callbacks=callbacks,
    )
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start

    heads.eval()
    from headstart.train.measure import measure_accuracy

    accuracy = measure_accuracy(target, heads, eval_ex, batch_size=cfg.batch_size)
    heads.options["accuracy"] = accuracy["topk_accuracy"]
    final = Path(cfg.output_dir) / "final"
    summary = {
        "steps": result.global_step,
        "train_seconds": round(seconds, 1),
        "train_loss": round(result.training_loss, 4),
        "data": data_stats,
        "train_examples": len(train_ex),
        "heldout_examples": len(eval_ex),
        "heldout": {k: v for k, v in accuracy.items() if k != "topk_accuracy"},
    }
    heads.save_pretrained(final, target, extra={"training": summary, "recipe": recipe_to_dict(recipe)})
    (Path(cfg.output_dir) / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    summary["final"] = str(final)
    return summary
