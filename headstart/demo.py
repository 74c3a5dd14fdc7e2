"""`headstart demo`: the whole job on the embedded SmolLM2-135M-Instruct, on a CPU, in minutes.

1. distil: the target answers a slice of the project's prompts that the shipped corpus lacks
   (the shipped corpus, data/distilled/smollm2-135m.jsonl.gz, came from the same command);
2. train a head (EAGLE-3 by default; `--head medusa` or `--head eagle`) on shipped + fresh answers
   for a fixed wall-clock budget (EAGLE-3 since its hybrid with a wide, shallow tree measured ahead of
   Medusa's at the same budget: docs/results.md#the-head-a-wide-shallow-tree-and-a-lean-draft-layer), then
   choose its tree for this machine (`tune-tree`) unless the command line sets one;
3. decode held-out prompts plainly and speculatively (and with HF generate and prompt lookup),
   and print τ, acceptance per depth, tokens/s, speedup and whether the outputs matched.
Results: runs/demo/eval.json (schema: docs/eval.md), eval.md, eval.png and eval.html, run details in
runs/demo/demo.json, the head in runs/demo/<kind>/final.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from headstart.config import override_keys, recipe_to_dict, section_fields
from headstart.jsonl import read_jsonl
from headstart.recipe import load_recipe

DEMO_RECIPE = "recipes/smollm2-135m/eagle3.yaml"
# The demo's training clock, longer than the recipes' 11 minutes (which keep the head kinds comparable): the whole
# demo from a fresh clone still fits its 25 minutes on 2 cores, and the head gets more steps
# (docs/results.md#make-demo-with-a-15-minute-head). `headstart demo train.max_minutes=M` sets another.
DEMO_MINUTES = 15
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


DEMO_KINDS = ("medusa", "eagle", "eagle3")


def _should_tune(head, tree: str, given: frozenset[str]) -> bool:
    """Tune the head's tree unless the command line chose one (or a Medusa recipe names a fixed tree)."""
    from headstart.decode.contract import trait

    if trait(head, "dynamic"):
        return not given & {"depth", "top_k", "total_tokens"}
    return tree == "auto" and not given & {"tree", "tree_size"}


def _tuning(head, quick: bool) -> dict:
    """tune_tree's options: its defaults, or (--quick) two candidates measured on one short decode."""
    from headstart.decode.contract import trait

    if not quick:
        return {}
    if trait(head, "dynamic"):
        return {"grid": [(2, 1, 2), (2, 2, 4)], "num_prompts": 1, "max_new_tokens": 16}
    return {"sizes": (4, 8)}


def _summary_line(report: dict, steps: int, minutes: float) -> str:
    """What a user of a head-training framework wants first: the head's margin over decoding without
    it (greedy), and how much training the clock allowed on this machine."""
    greedy = next((r for r in report["results"] if r["temperature"] == 0), report["results"][0])
    margin = greedy.get("head_margin")
    trained = f"the head trained {steps} steps in {minutes:g} min"
    if margin is None:
        return f"summary: {trained}"
    by_label = {e["label"]: e for e in greedy["methods"]}
    best, free = by_label[margin["with_head"]], by_label[margin["without_head"]]
    gain = best.get("head_gain")
    added = (f"; on its own steps the head lifted τ {gain['tau_without_head']:.2f} -> {best['acceptance']['tau']:.2f}"
             if gain and gain["tau_without_head"] is not None else "")
    return (f"summary: the head's margin over no head {margin['ratio']:.2f}x ({margin['with_head']} "
            f"{best['speedup']:.2f}x plain, {margin['without_head']} {free['speedup']:.2f}x){added}; {trained}")


def run_demo(
    recipe_path: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    fresh: int = 32,
    kind: str | None = None,
) -> int:
    """The demo's four steps (the module's docstring), each a function below; returns the exit status."""
    started = time.perf_counter()
    if recipe_path is None:
        recipe_path = f"recipes/smollm2-135m/{kind}.yaml" if kind else DEMO_RECIPE
    recipe = _demo_recipe(recipe_path, overrides, quick)
    target = _load_target(recipe)
    distilled = _distil_fresh(target, recipe, load_recipe(recipe_path).distill.prompts, 8 if quick else fresh)
    summary = _train(target, recipe)
    given = section_fields(override_keys(overrides), "decode")  # a tree set on the demo's command line beats the tuned one
    _choose_tree(target, summary, recipe.decode.tree, given, quick, recipe.decode.draft_int8)
    report = _decode(target, summary.head, recipe, given)
    run = {
        "distill": distilled, "train": {**summary.record(), "final": str(summary.final)}, "recipe": recipe_to_dict(recipe),
        "total_minutes": round((time.perf_counter() - started) / 60, 1),
    }
    _report(report, run, summary, recipe)
    return 0


def _demo_recipe(recipe_path: str, overrides, quick: bool):
    """The recipe with the demo's outputs under runs/demo (the head in runs/demo/<kind>), its eval size and
    clock (and --quick's sizes), then the command line's overrides."""
    root = Path("runs/demo")
    kind = load_recipe(recipe_path).head.kind
    base = [
        f"train.output_dir={root / kind}", f"eval.output={root / 'eval.json'}",
        f"distill.output={root / 'distilled.jsonl'}", f"distill.prompts={root / 'prompts.jsonl'}",
        "eval.num_prompts=9", "eval.max_new_tokens=96",  # one prompt per category: minutes on a 2-core CPU
        f"train.max_minutes={DEMO_MINUTES}",
        "train.overwrite_output_dir=true",  # each demo trains its head afresh in runs/demo/<kind>
    ]
    return load_recipe(recipe_path, base + (QUICK if quick else []) + list(overrides))


def _load_target(recipe):
    """[1/4] The embedded target in the recipe's dtype."""
    from headstart.embedded import embedded_target
    from headstart.target import resolve_dtype

    dtype = resolve_dtype(recipe.target.dtype)
    print(f"[1/4] loading the embedded target (SmolLM2-135M-Instruct, {str(dtype)[6:]}; recipe: {recipe.target.dtype})", flush=True)
    return embedded_target(dtype=dtype, pack_linears=recipe.target.pack_linears)


def _distil_fresh(target, recipe, prompts_file: str, n: int) -> dict:
    """[2/4] The target answers up to `n` prompts of `prompts_file` that the shipped corpus lacks; their answers
    join the recipe's training files. Returns distillation's stats."""
    from headstart.train.distill import distill

    shipped = list(recipe.data.train_files)
    n_fresh = _fresh_prompts(prompts_file, shipped, n, Path(recipe.distill.prompts))
    print(f"[2/4] distilling {n_fresh} prompts the shipped corpus does not cover -> {recipe.distill.output}", flush=True)
    stats = distill(target, recipe.distill) if n_fresh else {"new_rows": 0}
    recipe.data.train_files = shipped + ([recipe.distill.output] if n_fresh else [])
    return stats


def _train(target, recipe):
    """[3/4] Train the recipe's head; returns train's summary (the head in it)."""
    from headstart.train.trainer import train

    print(f"[3/4] training a {recipe.head.kind} head for {recipe.train.max_minutes} min on {', '.join(recipe.data.train_files)}",
          flush=True)
    summary = train(recipe, target)
    held = summary.heldout
    print(f"      held-out top-1 per depth {held['top1']}" + (f", top-5 {held['top5']}" if "top5" in held else "")
          + f", simulated τ {held['sim_accept_length']}", flush=True)
    return summary


def _choose_tree(target, summary, tree: str, given: frozenset[str], quick: bool, draft_int8: bool) -> None:
    """Tune the trained head's tree for this machine (tune-tree; its products in int8 with `draft_int8`, as the
    decoding after it runs them), saved with it and set in memory, unless the command line chose one."""
    from headstart.decode.tune import format_tuning, tune_tree
    from headstart.heads.results import set_default_tree

    head = summary.head
    if not _should_tune(head, tree, given):
        return
    print("      choosing the tree for this machine (tune-tree):", flush=True)
    chosen, table = tune_tree(target, head, draft_int8=draft_int8, **_tuning(head, quick))
    set_default_tree(head, chosen, folder=summary.final, tuning=table)  # the head's own, saved and in memory
    print("\n".join("      " + line for line in format_tuning(table).splitlines()), flush=True)


def _decode(target, head, recipe, given: frozenset[str]) -> dict:
    """[4/4] Decode the held-out prompts plainly, speculatively and with HF's peers (eval's report)."""
    from headstart.eval.run import evaluate

    lookup = ", with lookup branches and corpus trees (hybrid), lookup alone, corpus + lookup" if recipe.decode.prompt_lookup else ""
    print(f"[4/4] decoding {recipe.eval.num_prompts} held-out prompts: plain, speculative{lookup}, HF generate, "
          "HF prompt lookup", flush=True)
    return evaluate(target, head, recipe.decode, recipe.eval, given=given)


def _report(report: dict, run: dict, summary, recipe) -> None:
    """Write runs/demo/demo.json (the run's details; eval.json keeps to its schema) and print the results."""
    from headstart.eval.run import format_table

    out = Path(recipe.eval.output)
    out.with_name("demo.json").write_text(json.dumps(run, indent=2) + "\n")
    print()
    print(format_table(report))
    print(f"\nresults: {out} (JSON, docs/eval.md), {out.with_suffix('.md')} (tables), {out.with_suffix('.png')} (plot: "
          f"acceptance per depth, accepted drafts per step, tokens/s), {out.with_suffix('.html')} (every verification step)")
    print(f"run details: {out.with_name('demo.json')}; head: {summary.final}")
    print(_summary_line(report, summary.steps, recipe.train.max_minutes))
    print(f"demo took {run['total_minutes']} min")
