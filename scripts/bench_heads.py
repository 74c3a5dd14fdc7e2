"""Medusa-1, EAGLE and EAGLE-3 heads side by side on the embedded target: same data, same budget.

    python scripts/bench_heads.py --minutes 8 --prompts 18

Each head kind trains for the same wall-clock budget on the same distilled corpus (its recipe in
recipes/smollm2-135m/), then all are decoded greedily on the same held-out prompts, interleaved
with plain decoding so that every ratio is measured side by side in one run. Prints a Markdown
table (τ with its tree settings, tokens/s, speedup) and writes JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from headstart.chat import encode_chat
from headstart.config import load_recipe
from headstart.decode.generate import SpeculativeGenerator, greedy_generate
from headstart.embedded import embedded_target
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads
from headstart.train.trainer import train

KINDS = ("medusa", "eagle", "eagle3")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=8.0, help="training budget per head kind")
    ap.add_argument("--prompts", type=int, default=18, help="held-out prompts (evenly across categories)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS))
    ap.add_argument("--out", default="runs/bench_heads")
    ap.add_argument("--reuse", action="store_true", help="skip training where OUT/<kind>/final exists")
    ap.add_argument("--settings", default=None, help="JSON: kind -> list of tree settings dicts to try")
    ap.add_argument("--dtype", default="bfloat16", help="the target's dtype for training and decoding")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides for every head, e.g. data.features_dir=runs/cache")
    args = ap.parse_args()
    torch.manual_seed(0)
    target = embedded_target(dtype=getattr(torch, args.dtype))
    out = Path(args.out)
    heads, trained = {}, {}
    for kind in args.kinds:
        folder = out / kind
        recipe = load_recipe(f"recipes/smollm2-135m/{kind}.yaml", [
            f"train.output_dir={folder}", f"train.max_minutes={args.minutes}", "train.save_steps=100000",
            f"target.dtype={args.dtype}", *args.overrides,
        ])
        if not (args.reuse and (folder / "final" / "config.json").is_file()):
            print(f"training {kind} for {args.minutes} min", flush=True)
            summary = train(recipe, target)
            trained[kind] = {"steps": summary["steps"], "seconds": summary["train_seconds"], "heldout": summary["heldout"]}
        heads[kind] = (load_heads(folder / "final", target=target), recipe)

    settings = json.loads(args.settings) if args.settings else {}
    gens = {}
    for kind, (head, recipe) in heads.items():
        if getattr(head, "dynamic", False):
            d = recipe.decode
            for s in settings.get(kind, [{"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens}]):
                gens[f"{kind} d{s['depth']} k{s['top_k']} n{s['total_tokens']}"] = SpeculativeGenerator(target, head, **s)
        else:
            for size in settings.get(kind, [8, 16]):
                gens[f"{kind} tree{size}"] = SpeculativeGenerator(target, head, tree="auto", tree_size=size)

    prompts = load_eval_prompts("data/prompts/eval.jsonl", args.prompts)
    tok = target.tokenizer
    warm = encode_chat(tok, [{"role": "user", "content": "Hello"}])
    greedy_generate(target, warm, 4)
    for g in gens.values():
        g.generate(warm, 4)
    totals = {name: {"tokens": 0, "seconds": 0.0, "steps": [], "match": 0} for name in ["plain", *gens]}
    for p in prompts:
        ids = encode_chat(tok, p.messages)
        plain = greedy_generate(target, ids, args.max_new_tokens)
        ref = plain.sequences[0].tolist()
        totals["plain"]["tokens"] += plain.new_tokens
        totals["plain"]["seconds"] += plain.seconds
        for name, g in gens.items():
            res = g.generate(ids, args.max_new_tokens)
            t = totals[name]
            t["tokens"] += res.new_tokens
            t["seconds"] += res.seconds
            t["steps"] += res.accepted_per_step
            t["match"] += res.sequences[0].tolist() == ref
    base = totals["plain"]["tokens"] / totals["plain"]["seconds"]
    rows = []
    for name, t in totals.items():
        tps = t["tokens"] / t["seconds"]
        tau = sum(a + 1 for a in t["steps"]) / len(t["steps"]) if t["steps"] else 1.0
        rows.append({"decoding": name, "tau": round(tau, 3), "tokens_per_s": round(tps, 1), "speedup": round(tps / base, 3),
                     "match": f"{t['match']}/{len(prompts)}" if name != "plain" else "-"})
    lines = [
        f"SmolLM2-135M-Instruct, {args.dtype}, greedy, {len(prompts)} held-out prompts x {args.max_new_tokens} tokens, "
        f"training budget {args.minutes} min per head",
        "",
        f"| decoding | τ | tokens/s | vs plain | identical to plain {args.dtype} |",
        "|---|---|---|---|---|",
        *[f"| {r['decoding']} | {r['tau']:.2f} | {r['tokens_per_s']} | {r['speedup']:.2f}x | {r['match']} |" for r in rows],
    ]
    table = "\n".join(lines)
    print(table)
    for kind, info in trained.items():
        print(f"{kind}: {info['steps']} steps in {info['seconds']} s; held-out {json.dumps(info['heldout'])}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"rows": rows, "trained": trained, "minutes": args.minutes,
                                                "time": time.strftime("%Y-%m-%d %H:%M")}, indent=2) + "\n")
    (out / "bench.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
