"""Speculative against plain decoding at several tree sizes, side by side in one run.

    python scripts/bench_decode.py --head runs/demo/medusa/final --trees chain1 chain2 tree8 tree16 auto
    python scripts/bench_decode.py --head runs/eagle3/final --total-tokens 8 16 32   # a dynamic (EAGLE) head
    python scripts/bench_decode.py --head runs/demo/medusa/final --trees tree8 --batch 4  # rows together

Prints tokens/s of HF `generate`, of headstart's plain loop and of speculative decoding per tree,
the speedup over HF `generate`, τ, and where a speculative step's time goes: the share spent
outside the target's verification forward (drafting, acceptance, cache commit, bookkeeping).
With --batch B > 1 it also decodes the prompts B at a time (left-padded, one `generate` call per
batch) and prints tokens/s against the same prompts decoded one after another, and that share.
Embedded target in bf16 unless --target/--dtype say otherwise; greedy.
"""

from __future__ import annotations

import argparse
import time

import torch

from headstart.chat import encode_chat
from headstart.decode.contract import trait
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import plain_generate
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads
from headstart.target import Target


def left_padded(prompts: list[torch.Tensor], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and attention mask of (1, T_i) prompts, padded on the left as HF batches them."""
    width = max(p.shape[1] for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - p.shape[1] :], mask[i, width - p.shape[1] :] = p[0], 1
    return ids, mask


def outside_forward(timings: dict) -> tuple[float, float]:
    """Shares of a step's time spent outside the target's forward, and in drafting."""
    total = sum(timings.values()) or 1.0
    return 1 - timings.get("target_forward", 0.0) / total, timings.get("draft", 0.0) / total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--head", required=True)
    p.add_argument("--target", default="embedded")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--trees", nargs="+", default=["chain1", "chain2", "tree8", "tree16", "tree32", "auto"])
    p.add_argument("--total-tokens", nargs="+", type=int, default=[4, 8, 16, 32], help="dynamic heads: tree sizes")
    p.add_argument("--depth", type=int, default=None, help="dynamic heads: draft depth")
    p.add_argument("--top-k", type=int, default=None, help="dynamic heads: children per node")
    p.add_argument("--prompts", default="data/prompts/eval.jsonl")
    p.add_argument("--num-prompts", type=int, default=9)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--batch", type=int, default=1, help="also decode the prompts this many at a time (> 1)")
    p.add_argument("--no-pack", action="store_true", help="keep PyTorch's stock F.linear (default: Linear weights packed for oneDNN on CPU, as the CLI does)")
    args = p.parse_args()

    target = Target.from_pretrained(args.target, dtype=getattr(torch, args.dtype), pack_linears=not args.no_pack)
    heads = load_heads(args.head, target=target)
    tok = target.tokenizer
    prompts = [encode_chat(tok, [{"role": "user", "content": r.prompt}]) for r in load_eval_prompts(args.prompts, args.num_prompts)]
    eos = target.model.generation_config.eos_token_id
    n = args.max_new_tokens

    def hf():
        toks, secs = 0, 0.0
        for ids in prompts:
            start = time.perf_counter()
            out = target.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                                        pad_token_id=tok.eos_token_id)
            secs += time.perf_counter() - start
            toks += out.shape[1] - ids.shape[1]
        return toks / secs

    def ours_plain():
        toks, secs = 0, 0.0
        for ids in prompts:
            out = plain_generate(target, ids, n)
            toks, secs = toks + out.new_tokens, secs + out.seconds
        return toks / secs

    if trait(heads, "dynamic"):
        configs = [(f"dynamic {t}", {"total_tokens": t, "depth": args.depth, "top_k": args.top_k}) for t in args.total_tokens]
    else:
        configs = [(tree, {"tree": tree}) for tree in args.trees]
    plain_generate(target, prompts[0], 8)  # warm-up
    hf_tps, plain_tps = hf(), ours_plain()
    rows = []
    for name, kw in configs:
        gen = SpeculativeGenerator(target, heads, **kw)
        gen.generate(prompts[0], 8)
        toks, secs, steps, timings = 0, 0.0, [], {}
        for ids in prompts:
            out = gen.generate(ids, n, eos_token_id=eos, profile=True)
            toks, secs = toks + out.new_tokens, secs + out.seconds
            steps += out.accepted_per_step
            for k, v in out.timings.items():
                timings[k] = timings.get(k, 0.0) + v
        settings = gen.tree_settings()
        tau = sum(a + 1 for a in steps) / len(steps)
        row = [name, settings["size"], settings["depth"], tau, toks / secs, *outside_forward(timings)]
        if args.batch > 1:
            btoks, bsecs, btimings = 0, 0.0, {}
            for i in range(0, len(prompts), args.batch):
                ids, mask = left_padded(prompts[i : i + args.batch], tok.pad_token_id or 0)
                out = gen.generate(ids, n, eos_token_id=eos, attention_mask=mask, profile=True)
                btoks, bsecs = btoks + out.new_tokens, bsecs + out.seconds
                for k, v in out.timings.items():
                    btimings[k] = btimings.get(k, 0.0) + v
            row += [btoks / bsecs, outside_forward(btimings)[0]]
        rows.append(row)
        print(f"done {name}", flush=True)
    batch = f"batch 1 and {args.batch}" if args.batch > 1 else "batch 1"
    print(f"\n{target.name} ({args.dtype}), {len(prompts)} prompts x {n} tokens, greedy, {batch}, "
          f"{torch.get_num_threads()} threads; head {args.head} ({heads.kind})\n")
    head = "| decoding | nodes | depth | τ | tok/s | vs HF generate | vs our plain loop | outside target forward |"
    head += " of which drafting |"
    rule = "|---|---|---|---|---|---|---|---|---|"
    more = ""
    if args.batch > 1:
        head += f" batch {args.batch} tok/s | vs one by one | outside target forward (batch) |"
        rule += "---|---|---|"
        more = " — | — | — |"
    print(head)
    print(rule)
    print(f"| HF generate | — | — | 1.00 | {hf_tps:.1f} | 1.00x | {hf_tps / plain_tps:.2f}x | — | — |{more}")
    print(f"| headstart plain loop | — | — | 1.00 | {plain_tps:.1f} | {plain_tps / hf_tps:.2f}x | 1.00x | — | — |" + more)
    for name, size, depth, tau, tps, outside, draft, *batched in rows:
        line = (f"| {name} | {size} | {depth} | {tau:.2f} | {tps:.1f} | {tps / hf_tps:.2f}x | {tps / plain_tps:.2f}x | "
                f"{outside:.1%} | {draft:.1%} |")
        if batched:
            line += f" {batched[0]:.1f} | {batched[0] / tps:.2f}x | {batched[1]:.1%} |"
        print(line)


if __name__ == "__main__":
    main()
