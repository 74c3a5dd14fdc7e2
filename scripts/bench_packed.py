"""Decoding with the target's (and the head's) Linear weights packed for oneDNN against PyTorch's stock F.linear, side by side.

    python scripts/bench_packed.py --head runs/demo/medusa/final
    python scripts/bench_packed.py --head runs/serve-eagle3/final --dtype float32 --rounds 3

Loads the target once and decodes the same prompts greedily with HF generate, headstart's plain loop
and the head (its own saved tree, and with a prompt-lookup branch), in three modes taking turns
(everything stock; the target packed, the head stock; both packed, what decoding does by default)
so that drift on a shared machine falls on all; prints tokens/s of each and the ratios, and whether
packed outputs equal stock ones token for token.
"""

from __future__ import annotations

import argparse
import time

import torch

from headstart.chat import encode_chat
from headstart.config import DecodeConfig
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.hybrid import HybridHead
from headstart.decode.plain import plain_generate
from headstart.decode.tune import tree_options
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads
from headstart.packed import pack_linears, unpack_linears
from headstart.target import Target, cpu_kind


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--head", required=True)
    p.add_argument("--target", default="embedded")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--prompts", default="data/prompts/eval.jsonl")
    p.add_argument("--num-prompts", type=int, default=9)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--lookup", type=int, default=10, help="prompt-lookup branch length of the hybrid row (0: no row)")
    p.add_argument("--rounds", type=int, default=2, help="stock/packed pairs; tokens/s are summed over rounds")
    p.add_argument("--cpu-time", action="store_true",
                   help="one thread, timed by its CPU time instead of the wall clock: ratios a busy machine does not bend")
    args = p.parse_args()
    if args.cpu_time:
        torch.set_num_threads(1)
    clock = time.thread_time if args.cpu_time else time.perf_counter

    target = Target.from_pretrained(args.target, dtype=getattr(torch, args.dtype))
    head = load_heads(args.head, target=target)
    tok = target.tokenizer
    prompts = [encode_chat(tok, [{"role": "user", "content": r.prompt}]) for r in load_eval_prompts(args.prompts, args.num_prompts)]
    eos, n = target.model.generation_config.eos_token_id, args.max_new_tokens

    def hf(ids):
        start = clock()
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                                    pad_token_id=tok.eos_token_id)
        return out[0, ids.shape[1]:].tolist(), clock() - start

    def run(gen):
        def decode(ids):
            start = clock()
            out = gen(ids)
            return out.sequences[0, ids.shape[1]:].tolist(), clock() - start if args.cpu_time else out.seconds
        return decode

    def speculative(h):
        gen = SpeculativeGenerator(target, h, **tree_options(h, DecodeConfig(), set())[0])  # the head's saved tree
        return run(lambda ids: gen.generate(ids, n, eos_token_id=eos))

    methods = {
        "HF generate": hf,
        "headstart plain loop": run(lambda ids: plain_generate(target, ids, n, eos_token_id=eos)),
        f"{head.kind} (its saved tree)": speculative(head),
    }
    if args.lookup:
        methods[f"{head.kind} + lookup {args.lookup}"] = speculative(HybridHead(head, args.lookup))
    modes = ("stock", "target packed", "both packed")
    totals = {(m, mode): [0, 0.0] for m in methods for mode in modes}
    outputs: dict = {}
    for _ in range(args.rounds):
        for mode in modes:
            unpack_linears(target.model)
            unpack_linears(head)
            if mode != "stock":
                assert target.pack_linears(), "nothing was packed (not on CPU, or oneDNN lacks this dtype's kernels)"
            if mode == "both packed":
                pack_linears(head)
            for name, decode in methods.items():
                decode(prompts[0][:, :8])  # warm-up
                for i, ids in enumerate(prompts):
                    toks, secs = decode(ids)
                    totals[name, mode][0] += len(toks)
                    totals[name, mode][1] += secs
                    outputs.setdefault((name, mode, i), toks)
            print(f"done {mode}", flush=True)

    def tps(name, mode):
        t, s = totals[name, mode]
        return t / s

    print(f"\n{target.name} ({args.dtype}), {len(prompts)} prompts x {n} tokens, greedy, batch 1, "
          f"{torch.get_num_threads()} threads{' (CPU time)' if args.cpu_time else ''}, {cpu_kind()} CPU; head {args.head} ({head.kind}); {args.rounds} rounds\n")
    print("| decoding | stock tok/s | target packed tok/s | both packed tok/s | target packed / stock | both / target packed "
          "| vs plain loop (both packed) | same tokens as stock |")
    print("|---|---|---|---|---|---|---|---|")
    plain = "headstart plain loop"
    for name in methods:
        same = sum(outputs[name, "stock", i] == outputs[name, m, i] for m in modes[1:] for i in range(len(prompts)))
        t = [tps(name, m) for m in modes]
        print(f"| {name} | {t[0]:.1f} | {t[1]:.1f} | {t[2]:.1f} | {t[1] / t[0]:.2f}x | {t[2] / t[1]:.2f}x | "
              f"{t[2] / tps(plain, 'both packed'):.2f}x | {same}/{2 * len(prompts)} |")

if __name__ == "__main__":
    main()
