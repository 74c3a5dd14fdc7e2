"""Where a training step's time goes, per head kind: target forward, head, vocabulary, backward, optimizer.

    python scripts/profile_train.py                                   # the recipes' target and data (SmolLM2)
    python scripts/profile_train.py --kinds eagle3 --steps 8 --out runs/profile_train.json
    python scripts/profile_train.py --tiny                            # a tiny Llama from a config, made-up batches

Each head kind trains for a few steps on its recipe (`--recipes DIR`, default recipes/smollm2-135m:
DIR/<kind>.yaml, dotted overrides after the options apply to every kind) through the trainer's own
pieces: a head built as training builds it (`build_head`, float32, train mode), the target's
features from `batch_features`, the head's `training_loss`, backward, then gradient clipping and
the optimizer HF's Trainer picks for the recipe's TrainingArguments (fused AdamW), under the
trainer's bf16 autocast when the target is bf16. A step here is one batch and one optimizer step:
with `train.grad_accum` > 1 training spreads the optimizer's cost over that many batches.
Batches are real ones from the recipe's data (the first `--examples` conversations, grouped by
length as the trainer's sampler groups them, `--steps` batches spread over the lengths), or with
`--tiny` made-up token batches of the recipe's batch size and length.

A step is timed in phases (the device synchronised between them): target forward, the head's loss
(split below), backward, optimizer step. The head's loss interleaves the head's own layers with
the vocabulary-wide work, so that split needs a hook: the same steps run once more under a torch
function mode (`VocabTime`) that times every call on a vocabulary-wide tensor (the projections
onto the target's or the draft vocabulary, the softmax / cross-entropy / top-k over them, the id
maps); its share of that run's loss phase splits the uninstrumented loss phase into "head forward"
and "vocab projection + loss". Backward includes the projections' backward. Throughput (steps and
tokens per minute, real tokens, padding excluded) comes from the uninstrumented steps.

Prints a Markdown table (ms per step and share of each phase, steps/min, tokens/min, dtype, machine
kind: the CPU's avx512_bf16 flag, as `lscpu | grep -o avx512_bf16` shows it, or the GPU's name) and
writes JSON with --out. scripts/gpu_check.py reuses `profile_kind` on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves
from transformers import AutoModelForCausalLM, LlamaConfig, Trainer

from headstart.config import parse_script_args
from headstart.decode.io import Clock
from headstart.recipe import load_recipe
from headstart.target import Target, resolve_dtype
from headstart.train.data import Example, build_examples, collate
from headstart.train.features import batch_features
from headstart.train.hf_trainer import TrainingModule, training_arguments, use_bf16
from headstart.train.trainer import build_head

KINDS = ("medusa", "eagle", "eagle3")
PHASES = ("target_forward", "head_forward", "vocab_and_loss", "backward", "optimizer")
PHASE_TITLES = {
    "target_forward": "target forward",
    "head_forward": "head forward",
    "vocab_and_loss": "vocab projection + loss",
    "backward": "backward",
    "optimizer": "optimizer",
}
TINY_VOCAB, TINY_DRAFT_VOCAB = 1000, 250  # widths no other tensor of a tiny step has (see VocabTime)


class VocabTime(TorchFunctionMode):
    """Seconds spent, while active, in torch calls on vocabulary-wide tensors.

    A call counts when it is a linear layer whose weight has a vocabulary width of rows (a
    projection onto the vocabulary), or when one of its tensor arguments has a vocabulary width
    as its last dimension (softmax, cross-entropy, top-k, the id maps). Embedding look-ups do not
    count. `sync` (the device's synchronisation) brackets each counted call, so that work queued
    before it is not counted and its own work is. A profile of a step in which another tensor's
    last dimension happens to equal a vocabulary width would count that call too: `ambiguous_widths`
    says when that can happen.
    """

    def __init__(self, widths: set[int], sync):
        super().__init__()
        self.widths, self.sync = frozenset(widths), sync
        self.seconds = 0.0

    def _counts(self, func, args, kwargs) -> bool:
        if func is F.embedding:
            return False
        if func is F.linear:
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            return weight.shape[0] in self.widths
        return any(torch.is_tensor(a) and a.ndim and a.shape[-1] in self.widths for a in tree_leaves((args, kwargs)))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._counts(func, args, kwargs):
            return func(*args, **kwargs)
        self.sync()
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self.sync()
        self.seconds += time.perf_counter() - start
        return out


def vocab_widths(target, heads) -> set[int]:
    """The vocabulary widths of a head's loss: the target's V and the head's draft N (when it has one)."""
    draft = heads.options.get("draft_vocab_size")
    return {target.vocab_size} | ({draft} if draft else set())


def ambiguous_widths(widths: set[int], batch: dict, target, ttt_steps: int) -> set[int]:
    """Vocabulary widths that another tensor of the step may share as its last dimension (then
    `VocabTime` would count calls on it): batch size, length and its multiples up to the training-
    time-test steps (EAGLE-3's masks), the hidden sizes of target and head."""
    b, t = batch["input_ids"].shape
    d = target.hidden_size
    others = {b, t, d, 2 * d, 3 * d, getattr(target.config, "intermediate_size", d)}
    others |= {t * k for k in range(1, ttt_steps + 2)}
    return widths & others


def machine(device: torch.device) -> dict:
    """What the figures were measured on: the GPU's name, or the CPU's model and whether it has
    avx512_bf16 (native bf16; the flag `lscpu | grep -o avx512_bf16` shows, read from /proc/cpuinfo)."""
    if device.type == "cuda":
        return {"kind": "gpu", "name": torch.cuda.get_device_name(device), "threads": torch.get_num_threads()}
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "CPU")
    kind = "cpu avx512_bf16" if "avx512_bf16" in info else "cpu without avx512_bf16"
    return {"kind": kind, "name": model, "threads": torch.get_num_threads()}


def target_from_config(config, dtype: torch.dtype, device: str | torch.device, name: str):
    """A frozen Target of random weights built from an HF config straight on `device` (nothing downloaded)."""
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return Target(model, None, name=name)


def tiny_target(dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
    """A tiny Llama (4 layers, hidden 64, vocabulary TINY_VOCAB) for runs that test the code, not the speed."""
    config = LlamaConfig(vocab_size=TINY_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096)
    return target_from_config(config, dtype, device, "tiny-llama")


def tiny_overrides(recipe_path: str | Path) -> list[str]:
    """Overrides that fit a recipe to the tiny target: a draft vocabulary within its vocabulary."""
    return [f"head.draft_vocab_size={TINY_DRAFT_VOCAB}"] if load_recipe(recipe_path).head.draft_vocab_size else []


def made_up_examples(count: int, length: int, vocab_size: int, seed: int = 0) -> list:
    """`count` examples of `length` random tokens, the last three quarters an "answer" (loss mask 1)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (count, length), generator=gen).tolist()
    prompt = length // 4
    mask = [0] * prompt + [1] * (length - prompt)
    return [Example(input_ids=row, loss_mask=mask, source=f"made-up[{i}]") for i, row in enumerate(ids)]


def recipe_examples(recipe, target, limit: int) -> list:
    """The first `limit` conversations of the recipe's data, tokenised as training tokenises them."""
    data = recipe.data
    examples, _ = build_examples(target.tokenizer, data.train_files, data.max_length, limit,
                                 split=data.split, columns=data.columns, on_error=data.on_error)
    return examples


def spread_batches(examples: list, batch_size: int, count: int) -> list[list]:
    """`count` batches of similar lengths (as the trainer's length-grouped sampler forms them),
    spread evenly over the examples' lengths, so that their mean is a typical step."""
    ordered = sorted(examples, key=lambda e: len(e.input_ids))
    groups = [ordered[i : i + batch_size] for i in range(0, max(1, len(ordered) - batch_size + 1), batch_size)]
    return [groups[int((i + 0.5) * len(groups) / count)] for i in range(count)]  # the middle of each of `count` bins


def _collated(group: list, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    batch = collate([{"input_ids": e.input_ids, "loss_mask": e.loss_mask} for e in group], pad_id)
    return {k: v.to(device) for k, v in batch.items()}


def _optimizer(module, cfg, bf16: bool):
    """The optimizer the HF Trainer would create for the recipe (its `optim`: fused AdamW by default)."""
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(training_arguments(cfg, max_steps=1, bf16=bf16), module)
    params = [p for p in module.parameters() if p.requires_grad]
    return cls([{"params": params, "weight_decay": cfg.weight_decay}], **kwargs), params


def _step(module, batch: dict, optimizer, params, cfg, autocast, vocab: VocabTime | None = None) -> dict[str, float]:
    """One training step timed in phases (seconds): target_forward, loss, backward, optimizer.

    The same two calls as `TrainingModule.forward`, made one by one so that each can be timed.
    """
    times: dict[str, float] = {}
    clock = Clock(module.target.device, times)
    clock.start()
    with autocast():
        out = batch_features(module.target, batch, module.heads.feature_layers)
        clock.lap("target_forward")
        with vocab if vocab is not None else nullcontext():
            loss, _ = module.heads.training_loss(out, batch, module.target, module.options, module.shared)
        clock.lap("loss")
    loss.backward()
    clock.lap("backward")
    if cfg.max_grad_norm:
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    clock.lap("optimizer")
    return times


def profile_kind(recipe, target, examples: list, steps: int = 5, warmup: int = 1) -> dict:
    """Time `steps` training steps of the recipe's head on `target` over batches of `examples`.

    Returns ms per step of each phase (PHASES), their shares, steps and tokens per minute, and the
    batches' shape. The head and optimizer are new (built as training builds them) and dropped after.
    """
    cfg = recipe.train
    torch.manual_seed(cfg.seed)
    heads = build_head(recipe, target, examples).float().train()
    module = TrainingModule(heads, target, cfg, recipe.head.options, recipe.joint)
    bf16 = use_bf16(cfg, target)
    optimizer, params = _optimizer(module, cfg, bf16)
    device = target.device
    pad_id = (target.tokenizer.pad_token_id or 0) if target.tokenizer is not None else 0
    batches = [_collated(g, pad_id, device) for g in spread_batches(examples, cfg.batch_size, steps)]

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    for _ in range(warmup):
        _step(module, batches[0], optimizer, params, cfg, autocast)
    plain = [_step(module, b, optimizer, params, cfg, autocast) for b in batches]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    widths = vocab_widths(target, heads)
    vocab, loss_seconds = VocabTime(widths, sync), 0.0
    for b in batches:
        loss_seconds += _step(module, b, optimizer, params, cfg, autocast, vocab)["loss"]
    vocab_share = min(1.0, vocab.seconds / loss_seconds) if loss_seconds else 0.0

    seconds = {k: sum(t[k] for t in plain) / steps for k in ("target_forward", "loss", "backward", "optimizer")}
    phases = {
        "target_forward": seconds["target_forward"],
        "head_forward": seconds["loss"] * (1 - vocab_share),
        "vocab_and_loss": seconds["loss"] * vocab_share,
        "backward": seconds["backward"],
        "optimizer": seconds["optimizer"],
    }
    step = sum(phases.values())
    tokens = sum(int(b["attention_mask"].sum()) for b in batches) / steps
    row = {
        "kind": heads.kind,
        "batch_size": cfg.batch_size,
        "mean_width": round(sum(b["input_ids"].shape[1] for b in batches) / steps, 1),
        "tokens_per_step": round(tokens, 1),
        "draft_vocab_size": heads.options.get("draft_vocab_size"),
        "ms": {k: round(v * 1000, 2) for k, v in phases.items()},
        "share": {k: round(v / step, 4) for k, v in phases.items()},
        "step_ms": round(step * 1000, 2),
        "steps_per_min": round(60 / step, 2),
        "tokens_per_min": round(60 * tokens / step),
        "vocab_share_of_loss": round(vocab_share, 4),
        "ambiguous_widths": sorted(set().union(*(ambiguous_widths(widths, b, target, getattr(recipe.head.options, "ttt_steps", 0)) for b in batches))),
    }
    del module, heads, optimizer, params
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def profile_table(rows: list[dict]) -> str:
    """A Markdown table of `profile_kind` rows: ms per step (share) of each phase and throughput."""
    head = ["head", "batch (B × T)", "tokens/step", *(PHASE_TITLES[p] for p in PHASES), "ms/step", "steps/min", "tokens/min"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["kind"], f"{r['batch_size']} × {r['mean_width']:g}", f"{r['tokens_per_step']:,.0f}"]
        cells += [f"{r['ms'][p]:,.1f} ms ({r['share'][p]:.0%})" for p in PHASES]
        cells += [f"{r['step_ms']:,.1f}", f"{r['steps_per_min']:,.1f}", f"{r['tokens_per_min']:,}"]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"note: {r['kind']}: vocabulary width(s) {r['ambiguous_widths']} equal another dimension of the step; "
             "the split of its loss phase may count other work as vocabulary work" for r in rows if r["ambiguous_widths"]]
    return "\n".join(lines + notes)


def describe(target, device: torch.device, source: str, steps: int, warmup: int) -> dict:
    """The run's context, printed above the table and kept in the JSON."""
    return {
        "target": target.name,
        "dtype": str(target.dtype).removeprefix("torch."),
        "machine": machine(device),
        "batches": source,
        "steps": steps,
        "warmup": warmup,
        "method": "phases timed with device syncs between them; head forward vs vocab projection + loss split by "
                  "the share VocabTime (a torch function mode) measured in a second, instrumented run of the same steps",
        "time": time.strftime("%Y-%m-%d %H:%M"),
    }


def heading(info: dict) -> str:
    m = info["machine"]
    return (f"Training step profile: {info['target']}, {info['dtype']}, {m['kind']} ({m['name']}), {m['threads']} threads; "
            f"{info['batches']}; steps timed per head: {info['steps']}, after {info['warmup']} warm-up")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="head kinds to profile")
    ap.add_argument("--recipes", default="recipes/smollm2-135m", help="folder of <kind>.yaml recipes")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per head (and as many instrumented ones)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--examples", type=int, default=512, help="conversations of the recipe's data to draw batches from")
    ap.add_argument("--tiny", action="store_true", help="a tiny Llama from a config and made-up batches (tests)")
    ap.add_argument("--dtype", default=None, help="the target's dtype (default: the recipe's; float32 with --tiny)")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--out", default=None, help="write the rows and their context as JSON here")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides for every kind, e.g. train.batch_size=4")
    args = parse_script_args(ap, sys.argv[1:])  # dotted overrides may follow a list option

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    paths = {kind: Path(args.recipes) / f"{kind}.yaml" for kind in args.kinds}
    if args.tiny:
        target = tiny_target(resolve_dtype(args.dtype or "float32"), device)
        recipes = {k: load_recipe(p, [*tiny_overrides(p), *args.overrides]) for k, p in paths.items()}
    else:
        recipes = {k: load_recipe(p, args.overrides) for k, p in paths.items()}
        t = next(iter(recipes.values())).target
        target = Target.from_pretrained(t.name_or_path, dtype=args.dtype or t.dtype, revision=t.revision,
                                        attn_implementation=t.attn_implementation, device=device,
                                        pack_linears=t.pack_linears)
    rows = []
    for kind, recipe in recipes.items():
        if args.tiny:
            examples = made_up_examples(recipe.train.batch_size * args.steps, recipe.data.max_length, target.vocab_size)
        else:
            examples = recipe_examples(recipe, target, args.examples)
        rows.append(profile_kind(recipe, target, examples, args.steps, args.warmup))
        print(f"profiled {kind}", flush=True)
    source = "made-up batches of the recipes' batch size and length" if args.tiny else (
        f"real batches from the recipes' data (first {args.examples} conversations)")
    info = describe(target, device, source, args.steps, args.warmup)
    print(f"\n{heading(info)}\n\n{profile_table(rows)}")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps({**info, "rows": rows}, indent=2) + "\n")
        os.replace(tmp, out)


if __name__ == "__main__":
    main()
