"""`headstart train`: train a recipe's head on the frozen target, as a list of named steps.

`train` reads as the recipe it runs, each step a small function below: check the recipe against
the target, settle what an earlier run left (resume or refuse), read and split the data, set up
the head (new, or from `head.init_from`), add Medusa-2's adapter (`train.joint`), size the
schedule (train/budget.py), build the Trainer (train/hf_trainer.py: the module it trains, its
callbacks and arguments), run it, measure the head on the held-out examples, and save the final
head with the run's summary. ZeRO-3's loading and checks live here too: the CLI loads the target
inside `zero3_loading` before calling `train`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import TrainerCallback
from transformers.integrations import TensorBoardCallback

from headstart import heads
from headstart.adapter import add_adapter
from headstart.config import Recipe, RecipeError, TrainConfig, recipe_to_dict
from headstart.files import TRAIN_SUMMARY, space_for, staged_folder, write_json
from headstart.heads.checkpoint import load_heads, save_corpus
from headstart.heads.complement import draft_weights, free_hits
from headstart.heads.losses import LossSettings
from headstart.heads.results import DynamicTreeSpec, HeldOutAccuracy, trait
from headstart.heads.vocab import frequent_tokens
from headstart.jsonl import DataError
from headstart.lock import output_lock
from headstart.target import Target, is_partitioned, resolve_dtype
from headstart.train.budget import Plan, plan_schedule
from headstart.train.data import Example, ExampleDataset, collate, training_examples
from headstart.train.features import FeatureCache, training_dataset
from headstart.train.formats import expand_sources, read_conversations
from headstart.train.hf_trainer import (
    HeadTrainer,
    Progress,
    RunConfig,
    TimeBudget,
    TrainingModule,
    run_config,
    training_arguments,
    unpartitioned,
    use_bf16,
)
from headstart.train.joint import BACKBONE_LOSSES, lora_config
from headstart.train.measure import measure_accuracy, measure_steps
from headstart.train.resume import checkpoint_to_resume, clear_earlier_run, run_record


@dataclass
class RunStart:
    """What is settled before any work: the checkpoint to resume from (None: a fresh run) and the
    run's record, the recipe's fingerprint that every checkpoint keeps (train/resume.py)."""

    resume: Path | None
    record: dict


@dataclass
class TrainingData:
    """The recipe's conversations as examples: those trained on and the held-out ones."""

    train: list[Example]
    heldout: list[Example]
    stats: dict  # what reading found (train/data.py's build_examples): rows, skipped, truncated


@dataclass
class TrainSummary:
    """What `train` returns: the trained head in memory, ready to decode as loading its folder gives it
    (the target's dtype and device, eval mode, its corpus table), with the run's figures and paths.
    `record()` is the part that train_summary.json and the final head's config.json keep."""

    head: nn.Module
    steps: int  # optimizer steps, those before a resume included
    train_seconds: float  # wall-clock seconds of this session's training
    train_loss: float  # mean training loss over every step of the run
    data: dict  # what reading found (train/data.py's build_examples): rows, skipped, truncated
    train_examples: int
    heldout_examples: int
    heldout: dict  # held-out accuracy: per-depth top-1 (and top-5), the τ proxy, ...
    best_checkpoint: dict | None  # by the simulated τ of the training window before each save
    output_dir: Path
    final: Path  # the final head's folder, output_dir/final

    def record(self) -> dict:
        """The run's figures as JSON data (train_summary.json), without the head and the paths."""
        return {
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            "train_loss": self.train_loss,
            "data": self.data,
            "train_examples": self.train_examples,
            "heldout_examples": self.heldout_examples,
            "heldout": self.heldout,
            "best_checkpoint": self.best_checkpoint,
        }


@dataclass
class Outcome:
    """What the Trainer's run gave."""

    steps: int  # optimizer steps, those before a resume included
    seconds: float  # wall-clock time of this session's training
    loss: float  # mean training loss over every step of the run, those before a resume included


def train(recipe: Recipe, target: Target, head: nn.Module | None = None) -> TrainSummary:
    """Train the recipe's head on `target`; returns its summary, the trained head in it. The final head is
    saved in output_dir/final.

    head: train this head instead of a new one (or head.init_from's). The run holds the lock on
    train.output_dir throughout (headstart/lock.py): a second run into it is refused.
    """
    with run_lock(recipe), deepspeed_buffer_removed(recipe):
        return _train(recipe, target, head)


@contextmanager
def deepspeed_buffer_removed(recipe: Recipe):
    """Under DeepSpeed on CPU each process creates a shared-memory buffer for its allreduce
    (/dev/shm/deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<rank>, tens of MB) and
    never removes it, so every run would leave its processes' buffers in the machine's memory. Each
    process removes its own when training ends, however it ends; the others' mappings stay valid."""
    try:
        yield
    finally:
        if recipe.train.deepspeed and "MASTER_PORT" in os.environ:
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else int(os.environ.get("RANK", "0"))
            name = f"deepspeed_allreduce_buffer_{os.getuid()}_{os.environ.get('MASTER_ADDR')}_{os.environ['MASTER_PORT']}_{rank}"
            Path("/dev/shm", name).unlink(missing_ok=True)


def run_lock(recipe: Recipe):
    """The lock on train.output_dir; one process takes it (the first of a DeepSpeed launch's ranks)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return nullcontext()
    return output_lock(recipe.train.output_dir, "train.output_dir", "headstart train")


def _train(recipe: Recipe, target: Target, head: nn.Module | None) -> TrainSummary:
    start = _start_run(recipe, target)
    torch.manual_seed(recipe.train.seed)
    data = _read_data(recipe, target)
    _weigh_by_free_hits(recipe.train, data.train)
    given, head = head, _setup_head(recipe, target, data.train, head)
    continued = getattr(head, "corpus", None) if given is None and recipe.head.init_from else None  # its table grows on
    _add_joint_adapter(recipe, target)
    module = TrainingModule(head, target, recipe.train, recipe.head.options, recipe.joint)
    dataset = training_dataset(data.train, recipe.data.features_dir, target, head.feature_layers)  # online or cached
    _note_partitioning(recipe, target)
    plan = plan_schedule(recipe.train, module, dataset, start.resume)
    trainer = _setup_trainer(recipe, module, dataset, start.record, plan)
    _resume_or_clear(trainer, recipe.train, start.resume)
    outcome = _run(trainer, start.resume)
    head = unpartitioned(trainer, head, target).eval()
    heldout = _measure(head, target, data.heldout, recipe)
    _log_heldout(trainer, heldout)
    summary = _summary(head, outcome, data, heldout, trainer.best, Path(recipe.train.output_dir))
    head.corpus = _save(trainer, summary, recipe, data.train, continued)
    head.to(device=target.device, dtype=target.dtype).requires_grad_(False)  # as loading final/ gives it
    return summary


def _start_run(recipe: Recipe, target: Target) -> RunStart:
    """Check the recipe against the target and settle what an earlier run in output_dir left, before
    any data is read or anything is written: its checkpoint to resume from, or a refusal of what
    would lose it."""
    _check_joint(recipe)
    resume = checkpoint_to_resume(recipe, target)
    return RunStart(resume=resume, record=run_record(recipe, target))  # the target before joint mode adds adapters


#: the head kinds whose loss takes per-token weights (train.free_hit_weight, heads/complement.py)
COMPLEMENTARY_KINDS = ("medusa", "eagle3")


def check_recipe(recipe: Recipe) -> None:
    """What `headstart train` checks before the target loads (minutes, for a large one), beyond what loading
    the recipe checked (the head kind and its options): Medusa-2's preconditions, and the data:
    data.train_files named, the rows of its local files readable as conversations (a Hub dataset is
    read once the target is there), and data.features_dir a finished feature cache when it is set."""
    _check_joint(recipe)
    if recipe.train.free_hit_weight < 1.0 and recipe.head.kind not in COMPLEMENTARY_KINDS:
        raise RecipeError(f"train.free_hit_weight: complementary training weighs the loss of {' and '.join(COMPLEMENTARY_KINDS)} "
                          f"heads only; this recipe trains {recipe.head.kind}: leave it at 1")
    data = recipe.data
    if not data.train_files:
        raise DataError("data.train_files is empty: name at least one file or dataset of conversations")
    local = [s for s in expand_sources(data.train_files)
             if Path(s).is_file() or Path(s).name.removesuffix(".gz").endswith((".jsonl", ".json"))]
    read_conversations(local, split=data.split, columns=data.columns, on_error=data.on_error)
    if data.features_dir:
        FeatureCache.require(data.features_dir)  # `headstart features` must have written it; read with the data


def _read_data(recipe: Recipe, target: Target) -> TrainingData:
    """The recipe's conversations through the target's chat template (assistant-only loss masks),
    data.eval_size of them held out."""
    trained, heldout, stats = training_examples(target.tokenizer, recipe.data)
    return TrainingData(train=trained, heldout=heldout, stats=stats)


def _weigh_by_free_hits(cfg: TrainConfig, examples: list[Example]) -> None:
    """Complementary training (train.free_hit_weight < 1): each training example's answer tokens that
    head-free drafting predicts get that loss weight (heads/complement.py); held-out examples keep
    none, so held-out accuracy stays over every token."""
    if cfg.free_hit_weight >= 1.0:
        return
    started = time.perf_counter()
    hits = free_hits(examples, order=cfg.corpus_ngram or 4)
    for example, weights in zip(examples, draft_weights(hits, cfg.free_hit_weight)):
        example.draft_weight = weights
    answer = sum(sum(e.loss_mask) for e in examples)
    share = sum(sum(h) for h in hits) / max(1, answer)
    print(f"complementary training: {share:.0%} of {answer} answer tokens are predicted without a head, weighted "
          f"{cfg.free_hit_weight} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)


def _setup_head(recipe: Recipe, target: Target, examples: list[Example], head: nn.Module | None) -> nn.Module:
    """The head to train, in float32 and train mode: the one handed over, else head.init_from's
    (training goes on from its weights), else a new one of the recipe's kind counted over `examples`."""
    if head is None and recipe.head.init_from and recipe.head.init_from_target:
        raise RecipeError(f"head.init_from ({recipe.head.init_from}) continues a trained head, head.init_from_target starts a new "
                          "one from the target's last layer: set one of them")
    if head is None and recipe.head.init_from:
        head = load_heads(recipe.head.init_from, target).requires_grad_(True)
        if head.kind != recipe.head.kind:
            raise RecipeError(f"head.init_from: {recipe.head.init_from} holds a {head.kind} head, the recipe trains {recipe.head.kind}")
    if head is None:
        head = build_head(recipe, target, examples)
    if head.kind != recipe.head.kind:  # it trains with the options of the recipe's kind
        raise RecipeError(f"head.kind: the recipe trains a {recipe.head.kind} head, but the head given is a {head.kind} head: "
                          f"set head.kind={head.kind}")
    return head.float().train()


def _add_joint_adapter(recipe: Recipe, target: Target) -> None:
    """Medusa-2 (train.joint): LoRA adapters on the target, trained with the head."""
    if not recipe.joint.enabled:
        return
    if target.adapter is not None:
        raise RecipeError("train.joint: the target already carries an adapter (a Medusa-2 head was loaded on it); train on a fresh target")
    add_adapter(target, lora_config(recipe.joint, target))


def _note_partitioning(recipe: Recipe, target: Target) -> None:
    """A target partitioned by ZeRO-3: check its dtype and say how much of it this process holds and
    that a time budget cannot size its schedule (nothing can be timed before DeepSpeed's engine exists)."""
    if not target.partitioned:
        return
    _check_zero3_dtype(recipe)
    print(partition_report(target), file=sys.stderr)
    if recipe.train.max_minutes is not None and recipe.train.max_steps <= 0:
        print("ZeRO-3: the learning-rate schedule spans train.epochs; train.max_minutes stops training at the deadline",
              file=sys.stderr)


def _setup_trainer(recipe: Recipe, module: TrainingModule, dataset: ExampleDataset, record: dict, plan: Plan) -> HeadTrainer:
    """The HF Trainer over `module` with the recipe's arguments and headstart's callbacks: the time
    budget (the clock schedule's own when `plan` has one; else train.max_minutes with a margin, the
    steps having been sized by timing), the run config for the tracker, and the progress Medusa-2's
    head-loss warmup reads. `record` goes into every checkpoint."""
    cfg, target = recipe.train, module.target
    args = training_arguments(cfg, plan.max_steps, use_bf16(cfg, target))
    callbacks: list[TrainerCallback] = [TimeBudget(cfg.max_minutes * 1.15)] if cfg.max_minutes else []
    tracking = RunConfig(run_config(recipe, target, module.heads))
    callbacks += [tracking, Progress(module)]
    pad_id = target.tokenizer.pad_token_id or 0 if target.tokenizer is not None else 0
    trainer = HeadTrainer(
        target=target,
        train_config=cfg,
        run=record,
        model=module,
        args=args,
        train_dataset=dataset,
        data_collator=lambda rows: collate(rows, pad_id),
        callbacks=callbacks,
    )
    trainer.clock_seconds = plan.clock_seconds
    tracking.tensorboard = next((c for c in trainer.callback_handler.callbacks if isinstance(c, TensorBoardCallback)), None)
    return trainer


def _resume_or_clear(trainer: HeadTrainer, cfg: TrainConfig, resume: Path | None) -> None:
    """Resuming: read back the state the checkpoint recorded (best so far, loss, metrics in progress).
    Otherwise, with train.overwrite_output_dir, delete the earlier run's files (one process does)."""
    if resume is not None:
        trainer.restore(resume)
    elif cfg.overwrite_output_dir and trainer.is_world_process_zero():
        clear_earlier_run(cfg.output_dir)


def _run(trainer: HeadTrainer, resume: Path | None) -> Outcome:
    """Run the Trainer (from `resume` when set), then freeze the target again: joint mode put the
    adapted backbone in train mode (LoRA dropout) with gradients on its adapters."""
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    seconds = time.perf_counter() - start
    trainer.target.model.eval()
    trainer.target.model.requires_grad_(False)
    return Outcome(steps=result.global_step, seconds=seconds, loss=trainer.run_loss(result))


def _measure(head: nn.Module, target: Target, examples: list[Example], recipe: Recipe) -> dict:
    """Held-out accuracy: per-step top-1 and the τ proxy of the unrolled draft for a dynamic (EAGLE)
    head; per-depth top-k for a static one, kept as its `held_out` (static trees are built from it)."""
    cfg = recipe.train
    if trait(head, "dynamic"):
        return measure_steps(target, head, examples, recipe.head.options, LossSettings.from_config(cfg), batch_size=cfg.batch_size)
    accuracy = measure_accuracy(target, head, examples, batch_size=cfg.batch_size)
    head.held_out = HeldOutAccuracy(accuracy["topk_accuracy"])
    return accuracy


def _log_heldout(trainer: HeadTrainer, accuracy: dict) -> None:
    """Held-out accuracy per depth and the chain proxy of τ go to the tracker too (wandb, tensorboard)."""
    per_depth = {f"heldout/{k}_depth{d + 1}": v for k in ("top1", "top5") for d, v in enumerate(accuracy.get(k) or [])}
    if "sim_accept_length" in accuracy:
        per_depth["heldout/sim_accept_length"] = accuracy["sim_accept_length"]
    if per_depth:
        trainer.log(per_depth)


def _summary(head: nn.Module, outcome: Outcome, data: TrainingData, accuracy: dict, best: dict | None,
             output_dir: Path) -> TrainSummary:
    """The run's summary, the trained head in it."""
    return TrainSummary(
        head=head,
        steps=outcome.steps,
        train_seconds=round(outcome.seconds, 1),
        train_loss=round(outcome.loss, 4),
        data=data.stats,
        train_examples=len(data.train),
        heldout_examples=len(data.heldout),
        heldout={k: v for k, v in accuracy.items() if k != "topk_accuracy"},
        best_checkpoint=best,
        output_dir=output_dir,
        final=output_dir / "final",
    )


def _save(trainer: HeadTrainer, summary: TrainSummary, recipe: Recipe, train_examples: list[Example],
          continued=None):
    """Write the final head to output_dir/final (its config.json holds the summary's record and the recipe)
    and train_summary.json beside it; returns the corpus table of the training answers saved with it (None
    when train.corpus_ngram is 0, and in the processes that do not write). `continued`: the corpus table of the head
    that head.init_from continues, which the training answers are counted into (a continued head keeps what
    its table knew: served answers add to the corpus's counts instead of replacing them)."""
    head, record, cfg = summary.head, summary.record(), recipe.train
    table = None
    if trainer.is_world_process_zero():  # one writer: every rank holds the same head after training
        needed = sum(v.numel() * v.element_size() for v in head.state_dict().values()) + (1 << 16)
        with space_for(summary.output_dir, needed, "the final head"), staged_folder(summary.final) as tmp:
            head.save_pretrained(tmp, trainer.target, extra={"training": record, "recipe": recipe_to_dict(recipe)})
            if cfg.corpus_ngram:  # the answers' n-gram table, for hybrid trees' corpus trees (decode/corpus.py)
                table = save_corpus(tmp, train_examples, cfg.corpus_ngram, cfg.corpus_ngram_tokens, continued)
                if continued is not None:
                    print(f"the corpus table: head.init_from's ({len(continued)} contexts) with this run's answers counted "
                          f"in ({len(table)} contexts)", file=sys.stderr)
        with space_for(summary.output_dir, 1 << 16, TRAIN_SUMMARY):
            write_json(summary.output_dir / TRAIN_SUMMARY, record)
    return table


def build_head(recipe: Recipe, target: Target, examples):
    """A new head of the recipe's kind; its draft vocabulary counted over `examples`' answers."""
    hcfg = recipe.head
    cls = heads.head_class(hcfg.kind)
    options = heads.recipe_options(hcfg)
    if hcfg.draft_vocab_size is not None:  # None: the whole vocabulary
        from headstart.heads.options import check_draft_vocab_size

        check_draft_vocab_size(hcfg.draft_vocab_size, target.vocab_size, "head.draft_vocab_size")
        options["draft_vocab"] = frequent_tokens(examples, hcfg.draft_vocab_size, target.vocab_size)
    if getattr(cls, "dynamic", False):
        d = recipe.decode
        options["tree"] = DynamicTreeSpec(d.depth, d.top_k, d.total_tokens)  # the head's default tree
    return heads.build(hcfg.kind, target, init_from_target=hcfg.init_from_target, **options)


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


def _check_joint(recipe: Recipe) -> None:
    """Medusa-2's preconditions, before any data is read or anything is written."""
    cfg = recipe.joint
    if not cfg.enabled:
        return
    if recipe.head.kind != "medusa":
        raise RecipeError(f"train.joint (Medusa-2) trains Medusa heads with LoRA adapters; head.kind is {recipe.head.kind!r}")
    if cfg.backbone_loss not in BACKBONE_LOSSES:
        raise RecipeError(f"train.backbone_loss must be one of {BACKBONE_LOSSES}, got {cfg.backbone_loss!r}")
    if recipe.data.features_dir:
        raise RecipeError("train.joint changes the target's features while it trains: it cannot read an offline feature cache (unset data.features_dir)")
    if zero_stage(recipe.train.deepspeed) == 3:
        raise RecipeError("train.joint is not supported with ZeRO-3 yet (the adapters would be partitioned); use scripts/ds_zero2.json")
