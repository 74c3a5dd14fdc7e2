"""The official EAGLE-3 trainer (SafeAILab/EAGLE, `eagle/traineagle3`) on a machine without an accelerator, on
rows headstart prepared, for a wall-clock budget: what scripts/bench_peers.py runs in .venv-eagle3 (`make
official-eagle3`, which also fetches the code at a pinned commit) as

    python scripts/peers/eagle3_official_cpu.py --source .peers/EAGLE/eagle/traineagle3 --model FOLDER \\
        --rows rows.jsonl --save DIR --minutes 11 --lr 1e-3 --draft-vocab-size 8192

Their draft model (`cnets.Model`: the target inside, the draft layer, fc, norm, lm_head, seven training-time-test
steps, the loss and accuracy of `Model.forward`) runs unchanged, imported from their folder. Their `main.py` is a
script for DeepSpeed on CUDA GPUs (it parses its arguments and starts DeepSpeed on import, renders Llama 3's chat
template and logs to wandb), so its loop is run here as written, with these changes, each one needed on a CPU or
for a budget in minutes (docs/peers.md lists them):

- data: the rows are headstart's (`input_ids` and `loss_mask`, the target's own chat template, the same
  conversations and loss positions speculators reads) in place of main.py's preprocessing, whose loss mask
  is hardcoded to Llama 3's separators; attention_mask all ones, as theirs;
- the draft vocabulary: `scandata`'s rule (the N tokens most frequent at loss positions, sorted; d2t, t2d)
  applied to those rows and written to the `cache.pt` their `scandata` then reads;
- DeepSpeed is not used: AdamW with their betas (0.9, 0.95) and weight decay 0, their gradient clipping 0.5,
  micro-batches of 1 accumulated 2 to a step, the draft's weights in float32 under bf16 autocast (DeepSpeed's
  fp16 engine on GPUs; the target is loaded in bf16, not their float16, where the CPU computes bf16 natively);
- the schedule follows the clock: their WarmupDecayLR shape (warm-up over 12,000 / 800,000 of the run, then a
  linear decay to 0) over `--minutes`, to `--lr` (their 5e-5 is for an 8B target over 800k steps);
- `train_config.gradient_checkpointing` (their Model reads an attribute main.py's dict does not have) is off:
  on a CPU, memory is not what limits a 135M target, and recomputing the forward would only cost steps;
- the target folder: transformers 4.53 reads `rope_theta` (a config written by transformers 5 has only
  `rope_parameters`) and their embedding loader reads `model.safetensors.index.json`: `<save>/target` holds
  the target's files linked, with both added.

The result is saved as their `save_16bit_model` saves it (the trainable tensors and d2t / t2d, the target and
its embedding left out), as model.safetensors, with their config.json filled in for the target (their layer's
RoPE base is LlamaRotaryEmbedding's default, 10000, whatever the target's: no rope field is written, so vLLM
and headstart's import read 10000 too). <save>/summary.json: steps, seconds, epochs, the last accuracies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import torch

#: main.py's fixed settings that apply on a CPU (train_config, ds_config.json)
MICRO_BATCH, ACCUMULATE, CLIP, BETAS = 1, 2, 0.5, (0.9, 0.95)
WARMUP_SHARE = 12000 / 800000  # ds_config.json's warmup_num_steps / total_num_steps
DECAY = 0.8  # main.py's ploss_weight base


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="eagle3_official_cpu.py", description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="the official code's eagle/traineagle3 folder")
    ap.add_argument("--model", required=True, help="the target's model folder")
    ap.add_argument("--rows", required=True, help="JSON lines of {input_ids, loss_mask}")
    ap.add_argument("--save", required=True, help="an empty or new folder for the draft")
    ap.add_argument("--minutes", type=float, required=True, help="the wall-clock budget of the training loop")
    ap.add_argument("--lr", type=float, default=5e-5, help="the peak learning rate (theirs: 5e-5)")
    ap.add_argument("--draft-vocab-size", type=int, default=32000, help="their config.json's draft_vocab_size (theirs: 32000)")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def target_view(model: Path, save: Path) -> Path:
    """<save>/target: the target's files linked, config.json with rope_theta, and a safetensors index."""
    from safetensors import safe_open

    view = save / "target"
    view.mkdir(parents=True, exist_ok=True)
    for f in model.iterdir():
        if f.name != "config.json" and not (view / f.name).exists():
            (view / f.name).symlink_to(f.resolve())
    config = json.loads((model / "config.json").read_text())
    rope = config.get("rope_parameters") or {}
    if "rope_theta" not in config and "rope_theta" in rope:
        config["rope_theta"] = rope["rope_theta"]
    (view / "config.json").write_text(json.dumps(config, indent=2))
    shards = sorted(p.name for p in model.glob("*.safetensors"))
    if not (view / "model.safetensors.index.json").exists():
        weight_map = {}
        for name in shards:
            with safe_open(str(model / name), framework="pt") as f:
                weight_map.update({k: name for k in f.keys()})
        (view / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return view


def draft_config(target_config: dict, draft_vocab: int) -> dict:
    """Their traineagle3/config.json with the target's shapes (what a user of the official code writes for a new target)."""
    keys = ("bos_token_id", "eos_token_id", "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
            "max_position_embeddings", "num_attention_heads", "num_key_value_heads", "pad_token_id", "rms_norm_eps",
            "vocab_size")
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True}
    config.update({k: target_config[k] for k in keys if k in target_config})
    config["draft_vocab_size"] = draft_vocab
    return config


def read_rows(path: Path) -> list[tuple[list[int], list[int]]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append((list(map(int, row["input_ids"])), [int(bool(m)) for m in row["loss_mask"]]))
    if not rows:
        raise SystemExit(f"eagle3_official_cpu: error: no rows in {path}")
    return rows


def vocabulary_cache(rows, n: int, vocab_size: int) -> dict[str, torch.Tensor]:
    """scandata's draft vocabulary: the n tokens most frequent at loss positions, sorted; d2t = id - index, t2d."""
    counts = Counter(t for ids, mask in rows for t, m in zip(ids, mask) if m)
    used = sorted(t for t, _ in counts.most_common(n))
    if len(used) < n:  # fewer distinct tokens than the draft vocabulary: topped up with the lowest unused ids, so
        # that the draft vocabulary has the size their lm_head is built with (scandata would leave it shorter)
        seen = set(used)
        used = sorted(used + [t for t in range(vocab_size) if t not in seen][: n - len(used)])
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[used] = True
    return {"d2t": torch.tensor([t - i for i, t in enumerate(used)]), "t2d": t2d}


def lr_at(fraction: float, peak: float) -> float:
    """WarmupDecayLR's shape over the clock: linear warm-up, then linear decay to 0 at the end."""
    if fraction < WARMUP_SHARE:
        return peak * fraction / WARMUP_SHARE
    return peak * max(0.0, (1 - fraction) / (1 - WARMUP_SHARE))


def main(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    source, model, save = Path(args.source).resolve(), Path(args.model).resolve(), Path(args.save).resolve()
    if not (source / "cnets.py").is_file():
        raise SystemExit(f"eagle3_official_cpu: error: {source} has no cnets.py (give the official code's eagle/traineagle3 folder)")
    if not Path(args.rows).is_file() or not (model / "config.json").is_file():
        raise SystemExit(f"eagle3_official_cpu: error: no rows file at {args.rows} or no config.json in the model folder {model}")
    if (save / "model.safetensors").exists():
        raise SystemExit(f"eagle3_official_cpu: error: {save} already holds a draft (model.safetensors); give a new --save")
    if args.minutes <= 0:
        raise SystemExit(f"eagle3_official_cpu: error: --minutes must be > 0, got {args.minutes}")
    save.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    rows = read_rows(Path(args.rows))
    view = target_view(model, save)
    target_config = json.loads((view / "config.json").read_text())
    config_dict = draft_config(target_config, args.draft_vocab_size)
    (save / "config.json").write_text(json.dumps(config_dict, indent=2))
    work = save / "work"  # their scandata reads cache.pt from the working folder
    work.mkdir(exist_ok=True)
    torch.save(vocabulary_cache(rows, args.draft_vocab_size, target_config["vocab_size"]), work / "cache.pt")
    os.chdir(work)
    sys.path.insert(0, str(source))
    import cnets
    from configs import EConfig

    bf16 = torch.bfloat16
    loader = cnets.LlamaForCausalLM.from_pretrained
    cnets.LlamaForCausalLM.from_pretrained = lambda path, **kw: loader(path, **{**kw, "torch_dtype": bf16})

    config = EConfig.from_pretrained(str(save))
    net = cnets.Model(config, None, SimpleNamespace(gradient_checkpointing=False), path=str(view), load_emb=True, load_head=True)
    net.scandata(args.rows, str(view))
    trainable = [p for p in net.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=0.0, betas=BETAS, weight_decay=0.0)
    net.train()
    budget = args.minutes * 60
    started = time.perf_counter()
    steps = micro = epochs = 0
    accs: list[float] = []
    done = False
    while not done:
        order = list(range(len(rows)))
        random.Random(args.seed + epochs + 1).shuffle(order)
        for i in order:
            ids, mask = rows[i]
            input_ids = torch.tensor([ids])
            with torch.autocast("cpu", dtype=bf16):
                plosses, _, accs = net(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                       loss_mask=torch.tensor([mask]))
            loss = sum(DECAY**j * p for j, p in enumerate(plosses)) / ACCUMULATE
            loss.backward()
            micro += 1
            if micro % ACCUMULATE:
                continue
            elapsed = time.perf_counter() - started
            for group in optimizer.param_groups:
                group["lr"] = lr_at(elapsed / budget, args.lr)
            torch.nn.utils.clip_grad_norm_(trainable, CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps += 1
            if steps % 20 == 0:
                print(f"step={steps} seconds={elapsed:.0f} loss={loss.item() * ACCUMULATE:.4f} "
                      + " ".join(f"acc_{j}={a:.3f}" for j, a in enumerate(accs)), flush=True)
            if time.perf_counter() - started >= budget:
                done = True
                break
        epochs += 1
    seconds = time.perf_counter() - started
    state = {k: t.detach().to(bf16) if t.is_floating_point() else t for k, t in net.state_dict().items()
             if not k.startswith(("target_model.", "embed_tokens."))}
    from safetensors.torch import save_file

    save_file({k: t.contiguous() for k, t in state.items()}, str(save / "model.safetensors"))
    summary = {"steps": steps, "micro_batches": micro, "seconds": seconds, "epochs": epochs, "rows": len(rows),
               "last_acc": accs, "lr": args.lr, "draft_vocab_size": args.draft_vocab_size, "tensors": sorted(state)}
    (save / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"trained {steps} steps ({micro} micro-batches, {epochs} epochs begun) in {seconds:.0f} s; saved {save}")


if __name__ == "__main__":
    main(sys.argv[1:])
