"""Medusa-1, EAGLE, EAGLE-3, P-EAGLE (EAGLE-3 drafting in parallel) and DFlash side by side on the
embedded target: same data, same budget.

    python scripts/bench_heads.py --minutes 8 --prompts 18

Each head kind trains for the same wall-clock budget on the same distilled corpus (its recipe in
recipes/smollm2-135m/; `eagle3-parallel` is eagle3.yaml with head.parallel_drafting=true,
head.parallel_tokens=K and decode.depth=K, K = --parallel-tokens), then all are decoded greedily on
the same held-out prompts, interleaved with plain decoding so that every ratio is measured side by
side in one run. Prints two Markdown tables, held-out top-1 per position (Medusa head, EAGLE-3
training-time-test step, P-EAGLE parallel position, DFlash block position) with the simulated τ, and per decoding τ with
its tree settings, draft time per step, tokens/s and speedup; writes JSON beside them. Dynamic
heads decode a chain of decode.depth and the recipe's tree unless --settings says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from headstart.chat import encode_chat
from headstart.config import Recipe, parse_script_args
from headstart.decode.contract import trait
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.embedded import embedded_target
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads, read_config
from headstart.recipe import load_recipe
from headstart.train.trainer import train

KINDS = ("medusa", "eagle", "eagle3", "eagle3-parallel", "dflash")
PARALLEL = "eagle3-parallel"  # an EAGLE-3 head with parallel drafting (P-EAGLE, heads/parallel.py)


def recipe_for(kind: str, folder: Path, args) -> Recipe:
    """The recipe a kind trains with: recipes/smollm2-135m/<kind>.yaml, the budget and the overrides."""
    extra = []
    if kind == PARALLEL:
        k = args.parallel_tokens
        extra = ["head.parallel_drafting=true", f"head.parallel_tokens={k}", f"decode.depth={k}"]
    return load_recipe(f"recipes/smollm2-135m/{'eagle3' if kind == PARALLEL else kind}.yaml", [
        f"train.output_dir={folder}", f"train.max_minutes={args.minutes}", "train.save_steps=100000",
        f"target.dtype={args.dtype}", *extra, *args.overrides,
    ])


def dynamic_settings(recipe: Recipe) -> list[dict]:
    """A chain of decode.depth, then the recipe's tree."""
    d = recipe.decode
    chain = {"depth": d.depth, "top_k": 1, "total_tokens": d.depth}
    tree = {"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens}
    return [chain] if tree == chain else [chain, tree]


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
    ap.add_argument("--parallel-tokens", type=int, default=4, help="K of the eagle3-parallel head: positions drafted per forward")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides for every head, e.g. data.features_dir=runs/cache")
    args = parse_script_args(ap, sys.argv[1:])  # dotted overrides may follow a list option
    torch.manual_seed(0)
    target = embedded_target(dtype=getattr(torch, args.dtype), pack_linears=True)  # as the CLI loads it
    out = Path(args.out)
    heads, trained = {}, {}
    for kind in args.kinds:
        folder = out / kind
        recipe = recipe_for(kind, folder, args)
        if not (args.reuse and (folder / "final" / "config.json").is_file()):
            print(f"training {kind} for {args.minutes} min", flush=True)
            train(recipe, target)
        summary = read_config(folder / "final")["training"]  # this run's or, with --reuse, the earlier run's
        trained[kind] = {"steps": summary["steps"], "seconds": summary["train_seconds"], "heldout": summary["heldout"]}
        heads[kind] = (load_heads(folder / "final", target=target), recipe)

    settings = json.loads(args.settings) if args.settings else {}
    gens = {}
    for kind, (head, recipe) in heads.items():
        if trait(head, "dynamic"):
            for s in settings.get(kind, dynamic_settings(recipe)):
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
    totals = {name: {"tokens": 0, "seconds": 0.0, "steps": [], "match": 0, "draft": 0.0} for name in ["plain", *gens]}
    for p in prompts:
        ids = encode_chat(tok, p.messages)
        plain = greedy_generate(target, ids, args.max_new_tokens)
        ref = plain.sequences[0].tolist()
        totals["plain"]["tokens"] += plain.new_tokens
        totals["plain"]["seconds"] += plain.seconds
        for name, g in gens.items():
            res = g.generate(ids, args.max_new_tokens, profile=True)
            t = totals[name]
            t["draft"] += res.timings["draft"]
            t["tokens"] += res.new_tokens
            t["seconds"] += res.seconds
            t["steps"] += res.accepted_per_step
            t["match"] += res.sequences[0].tolist() == ref
    base = totals["plain"]["tokens"] / totals["plain"]["seconds"]
    rows = []
    for name, t in totals.items():
        tps = t["tokens"] / t["seconds"]
        tau = sum(a + 1 for a in t["steps"]) / len(t["steps"]) if t["steps"] else 1.0
        draft_ms = 1000 * t["draft"] / len(t["steps"]) if t["steps"] else None
        rows.append({"decoding": name, "tau": round(tau, 3), "draft_ms_per_step": None if draft_ms is None else round(draft_ms, 2),
                     "tokens_per_s": round(tps, 1), "speedup": round(tps / base, 3),
                     "match": f"{t['match']}/{len(prompts)}" if name != "plain" else "-"})
    lines = [
        f"SmolLM2-135M-Instruct, {args.dtype}, greedy, {len(prompts)} held-out prompts x {args.max_new_tokens} tokens, "
        f"training budget {args.minutes} min per head",
        "",
        "| head | steps | train s | held-out top-1 per position | simulated τ |",
        "|---|---|---|---|---|",
        *[f"| {kind} | {info['steps']} | {info['seconds']} | {' / '.join(f'{100 * a:.0f}%' for a in info['heldout']['top1'])} | "
          f"{info['heldout']['sim_accept_length']:.2f} |" for kind, info in trained.items()],
        "",
        f"| decoding | τ | draft ms/step | tokens/s | vs plain | identical to plain {args.dtype} |",
        "|---|---|---|---|---|---|",
        *[f"| {r['decoding']} | {r['tau']:.2f} | {'-' if r['draft_ms_per_step'] is None else r['draft_ms_per_step']} | "
          f"{r['tokens_per_s']} | {r['speedup']:.2f}x | {r['match']} |" for r in rows],
    ]
    table = "\n".join(lines)
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"rows": rows, "trained": trained, "minutes": args.minutes,
                                                "time": time.strftime("%Y-%m-%d %H:%M")}, indent=2) + "\n")
    (out / "bench.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
