"""Training a head on the frozen target with `transformers.Trainer`.

The Trainer's model is a `TrainingModule`: the head, plus (Medusa-2, `train.joint`) the target's
LoRA adapters. Its forward takes a collated batch and returns the loss, so the optimizer,
DeepSpeed, DDP under `torchrun`, gradient accumulation, schedules, `report_to` and
checkpoint/resume all act on what trains and nothing else. The frozen target runs inside that
forward under `torch.no_grad()` (online features) or not at all (offline cache); in joint mode it
runs with gradients through its adapters. Checkpoints hold the head only (config.json +
model.safetensors), the adapter beside it in joint mode, plus the Trainer's optimizer and state.
Each checkpoint's config.json also records the recipe's fingerprint (train/resume.py) and what a
resumed run needs to end as the uninterrupted one would: the best checkpoint so far, the metrics
of the logging window in progress, and the loss summed over the steps before it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.integrations import TensorBoardCallback, is_deepspeed_zero3_enabled
from transformers.trainer_pt_utils import LengthGroupedSampler

import headstart.heads as heads_registry
from headstart.adapter import ADAPTER_WEIGHTS, adapter_parameters, add_adapter, set_adapter_weights
from headstart.config import Recipe, RecipeError, TrainConfig, recipe_to_dict
from headstart.heads.checkpoint import CONFIG_NAME, read_config, read_weights, save_heads
from headstart.target import Target, gathered, is_partitioned, resolve_dtype
from headstart.train.data import build_examples, collate, split
from headstart.train.features import batch_features, training_dataset
from headstart.train.joint import BACKBONE_LOSSES, joint_loss, lora_config
from headstart.train.resume import checkpoint_to_resume, clear_earlier_run, planned_steps, run_record


class TimeBudget(TrainerCallback):
    """Stop cleanly (and save) when the wall-clock budget is spent."""

    def __init__(self, minutes: float):
        self.deadline = time.monotonic() + minutes * 60

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() >= self.deadline:
            control.should_training_stop = True
            control.should_save = True
        return control


class RunConfig(TrainerCallback):
    """Record what was trained as the tracker's run config: the recipe, the target, the head.

    HF's WandbCallback and TensorBoardCallback (earlier in the callback list) open the run in their
    own on_train_begin and record the TrainingArguments; this adds headstart's side under
    "headstart": wandb's run config, or a TensorBoard text summary (JSON).
    """

    def __init__(self, config: dict):
        self.config = config
        self.tensorboard = None  # HF's TensorBoardCallback of the trainer, when report_to has it

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if "wandb" in args.report_to:
            import wandb

            if wandb.run is not None:
                wandb.run.config.update({"headstart": self.config}, allow_val_change=True)
        writer = getattr(self.tensorboard, "tb_writer", None)
        if writer is not None:
            writer.add_text("headstart", json.dumps(self.config, indent=2))


def run_config(recipe: Recipe, target: Target, heads) -> dict:
    """The run config trackers record: recipe, target description and the head's kind and options."""
    options = {k: v for k, v in heads.options.items() if k not in ("accuracy", "tree")}
    return {"recipe": recipe_to_dict(recipe), "target": target.describe(), "head": {"kind": heads.kind, **options}}


class TrainingModule(nn.Module):
    """What the Trainer trains: the head, and in joint mode (Medusa-2) the target's LoRA adapters.

    forward(**batch) returns (loss, metrics), so DDP and DeepSpeed see every trained parameter
    used inside one module call. The frozen target is held outside the module's registry (its
    weights are not handed to the optimizer, DDP or DeepSpeed) unless it carries adapters.
    """

    def __init__(self, heads, target: Target, cfg: TrainConfig):
        super().__init__()
        self.heads = heads
        object.__setattr__(self, "target", target)
        self.cfg = cfg
        self.joint = bool(cfg.joint)
        self.progress = 0.0  # share of the optimizer steps done (the head-loss warmup reads it)
        if self.joint or target.partitioned:
            # Joint mode: its LoRA parameters train, the rest stays frozen. ZeRO-3: DeepSpeed's hooks
            # gather the partitioned target's layers around each use only for modules it manages.
            self.backbone = target.model

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.joint and hasattr(self, "backbone"):
            self.backbone.eval()  # registered for ZeRO-3's hooks only: the frozen target stays in eval mode
        return self

    def forward(self, **batch):
        if self.joint:
            return joint_loss(self.heads, self.target, batch, self.cfg, self.progress)
        features = batch_features(self.target, batch, self.heads.feature_layers)
        return self.heads.training_loss(features, batch, self.target, self.cfg)


class Progress(TrainerCallback):
    """Tell the module how far training is (Medusa-2 warms the head loss up over it)."""

    def __init__(self, module: TrainingModule):
        self.module = module

    def on_step_begin(self, args, state, control, **kwargs):
        self.module.progress = state.global_step / max(1, state.max_steps)


class HeadTrainer(Trainer):
    """Trainer whose model is a TrainingModule; the target supplies features inside its forward."""

    def __init__(self, target: Target, train_config: TrainConfig, run: dict, **kwargs):
        super().__init__(**kwargs)
        self.target = target
        self.train_config = train_config
        self.run = run  # the recipe's fingerprint (train/resume.py), recorded in every checkpoint
        self._metrics: dict[str, list[float]] = defaultdict(list)
        self._recent_sim: float | None = None  # simulated τ of the last logging window
        self.best: dict | None = None  # {"step", "sim_accept_length", "path"} of the best checkpoint
        self.loss_before = 0.0  # training loss summed over the steps before this session (a resumed run)

    def resume_state(self) -> dict:
        """What a resumed run reads back to end as the uninterrupted one would: the best checkpoint
        so far, the last window's simulated τ, the window in progress, and the loss summed so far
        (HF's own sum of this session: logged windows, plus the window in progress)."""
        session = self._total_loss_scalar + self._tr_loss.item()  # set by HF's training loop, which calls _save
        return {
            "best": self.best,
            "recent_sim": self._recent_sim,
            "pending_metrics": {k: list(v) for k, v in self._metrics.items()},
            "loss_sum": self.loss_before + session,
        }

    def restore(self, checkpoint: Path) -> None:
        """Read back `resume_state` from a checkpoint's config.json before resuming from it."""
        state = json.loads((checkpoint / CONFIG_NAME).read_text())["resume_state"]
        self.best, self._recent_sim, self.loss_before = state["best"], state["recent_sim"], state["loss_sum"]
        self._metrics = defaultdict(list, {k: list(v) for k, v in state["pending_metrics"].items()})

    def run_loss(self, result) -> float:
        """Mean training loss over every step of the run, the steps before a resume included (HF's
        own figure covers this session only)."""
        session_steps = result.global_step - self._initial_global_step
        return (self.loss_before + result.training_loss * session_steps) / max(result.global_step, 1)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, metrics = model(**inputs)
        for k, v in metrics.items():
            self._metrics[k].append(v)
        return (loss, None) if return_outputs else loss

    def create_optimizer(self, model=None):
        """AdamW over the head, and in joint mode the adapters as a second group at the base lr
        (the heads learn head_lr_multiplier times faster, as Medusa-2 trains them)."""
        module = self.accelerator.unwrap_model(self.model)
        cfg = self.train_config
        if self.optimizer is None and module.joint:
            heads = [p for p in module.heads.parameters() if p.requires_grad]
            adapters = adapter_parameters(self.target)
            groups = [
                {"params": heads, "lr": cfg.lr * cfg.head_lr_multiplier, "weight_decay": cfg.weight_decay},
                {"params": adapters, "lr": cfg.lr, "weight_decay": cfg.weight_decay},
            ]
            self.optimizer = torch.optim.AdamW(groups, lr=cfg.lr)
            return self.optimizer
        return super().create_optimizer()

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """Resume: the head's weights from model.safetensors, the adapter (joint mode) beside it, each
        checked against the SHA-256 its config.json recorded, as loading a head checks them."""
        module = self.accelerator.unwrap_model(model if model is not None else self.model)
        folder = Path(resume_from_checkpoint)
        config = read_config(folder)
        module.heads.load_state_dict(read_weights(folder, config), strict=True)
        if module.joint:
            set_adapter_weights(self.target, read_weights(folder, config, ADAPTER_WEIGHTS))

    def _get_train_sampler(self, train_dataset=None):
        # Length-grouped batches from the dataset's own lengths: the stock sampler would read every
        # row to measure it, which for an offline feature cache means reading all features.
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        if self.args.train_sampling_strategy == "group_by_length":
            batch = self.args.train_batch_size * self.args.gradient_accumulation_steps
            return LengthGroupedSampler(batch, lengths=dataset.lengths)
        return super()._get_train_sampler(train_dataset)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self._metrics and "loss" in logs:
            logs.update({k: round(sum(v) / len(v), 4) for k, v in self._metrics.items()})
            self._metrics.clear()
            self._recent_sim = logs.get("sim_accept_length", self._recent_sim)
        super().log(logs, start_time)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Under ZeRO-3 gather the head's slices only: the stock path would gather every weight of
        the module, the partitioned target's included, onto one process to save a few MB."""
        if not (self.is_deepspeed_enabled and is_deepspeed_zero3_enabled()):
            return super().save_model(output_dir, _internal_call)
        heads = self.accelerator.unwrap_model(self.model).heads
        with gathered(list(heads.parameters())):  # a collective: every process gathers
            state = {k: v.detach().cpu().clone() for k, v in heads.state_dict().items()}
        self._save(output_dir, state_dict=state)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if self.args.should_save:
            heads = self.accelerator.unwrap_model(self.model).heads
            if state_dict is not None:  # DeepSpeed hands over the module's weights: keep the head's
                state_dict = {k.removeprefix("heads."): v for k, v in state_dict.items() if not k.startswith("backbone.")}
            self._keep_best(heads, state_dict)  # first, so that the checkpoint records the best including itself
            # ZeRO-3: the module holds empty partitions; the Trainer hands over the gathered weights.
            zero3 = self.is_deepspeed_enabled and is_deepspeed_zero3_enabled()
            extra = {"run": self.run, "resume_state": self.resume_state()}
            save_heads(heads, output_dir or self.args.output_dir, self.target, extra=extra, state=state_dict if zero3 else None)

    def _keep_best(self, heads, state_dict: dict | None) -> None:
        """Copy the head to output_dir/best when the simulated τ of the latest logging window beats
        every earlier checkpoint's (EAGLE-3's training-time-test proxy; SpecForge's simulated_acc_len)."""
        sim = self._recent_sim
        if sim is None or (self.best is not None and sim <= self.best["sim_accept_length"]):
            return
        best = Path(self.args.output_dir) / "best"
        record = {"step": self.state.global_step, "sim_accept_length": sim, "path": str(best)}
        save_heads(heads, best, self.target, extra={"best": record}, state=state_dict)
        self.best = record


def unpartitioned(trainer: Trainer, heads, target: Target):
    """The head with whole parameters. Under DeepSpeed ZeRO-3 every process holds a slice of each
    parameter; all processes gather them (a collective) into a plain copy for measuring and saving."""
    if not (trainer.is_deepspeed_enabled and is_deepspeed_zero3_enabled()):
        return heads
    with gathered(list(heads.parameters())):
        state = {k: v.detach().clone() for k, v in heads.state_dict().items()}
    plain = type(heads).from_config(dict(heads.options), target)
    plain.load_state_dict(state)
    plain.target_info = heads.target_info
    return plain.to(target.device)


def frequent_tokens(examples, n: int, vocab_size: int) -> torch.Tensor:
    """The n most frequent assistant tokens of `examples`, most frequent first (ties by id)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for e in examples:
        ids = torch.tensor(e.input_ids)[torch.tensor(e.loss_mask, dtype=torch.bool)]
        counts += torch.bincount(ids, minlength=vocab_size)
    n = min(n, vocab_size)
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))[:n]
    return torch.tensor(order, dtype=torch.long)


def build_head(recipe: Recipe, target: Target, examples):
    """A new head of the recipe's kind; its draft vocabulary counted over `examples`' answers."""
    hcfg = recipe.head
    if hcfg.kind not in heads_registry.REGISTRY:
        raise ValueError(f"head.kind: unknown kind {hcfg.kind!r}; known: {', '.join(sorted(heads_registry.REGISTRY))}")
    cls = heads_registry.REGISTRY[hcfg.kind]
    options = heads_registry.recipe_options(hcfg)
    if hcfg.draft_vocab_size is not None:  # None: the whole vocabulary
        from headstart.heads.options import check_draft_vocab_size

        check_draft_vocab_size(hcfg.draft_vocab_size, target.vocab_size, "head.draft_vocab_size")
        options["draft_vocab"] = frequent_tokens(examples, hcfg.draft_vocab_size, target.vocab_size)
    if getattr(cls, "dynamic", False):
        d = recipe.decode
        options["tree"] = {"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens}
    return heads_registry.build(hcfg.kind, target, **options)


def _bf16(cfg: TrainConfig, target: Target) -> bool:
    """bf16 autocast for the head only with a bf16 target (a float32 target means bf16 is slow or unwanted)."""
    return cfg.bf16 and target.dtype == torch.bfloat16


def _seconds_per_step(module: TrainingModule, dataset, cfg: TrainConfig) -> float:
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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=_bf16(cfg, target) and target.device.type == "cpu"):
            loss, _ = module(**batch)
        loss.backward()
        times.append(time.perf_counter() - t0)
    module.zero_grad(set_to_none=True)
    return min(times) * scale * 1.1  # optimizer and logging overhead


def _steps_in_budget(module: TrainingModule, dataset, cfg: TrainConfig) -> int:
    """Optimizer steps that fit train.max_minutes (at most train.epochs over the data), by timing two."""
    per_step = _seconds_per_step(module, dataset, cfg) * cfg.grad_accum
    by_time = int(cfg.max_minutes * 60 / per_step)
    by_epochs = math.ceil(len(dataset) * cfg.epochs / (cfg.batch_size * cfg.grad_accum))
    return max(1, min(by_time, by_epochs))


def zero_stage(deepspeed_config: str | None) -> int | None:
    """The ZeRO stage of a DeepSpeed JSON config (None without one)."""
    if not deepspeed_config:
        return None
    try:
        config = json.loads(Path(deepspeed_config).read_text())
    except (OSError, ValueError) as e:
        raise RecipeError(f"train.deepspeed: cannot read the DeepSpeed config {deepspeed_config}: {e}") from e
    return int(config.get("zero_optimization", {}).get("stage", 0))


def _check_zero3_dtype(recipe: Recipe) -> None:
    """Under ZeRO-3 every weight, the target's too, takes the DeepSpeed config's precision."""
    dtype = resolve_dtype(recipe.target.dtype)
    if dtype == torch.float16 or (dtype == torch.bfloat16 and not recipe.train.bf16):
        raise RecipeError(
            f"ZeRO-3 stores every weight, the target's too, in the DeepSpeed config's precision, which follows "
            f"train.bf16 ({recipe.train.bf16}): a {recipe.target.dtype} target needs train.bf16=true and "
            "target.dtype=bfloat16, or target.dtype=float32"
        )


@contextmanager
def zero3_loading(recipe: Recipe):
    """Load the target inside this block to partition it while it loads (ZeRO-3 recipes only).

    transformers loads a model under DeepSpeed's `zero.Init` while an HF DeepSpeed config is alive:
    each of N processes then keeps 1/N of every weight from the start, so a target larger than one
    device (or one host's memory, N times) fits. The config is the one training will use, with its
    "auto" values resolved from the recipe. Other recipes load as usual.
    """
    if zero_stage(recipe.train.deepspeed) != 3:
        yield
        return
    _check_zero3_dtype(recipe)
    bf16 = recipe.train.bf16 and resolve_dtype(recipe.target.dtype) == torch.bfloat16
    args = training_arguments(recipe.train, max_steps=-1, bf16=bf16)  # alive while loading
    _ = args.device  # sets up the process group (HF/accelerate) ...
    import deepspeed

    deepspeed.init_distributed()  # ... and DeepSpeed's view of it: zero.Init partitions over every process
    yield
    del args


def partition_report(target: Target) -> str:
    """How much of the target this process holds (ZeRO-3 keeps a slice of each weight per process)."""
    params = list(target.model.parameters())
    total = sum(p.ds_numel if is_partitioned(p) else p.numel() for p in params)
    # Small parameters (under stage3_param_persistence_threshold) stay whole on every process.
    local = sum(p.ds_tensor.numel() if is_partitioned(p) and not p.ds_persist else p.numel() for p in params)
    import torch.distributed as dist

    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    return f"ZeRO-3: process {rank} holds {local:,} of the target's {total:,} parameters ({100 * local / total:.1f}%)"


def _check_joint(recipe: Recipe, target: Target) -> None:
    """Medusa-2's preconditions, before any data is read or anything is written."""
    cfg = recipe.train
    if not cfg.joint:
        return
    if recipe.head.kind != "medusa":
        raise RecipeError(f"train.joint (Medusa-2) trains Medusa heads with LoRA adapters; head.kind is {recipe.head.kind!r}")
    if cfg.backbone_loss not in BACKBONE_LOSSES:
        raise RecipeError(f"train.backbone_loss must be one of {BACKBONE_LOSSES}, got {cfg.backbone_loss!r}")
    if recipe.data.features_dir:
        raise RecipeError("train.joint changes the target's features while it trains: it cannot read an offline feature cache (unset data.features_dir)")
    if zero_stage(cfg.deepspeed) == 3:
        raise RecipeError("train.joint is not supported with ZeRO-3 yet (the adapters would be partitioned); use scripts/ds_zero2.json")


def training_arguments(cfg: TrainConfig, max_steps: int, bf16: bool) -> TrainingArguments:
    """The HF TrainingArguments of a recipe's train section (they resolve a DeepSpeed config's "auto"s)."""
    return TrainingArguments(
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
        bf16=bf16,
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
        ddp_find_unused_parameters=False,  # every trained parameter takes part in every loss
        disable_tqdm=False,
    )


def train(recipe: Recipe, target: Target, heads=None) -> dict:
    """Train the recipe's head on `target`; returns a summary. The final head is in output_dir/final."""
    cfg = recipe.train
    _check_joint(recipe, target)
    resume = checkpoint_to_resume(recipe, target)  # before any work: refuses what would lose an earlier run
    run = run_record(recipe, target)  # the target as it is before joint mode adds adapters
    torch.manual_seed(cfg.seed)
    data = recipe.data
    examples, data_stats = build_examples(
        target.tokenizer, data.train_files, data.max_length, data.limit,
        split=data.split, columns=data.columns, on_error=data.on_error,
    )
    train_ex, eval_ex = split(examples, recipe.data.eval_size, recipe.data.seed)
    if heads is None and recipe.head.init_from:
        from headstart.heads.checkpoint import load_heads

        heads = load_heads(recipe.head.init_from, target).requires_grad_(True)  # trains on from there
        if heads.kind != recipe.head.kind:
            raise RecipeError(f"head.init_from: {recipe.head.init_from} holds a {heads.kind} head, the recipe trains {recipe.head.kind}")
    if heads is None:
        heads = build_head(recipe, target, train_ex)
    heads.float().train()
    if cfg.joint:
        if target.adapter is not None:
            raise RecipeError("train.joint: the target already carries an adapter (a Medusa-2 head was loaded on it); train on a fresh target")
        add_adapter(target, lora_config(cfg, target))
    module = TrainingModule(heads, target, cfg)
    dataset = training_dataset(train_ex, data.features_dir, target, heads.feature_layers)  # online or cached

    max_steps = cfg.max_steps
    if target.partitioned:
        # The partitioned target runs only inside DeepSpeed's engine, which does not exist yet: no
        # timed steps to size the schedule. A time budget still stops training at its deadline.
        _check_zero3_dtype(recipe)
        print(partition_report(target), file=sys.stderr)
        if cfg.max_minutes is not None and max_steps <= 0:
            print("ZeRO-3: the learning-rate schedule spans train.epochs; train.max_minutes stops training at the deadline",
                  file=sys.stderr)
    elif cfg.max_minutes is not None and max_steps <= 0:
        # A resumed budgeted run keeps the schedule it planned when it started (timing again would change it).
        max_steps = planned_steps(resume) if resume is not None else _steps_in_budget(module, dataset, cfg)
    args = training_arguments(cfg, max_steps, _bf16(cfg, target))
    callbacks = [TimeBudget(cfg.max_minutes * 1.15)] if cfg.max_minutes else []
    tracking = RunConfig(run_config(recipe, target, heads))
    callbacks += [tracking, Progress(module)]
    pad_id = target.tokenizer.pad_token_id or 0 if target.tokenizer is not None else 0
    trainer = HeadTrainer(
        target=target,
        train_config=cfg,
        run=run,
        model=module,
        args=args,
        train_dataset=dataset,
        data_collator=lambda rows: collate(rows, pad_id),
        callbacks=callbacks,
    )
    tracking.tensorboard = next((c for c in trainer.callback_handler.callbacks if isinstance(c, TensorBoardCallback)), None)
    if resume is not None:
        trainer.restore(resume)
    elif cfg.overwrite_output_dir and trainer.is_world_process_zero():
        clear_earlier_run(cfg.output_dir)
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    seconds = time.perf_counter() - start
    target.model.eval()  # joint mode put the adapted backbone in train mode (LoRA dropout)
    target.model.requires_grad_(False)

    heads = unpartitioned(trainer, heads, target)
    heads.eval()
    from headstart.train.measure import measure_accuracy, measure_steps

    if getattr(heads, "dynamic", False):
        accuracy = measure_steps(target, heads, eval_ex, cfg, batch_size=cfg.batch_size)
    else:
        accuracy = measure_accuracy(target, heads, eval_ex, batch_size=cfg.batch_size)
        heads.options["accuracy"] = accuracy["topk_accuracy"]
    # Held-out accuracy per depth and the chain proxy of τ go to the tracker too (wandb, tensorboard).
    per_depth = {f"heldout/{k}_depth{d + 1}": v for k in ("top1", "top5") for d, v in enumerate(accuracy.get(k) or [])}
    if "sim_accept_length" in accuracy:
        per_depth["heldout/sim_accept_length"] = accuracy["sim_accept_length"]
    if per_depth:
        trainer.log(per_depth)
    final = Path(cfg.output_dir) / "final"
    summary = {
        "steps": result.global_step,
        "train_seconds": round(seconds, 1),
        "train_loss": round(trainer.run_loss(result), 4),
        "data": data_stats,
        "train_examples": len(train_ex),
        "heldout_examples": len(eval_ex),
        "heldout": {k: v for k, v in accuracy.items() if k != "topk_accuracy"},
        "best_checkpoint": trainer.best,  # by the simulated τ of the training window before each save
    }
    if trainer.is_world_process_zero():  # one writer: every rank holds the same head after training
        heads.save_pretrained(final, target, extra={"training": summary, "recipe": recipe_to_dict(recipe)})
        (Path(cfg.output_dir) / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    summary["final"] = str(final)
    return summary
