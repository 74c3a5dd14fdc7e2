"""Data-pipeline benchmark on the embedded target (SmolLM2-135M-Instruct, on this machine's CPU).

On CPUs without AVX-512 bf16 (AVX2 only), bf16 matmuls are slower than float32: pass
`--dtype float32` there.

    .venv/bin/python scripts/bench_data.py [--dtype bfloat16] [--prompts 16] [--new-tokens 64] [--steps 4]
                                           [--batch 4] [--max-length 256] [--threads N]

1. Distillation tokens/s: `headstart.train.distill.distill` (batched, sorted by length) against a
   plain loop of one `model.generate` per prompt, on the same prompts, greedy.
2. Training tokens/s of a Medusa head (3 heads, shared lm_head, 8192-token draft vocabulary, as the
   demo recipe): online features (the target runs in every step) against an offline feature cache
   written by `write_feature_cache` (bf16), same batches, forward + backward + AdamW step.
Prints one JSON object; counts are real (unpadded) tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

import headstart as hs
from headstart.chat import encode_chat
from headstart.config import DistillConfig, TrainConfig
from headstart.heads.losses import LossSettings
from headstart.heads.vocab import frequent_tokens
from headstart.jsonl import read_jsonl
from headstart.train.data import build_examples, collate
from headstart.train.distill import distill
from headstart.train.features import batch_features, training_dataset, write_feature_cache

CORPUS = "data/distilled/smollm2-135m.jsonl.gz"


def bench_distill(target, prompts_file: Path, n: int, new_tokens: int, out_dir: Path) -> dict:
    tok = target.tokenizer
    prompts = [r["prompt"] for _, r in read_jsonl(prompts_file)][:n]
    eos = tok.eos_token_id
    t0 = time.perf_counter()
    plain_tokens = 0
    for p in prompts:
        ids = encode_chat(tok, [{"role": "user", "content": p}])
        with torch.no_grad():
            out = target.model.generate(ids, max_new_tokens=new_tokens, do_sample=False, pad_token_id=eos, top_k=None)
        new = out[0, ids.shape[1] :].tolist()
        plain_tokens += new.index(eos) if eos in new else len(new)
        print(f"plain generate: {plain_tokens} tokens, {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    plain_s = time.perf_counter() - t0

    sub = out_dir / "prompts.jsonl"
    sub.write_text("".join(json.dumps({"id": f"b{i}", "prompt": p}) + "\n" for i, p in enumerate(prompts)))
    cfg = DistillConfig(prompts=str(sub), output=str(out_dir / "distilled.jsonl"), batch_size=n, max_new_tokens=new_tokens)
    stats = distill(target, cfg, progress=False)
    return {
        "prompts": n,
        "max_new_tokens": new_tokens,
        "plain_loop": {"tokens": plain_tokens, "seconds": round(plain_s, 1), "tokens_per_s": round(plain_tokens / plain_s, 1)},
        "batched_distill": {"tokens": stats["new_tokens"], "seconds": stats["seconds"], "tokens_per_s": stats["tokens_per_s"]},
        "speedup": round(stats["tokens_per_s"] / (plain_tokens / plain_s), 2),
    }


def bench_training(target, steps: int, batch: int, max_length: int, bf16: bool, out_dir: Path) -> dict:
    examples, _ = build_examples(target.tokenizer, [CORPUS], max_length, limit=steps * batch)
    t0 = time.perf_counter()
    cache = write_feature_cache(target, examples, out_dir / "features", (), "bfloat16", batch_size=batch, progress=False)
    cache_s = time.perf_counter() - t0
    draft = frequent_tokens(examples, 8192, target.vocab_size)
    cfg = TrainConfig(bf16=bf16)
    result = {"steps": steps, "batch": batch, "max_length": max_length, "tokens_per_step": sum(len(e.input_ids) for e in examples) // steps,
              "cache": {"seconds": round(cache_s, 1), "bytes": cache["written_bytes"], "estimated_bytes": cache["estimated_bytes"]}}
    for mode in ("online", "offline"):
        torch.manual_seed(0)
        heads = hs.heads.build("medusa", target, num_heads=3, draft_vocab=draft).float()
        opt = torch.optim.AdamW([p for p in heads.parameters() if p.requires_grad], lr=1e-3)
        ds = training_dataset(examples, str(out_dir / "features") if mode == "offline" else None, target, heads.feature_layers)
        times, tokens = [], []
        for s in range(steps):
            t = time.perf_counter()
            b = collate([ds[i] for i in range(s * batch, (s + 1) * batch)])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                features = batch_features(target, b, heads.feature_layers)
                loss, _ = heads.training_loss(features, b, target, heads.options_class(num_heads=3), LossSettings.from_config(cfg))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - t)
            tokens.append(int(b["attention_mask"].sum()))
        total = sum(times[1:])  # the first step warms up
        print(f"{mode} training: steps {[round(t, 1) for t in times]} s", file=sys.stderr, flush=True)
        result[mode] = {"seconds_per_step": round(total / (steps - 1), 2), "tokens_per_s": round(sum(tokens[1:]) / total, 1)}
    result["speedup"] = round(result["offline"]["tokens_per_s"] / result["online"]["tokens_per_s"], 2)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = hs.embedded_target(dtype=getattr(torch, args.dtype))
    with tempfile.TemporaryDirectory() as tmp:
        report = {
            "target": target.name,
            "dtype": args.dtype,
            "threads": torch.get_num_threads(),
            "distill": bench_distill(target, Path("data/prompts/eval.jsonl"), args.prompts, args.new_tokens, Path(tmp)),
            "train_medusa": bench_training(target, args.steps, args.batch, args.max_length, args.dtype == "bfloat16", Path(tmp)),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
