"""Medusa-1 against Medusa-2 on the embedded target: same data, same wall-clock training budget.

    python scripts/bench_medusa2.py --minutes 11 --prompts 9 --max-new-tokens 96

Medusa-1 trains its heads on the frozen SmolLM2 (recipes/smollm2-135m/medusa.yaml); Medusa-2 trains
heads and LoRA adapters together on a copy of it (recipes/smollm2-135m/medusa2.yaml, KL to the base
model). Then, on the same held-out prompts, greedy, interleaved so that every ratio is measured side
by side: plain decoding of the base model, Medusa-1 on the base model, plain decoding of the adapted
model, Medusa-2 on the adapted model (the model a Medusa-2 head verifies with). Prints τ, tokens/s
and speedup against plain decoding of the base model, whether each speculative output equals its
own target's plain output, and the share of prompts whose greedy output the adapters changed.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

from headstart.chat import encode_chat
from headstart.config import parse_script_args
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.plain import greedy_generate
from headstart.embedded import embedded_target
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads
from headstart.recipe import load_recipe
from headstart.target import Target
from headstart.train.trainer import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=11.0, help="training budget of each (the demo's)")
    ap.add_argument("--prompts", type=int, default=9, help="held-out prompts (evenly across categories)")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--tree-sizes", type=int, nargs="+", default=[4, 8], help="'auto' trees of these sizes")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", default="runs/bench_medusa2")
    ap.add_argument("--reuse", action="store_true", help="skip training where OUT/<name>/final exists")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides for both, e.g. data.limit=2000")
    args = parse_script_args(ap, sys.argv[1:])  # dotted overrides may follow a list option
    torch.manual_seed(0)
    base = embedded_target(dtype=getattr(torch, args.dtype))
    adapted = Target(copy.deepcopy(base.model), base.tokenizer, name=base.name)  # Medusa-2 adapts this copy
    out = Path(args.out)
    trained, heads = {}, {}
    for name, recipe_file, target in (("medusa1", "medusa", base), ("medusa2", "medusa2", adapted)):
        folder = out / name
        recipe = load_recipe(f"recipes/smollm2-135m/{recipe_file}.yaml", [
            f"train.output_dir={folder}", f"train.max_minutes={args.minutes}", "train.save_steps=100000",
            f"target.dtype={args.dtype}", *args.overrides,
        ])
        if not (args.reuse and (folder / "final" / "config.json").is_file()):
            print(f"training {name} for {args.minutes} min", flush=True)
            s = train(recipe, target)
            trained[name] = {"steps": s.steps, "seconds": s.train_seconds, "examples_seen": s.steps * recipe.train.batch_size,
                             "heldout": s.heldout}
        heads[name] = load_heads(folder / "final", target=target)  # Medusa-2's puts its adapter on `adapted`
    assert adapted.adapter is not None and base.adapter is None

    gens = {}
    for size in args.tree_sizes:
        gens[f"Medusa-1 tree{size}"] = (base, SpeculativeGenerator(base, heads["medusa1"], tree="auto", tree_size=size))
        gens[f"Medusa-2 tree{size}"] = (adapted, SpeculativeGenerator(adapted, heads["medusa2"], tree="auto", tree_size=size))
    prompts = load_eval_prompts("data/prompts/eval.jsonl", args.prompts)
    tok = base.tokenizer
    warm = encode_chat(tok, [{"role": "user", "content": "Hello"}])
    for t in (base, adapted):
        greedy_generate(t, warm, 4)
    for _, g in gens.values():
        g.generate(warm, 4)
    names = ["plain (base)", "plain (adapted)", *gens]
    totals = {n: {"tokens": 0, "seconds": 0.0, "steps": [], "match": 0} for n in names}
    changed = []
    for p in prompts:
        ids = encode_chat(tok, p.messages)
        refs = {}
        for label, t in (("base", base), ("adapted", adapted)):
            res = greedy_generate(t, ids, args.max_new_tokens)
            refs[label] = res.sequences[0].tolist()
            totals[f"plain ({label})"]["tokens"] += res.new_tokens
            totals[f"plain ({label})"]["seconds"] += res.seconds
        if refs["base"] != refs["adapted"]:
            changed.append(p.id)
        for name, (t, g) in gens.items():
            res = g.generate(ids, args.max_new_tokens)
            tot = totals[name]
            tot["tokens"] += res.new_tokens
            tot["seconds"] += res.seconds
            tot["steps"] += res.accepted_per_step
            tot["match"] += res.sequences[0].tolist() == refs["adapted" if t is adapted else "base"]
    speed0 = totals["plain (base)"]["tokens"] / totals["plain (base)"]["seconds"]
    rows = []
    for name, t in totals.items():
        tps = t["tokens"] / t["seconds"]
        tau = sum(a + 1 for a in t["steps"]) / len(t["steps"]) if t["steps"] else 1.0
        rows.append({"decoding": name, "tau": round(tau, 3), "tokens_per_s": round(tps, 2), "speedup": round(tps / speed0, 3),
                     "match": f"{t['match']}/{len(prompts)}" if t["steps"] else "-"})
    lines = [
        f"SmolLM2-135M-Instruct, {args.dtype}, greedy, {len(prompts)} held-out prompts x {args.max_new_tokens} tokens, "
        f"training budget {args.minutes} min each",
        "",
        "| decoding | τ | tokens/s | vs plain (base) | identical to its target's plain output |",
        "|---|---|---|---|---|",
        *[f"| {r['decoding']} | {r['tau']:.2f} | {r['tokens_per_s']} | {r['speedup']:.2f}x | {r['match']} |" for r in rows],
        "",
        f"Greedy output changed by the Medusa-2 adapters: {len(changed)}/{len(prompts)} held-out prompts {changed}",
    ]
    table = "\n".join(lines)
    print(table)
    for name, info in trained.items():
        print(f"{name}: {info['steps']} steps ({info['examples_seen']} sequences) in {info['seconds']} s; held-out {json.dumps(info['heldout'])}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"rows": rows, "changed": changed, "prompts": len(prompts), "trained": trained,
                                                "minutes": args.minutes, "time": time.strftime("%Y-%m-%d %H:%M")}, indent=2) + "\n")
    (out / "bench.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
