"""`headstart demo`: the whole job on the embedded SmolLM2-135M-Instruct, on a CPU, in minutes.

1. distil: the target answers a slice of the project's prompts that the shipped corpus lacks
   (the shipped corpus, data/distilled/smollm2-135m.jsonl.gz, came from the same command);
2. train Medusa-1 heads on shipped + fresh answers for a fixed wall-clock budget;
3. decode held-out prompts plainly and speculatively (and with HF generate and prompt lookup),
   and print τ, acceptance per depth, tokens/s, speedup and whether the outputs matched.
Results: runs/demo/eval.json and eval.md, the head in runs/demo/medusa/final.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from headstart.config import load_recipe, recipe_to_dict
from headstart.jsonl import read_jsonl

DEMO_RECIPE = "recipes/smollm2-135m/medusa.yaml"
QUICK = [
    "data.limit=400", "data.eval_size=40", "train.max_minutes=0.5", "eval.num_prompts=4",
    "eval.max_new_tokens=32", "train.save_steps=1000",
]


def _fresh_prompts(prompts_file: str, shipped: list[str], n: int, out: Path) -> int:
    """Write the first n prompts that no shipped conversation answers; returns how many."""
    seen = set()
    for f in shipped:
        if Path(f).is_file():
            seen |= {str(r.get("id")) for _, r in read_jsonl(f)}
    rows = [r for _, r in read_jsonl(prompts_file) if str(r.get("id")) not in seen][:n]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return len(rows)


def run_demo(recipe_path: str | None = None, overrides: list[str] | tuple[str, ...] = (), quick: bool = False, fresh: int = 64) -> int:
    import torch

    from headstart.embedded import embedded_target
    from headstart.eval.run import evaluate, format_table
    from headstart.train.distill import distill
    from headstart.train.trainer import train

    started = time.perf_counter()
    root = Path("runs/demo")
    base = [
        f"train.output_dir={root / 'medusa'}", f"eval.output={root / 'eval.json'}",
        f"distill.output={root / 'distilled.jsonl'}", f"distill.prompts={root / 'prompts.jsonl'}",
    ]
    recipe = load_recipe(recipe_path or DEMO_RECIPE, base + (QUICK if quick else []) + list(overrides))
    print(f"[1/4] loading the embedded target (SmolLM2-135M-Instruct, {recipe.target.dtype})", flush=True)
    target = embedded_target(dtype=getattr(torch, recipe.target.dtype))

    shipped = list(recipe.data.train_files)
    n_fresh = _fresh_prompts(load_recipe(recipe_path or DEMO_RECIPE).distill.prompts, shipped, 8 if quick else fresh, Path(recipe.distill.prompts))
    print(f"[2/4] distilling {n_fresh} prompts the shipped corpus does not cover -> {recipe.distill.output}", flush=True)
    distill_stats = distill(target, recipe.distill) if n_fresh else {"new_rows": 0}
    recipe.data.train_files = shipped + ([recipe.distill.output] if n_fresh else [])

    print(f"[3/4] training Medusa heads for {recipe.train.max_minutes} min on {', '.join(recipe.data.train_files)}", flush=True)
    summary = train(recipe, target)
    print(f"      held-out top-1 per head {summary['heldout']['top1']}, top-5 {summary['heldout']['top5']}", flush=True)

    from headstart.decode.tune import tune_tree
    from headstart.heads.checkpoint import load_heads, update_config

    heads = load_heads(summary["final"], target=target)
    if recipe.decode.tree == "auto":
        paths, table = tune_tree(target, heads, sizes=(4, 8) if quick else (4, 8, 12, 16, 24, 32))
        update_config(summary["final"], head={"tree": [list(p) for p in paths]}, tree_tuning=table)
        heads.options["tree"] = [list(p) for p in paths]  # what the saved config now says
        best = table["sizes"][len(paths)]
        print(f"      tree for this machine: {len(paths)} nodes (expected τ {best['expected_tau']}, step cost "
              f"{best['step_cost']}x a plain step)", flush=True)
    print(f"[4/4] decoding {recipe.eval.num_prompts} held-out prompts: plain, speculative, HF generate, HF prompt lookup", flush=True)
    report = evaluate(target, heads, recipe.decode, recipe.eval)
    report["demo"] = {
        "distill": distill_stats, "train": summary, "recipe": recipe_to_dict(recipe),
        "total_minutes": round((time.perf_counter() - started) / 60, 1),
    }
    Path(recipe.eval.output).write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(format_table(report))
    print(f"\nresults: {recipe.eval.output} (JSON), {Path(recipe.eval.output).with_suffix('.md')}; head: {summary['final']}")
    print(f"demo took {report['demo']['total_minutes']} min")
    return 0
