"""Speculative against plain decoding at several tree sizes, side by side in one run.

    python scripts/bench_decode.py --head runs/demo/medusa/final --trees chain1 chain2 tree8 tree16 auto

Prints tokens/s of plain greedy decoding and of speculative decoding per tree, the speedup, τ and
the step cost relative to a plain step, on the embedded target (bf16) unless --target says
otherwise. A thin wrapper over headstart.eval.run.evaluate.
"""

from __future__ import annotations

import argparse

import torch

from headstart.config import DecodeConfig, EvalConfig
from headstart.eval.run import evaluate
from headstart.heads.checkpoint import load_heads
from headstart.target import Target


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--head", required=True)
    p.add_argument("--target", default="embedded")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--trees", nargs="+", default=["chain1", "chain2", "tree8", "tree16", "auto"])
    p.add_argument("--prompts", default="data/prompts/eval.jsonl")
    p.add_argument("--num-prompts", type=int, default=9)
    p.add_argument("--max-new-tokens", type=int, default=128)
    args = p.parse_args()

    target = Target.from_pretrained(args.target, dtype=getattr(torch, args.dtype))
    heads = load_heads(args.head, target=target)
    cfg = EvalConfig(prompts=args.prompts, num_prompts=args.num_prompts, max_new_tokens=args.max_new_tokens, output="")
    rows = []
    for tree in args.trees:
        r = evaluate(target, heads, DecodeConfig(tree=tree), cfg, peers=False, progress=False)
        tps = r["tokens_per_s"]
        rows.append((tree, r["tree"]["size"], r["tree"]["depth"], r["tau"], tps["plain"], tps["speculative"], r["speedup"]))
        print(f"done {tree}", flush=True)
    print(f"\n{target.name} ({args.dtype}), {args.num_prompts} prompts x {args.max_new_tokens} tokens, greedy, {torch.get_num_threads()} threads\n")
    print("| tree | nodes | depth | τ | plain tok/s | spec tok/s | speedup | step cost vs plain |")
    print("|---|---|---|---|---|---|---|---|")
    for tree, n, d, tau, plain, spec, speedup in rows:
        print(f"| {tree} | {n} | {d} | {tau:.2f} | {plain:.1f} | {spec:.1f} | {speedup:.2f}x | {tau / speedup:.2f}x |")


if __name__ == "__main__":
    main()
