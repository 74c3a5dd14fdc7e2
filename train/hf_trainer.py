"""The `transformers.Trainer` side of training: what it trains, its callbacks and its arguments.

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
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.integrations import is_deepspeed_zero3_enabled
from transformers.trainer_pt_utils import LengthGroupedSampler
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from headstart.adapter import ADAPTER_WEIGHTS, adapter_parameters, set_adapter_weights
from headstart.config import Recipe, TrainConfig, recipe_to_dict
from headstart.files import space_for, staged_folder
from headstart.heads.checkpoint import CONFIG_NAME, read_config, read_weights, save_heads
from headstart.heads.losses import LossSettings
from headstart.heads.results import restore_fields, saved_fields
from headstart.target import Target, gathered
from headstart.train.features import batch_features
from headstart.train.joint import JointConfig, joint_loss


class TimeBudget(TrainerCallback):
    """Stop cleanly (and save) when the wall-clock budget is spent: the clock schedule's budget when
    the run follows one (its own clock, earlier sessions of a resumed run included), else `minutes`
    from now."""

    def __init__(self, minutes: float):
        self.deadline = time.monotonic() + minutes * 60

    def on_step_end(self, args, state, control, lr_scheduler=None, **kwargs):
        spent = lr_scheduler.fraction() >= 1.0 if isinstance(lr_scheduler, ClockSchedule) else time.monotonic() >= self.deadline
        if spent:
            control.should_training_stop = True
            control.should_save = True
        return control


def clock_factor(fraction: float, warmup: float, kind: str) -> float:
    """The learning-rate factor at `fraction` of a time budget: a linear warmup over its first `warmup`,
    then HF's schedule `kind` (cosine, linear, constant, constant_with_warmup) over the rest, 0 past the end."""
    if fraction < warmup and kind != "constant":
        return fraction / warmup
    if kind.startswith("constant"):
        return 1.0
    done = 1.0 if warmup >= 1.0 else min(1.0, max(0.0, (fraction - warmup) / (1.0 - warmup)))
    return 0.5 * (1.0 + math.cos(math.pi * done)) if kind == "cosine" else 1.0 - done


#: the schedules a clock can drive (HF's names)
CLOCK_SCHEDULES = ("cosine", "linear", "constant", "constant_with_warmup")


class ClockSchedule(torch.optim.lr_scheduler.LambdaLR):
    """A learning-rate schedule over a time budget instead of a step count: the factor after each
    step is `clock_factor` of the share of `seconds` spent since training began, so a run on a machine
    whose speed drifts still warms up, decays and ends with the budget. Its state (saved in every
    checkpoint) holds the seconds spent, so a resumed run goes on where it stopped."""

    def __init__(self, optimizer, seconds: float, warmup: float, kind: str):
        self.seconds, self.warmup, self.kind = float(seconds), float(warmup), kind
        self.spent_before, self.started = 0.0, time.monotonic()
        super().__init__(optimizer, lambda _step: clock_factor(self.fraction(), self.warmup, self.kind))

    def spent(self) -> float:
        """Seconds of training so far, earlier sessions included."""
        return self.spent_before + time.monotonic() - self.started

    def fraction(self) -> float:
        return self.spent() / self.seconds

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["spent_before"], state["started"] = self.spent(), None  # a monotonic time means nothing in another process
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.started = time.monotonic()


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
    return {"recipe": recipe_to_dict(recipe), "target": target.describe(), "head": {"kind": heads.kind, **heads.options}}


class TrainingModule(nn.Module):
    """What the Trainer trains: the head, and in joint mode (Medusa-2) the target's LoRA adapters.

    forward(**batch) returns (loss, metrics), so DDP and DeepSpeed see every trained parameter
    used inside one module call. The frozen target is held outside the module's registry (its
    weights are not handed to the optimizer, DDP or DeepSpeed) unless it carries adapters.
    """

    def __init__(self, heads, target: Target, cfg: TrainConfig, options=None, joint: JointConfig | None = None):
        """options: the head kind's recipe options (`recipe.head.options`; default: its defaults); joint:
        Medusa-2's joint training (`recipe.joint`; default: off)."""
        super().__init__()
        self.heads = heads
        object.__setattr__(self, "target", target)
        self.options = type(heads).options_class() if options is None else options
        self.shared = LossSettings.from_config(cfg)  # the training fields every kind's loss reads
        self.joint_config = JointConfig() if joint is None else joint
        self.joint = self.joint_config.enabled
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
            return joint_loss(self.heads, self.target, batch, self.joint_config, self.options, self.shared, self.progress)
        features = batch_features(self.target, batch, self.heads.feature_layers)
        return self.heads.training_loss(features, batch, self.target, self.options, self.shared)


class Progress(TrainerCallback):
    """Tell the module how far training is (Medusa-2 warms the head loss up over it)."""

    def __init__(self, module: TrainingModule):
        self.module = module

    def on_step_begin(self, args, state, control, lr_scheduler=None, **kwargs):
        if isinstance(lr_scheduler, ClockSchedule):  # a time budget: the share of it spent
            self.module.progress = min(1.0, lr_scheduler.fraction())
        else:
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
        self.clock_seconds: float | None = None  # a time budget the schedule follows (train/budget.py `Plan`)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """HF's schedule over the steps, or with `clock_seconds` a `ClockSchedule` over that time."""
        if self.clock_seconds is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        cfg = self.train_config
        self.lr_scheduler = ClockSchedule(optimizer or self.optimizer, self.clock_seconds, cfg.warmup_ratio, cfg.scheduler)
        self._created_lr_scheduler = True
        return self.lr_scheduler

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
                {"params": heads, "lr": cfg.lr * module.joint_config.head_lr_multiplier, "weight_decay": cfg.weight_decay},
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

    def _save_checkpoint(self, model, trial) -> None:
        """HF's checkpoint-N, except that a full disk is one DiskFullError naming the folder and the
        space, and leaves no partial checkpoint-N (which a resume could not use)."""
        folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        trained = [p for p in self.model.parameters() if p.requires_grad]
        needed = 3 * sum(p.numel() * p.element_size() for p in trained) + (1 << 16)  # weights and AdamW's two moments
        with space_for(folder.parent, needed, f"{folder.name} (the head, its optimizer state, the trainer's state)",
                       cleanup=None if folder.exists() else folder):
            super()._save_checkpoint(model, trial)

    def _keep_best(self, heads, state_dict: dict | None) -> None:
        """Copy the head to output_dir/best when the simulated τ of the latest logging window beats
        every earlier checkpoint's (EAGLE-3's training-time-test proxy; SpecForge's simulated_acc_len)."""
        sim = self._recent_sim
        if sim is None or (self.best is not None and sim <= self.best["sim_accept_length"]):
            return
        best = Path(self.args.output_dir) / "best"
        record = {"step": self.state.global_step, "sim_accept_length": sim, "path": str(best)}
        with staged_folder(best) as tmp:  # the previous best stays whole until this one is
            save_heads(heads, tmp, self.target, extra={"best": record}, state=state_dict)
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
    restore_fields(plain, saved_fields(heads), "the head trained under ZeRO-3")
    return plain.to(target.device)


def use_bf16(cfg: TrainConfig, target: Target) -> bool:
    """bf16 autocast for the head only with a bf16 target (a float32 target means bf16 is slow or unwanted)."""
    return cfg.bf16 and target.dtype == torch.bfloat16


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
