"""`headstart distill | features | self-instruct | train | eval | generate | tune-tree | export | demo`: each verb takes a recipe and dotted overrides.

    headstart train recipes/smollm2-135m/medusa.yaml train.lr=3e-4 train.max_minutes=5

Results are printed for people and written as JSON for programs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _recipe(args):
    from headstart.config import load_recipe

    return load_recipe(args.recipe, args.overrides)


def _target(recipe):
    import os

    import torch

    from headstart.target import Target

    t = recipe.target
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else None
    return Target.from_pretrained(
        t.name_or_path, dtype=t.dtype, revision=t.revision, attn_implementation=t.attn_implementation, device=device
    )


def cmd_distill(args) -> int:
    from headstart.train.distill import distill

    recipe = _recipe(args)
    stats = distill(_target(recipe), recipe.distill)
    print(json.dumps(stats, indent=2))
    return 0


def cmd_features(args) -> int:
    from headstart.train.features import write_features

    recipe = _recipe(args)
    stats = write_features(recipe, _target(recipe))
    print(json.dumps(stats, indent=2))
    print(f"train from it with data.features_dir={stats['folder']}", file=sys.stderr)
    return 0


def cmd_self_instruct(args) -> int:
    from headstart.jsonl import append_rows, read_jsonl
    from headstart.train.self_instruct import self_instruct

    recipe = _recipe(args)
    seeds = [r for _, r in read_jsonl(recipe.distill.prompts)]
    exclude = [r["prompt"] for _, r in read_jsonl(args.exclude)] if args.exclude else []
    rows = self_instruct(_target(recipe), seeds, args.n, exclude=exclude, seed=recipe.distill.seed)
    append_rows(Path(args.out), rows)
    print(f"wrote {len(rows)} new prompts to {args.out}; distil them with distill.prompts={args.out}")
    return 0


def cmd_train(args) -> int:
    from headstart.train.trainer import train, zero3_loading

    recipe = _recipe(args)
    with zero3_loading(recipe):  # a ZeRO-3 recipe partitions the target across processes as it loads
        target = _target(recipe)
    result = train(recipe, target)
    print(json.dumps(result, indent=2))
    return 0


def cmd_eval(args) -> int:
    from headstart.eval.run import evaluate, format_table
    from headstart.eval.speed import EvalError
    from headstart.heads.checkpoint import load_heads

    recipe = _recipe(args)
    if args.temperature:
        recipe.eval.temperatures = args.temperature
    if args.assistant:
        recipe.eval.assistant = args.assistant
    if args.no_peers:
        recipe.eval.peers = False
    if len(set(args.head)) != len(args.head):
        print("headstart eval: error: the same --head is given twice", file=sys.stderr)
        return 2
    target = _target(recipe)
    heads = {path: load_heads(path, target=target) for path in args.head}
    try:
        report = evaluate(target, heads, recipe.decode, recipe.eval, tree=args.tree)
    except EvalError as e:
        print(f"headstart eval: error: {e}", file=sys.stderr)
        return 2
    print(format_table(report))
    if recipe.eval.output:
        out = Path(recipe.eval.output)
        print(f"\nresults: {out} (JSON, schema in docs/eval.md), {out.with_suffix('.md')}, {out.with_suffix('.png')} (plot), "
              f"{out.with_suffix('.html')} (every verification step)")
    return 0


def cmd_generate(args) -> int:
    import torch
    from transformers import TextStreamer

    from headstart.decode.generate import SpeculativeGenerator
    from headstart.decode.steps import format_steps
    from headstart.heads.checkpoint import load_heads

    recipe = _recipe(args)
    target = _target(recipe)
    heads = load_heads(args.head, target=target)
    gen = SpeculativeGenerator(target, heads, tree=args.tree or recipe.decode.tree, tree_size=recipe.decode.tree_size)
    tok = target.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": args.prompt}], tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(text, add_special_tokens=False).input_ids])
    streamer = None if args.show_drafts else TextStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    out = gen.generate(
        ids,
        max_new_tokens=args.max_new_tokens or recipe.decode.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        stop_strings=args.stop or None,
        streamer=streamer,
        record_steps=args.show_drafts,
    )
    if args.show_drafts:
        first = int(out.sequences[0, ids.shape[1]])
        print(format_steps(tok, first, out.steps[0], color=sys.stdout.isatty() and not args.no_color))
    settings = gen.tree_settings()
    print(
        f"\n[acceptance length {out.acceptance_length:.2f} ({settings['kind']} tree: {settings['size']} nodes, depth "
        f"{settings['depth']}, top-k {settings['top_k']}), {len(out.accepted_per_step)} target forwards, "
        f"temperature {args.temperature}, stopped by {out.finish_reasons[0]}]",
        file=sys.stderr,
    )
    return 0


def cmd_tune_tree(args) -> int:
    from headstart.decode.tune import tune_tree
    from headstart.heads.checkpoint import load_heads, update_config

    recipe = _recipe(args)
    target = _target(recipe)
    heads = load_heads(args.head, target=target)
    paths, table = tune_tree(target, heads)
    update_config(args.head, head={"tree": [list(p) for p in paths]}, tree_tuning=table)
    print(json.dumps(table, indent=2))
    print(f"wrote a {len(paths)}-node tree into {Path(args.head) / 'config.json'}; decoding uses it by default")
    return 0


def cmd_export(args) -> int:
    import tempfile

    import torch

    from headstart.heads.checkpoint import read_config
    from headstart.heads.export import ExportError, export, needs_target
    from headstart.heads.hub import HubError, push_to_hub

    if args.out is None and args.push_to_hub is None:
        print("headstart export: error: give --out DIR, --push-to-hub REPO, or both", file=sys.stderr)
        return 2
    head = Path(args.head)
    if args.recipe is not None and "=" in args.recipe:  # no recipe given: the first word is an override
        args.recipe, args.overrides = None, [args.recipe, *args.overrides]
    try:
        target = None
        # The target is loaded only when the layout must hold its weights (a shared lm_head's rows);
        # without a recipe, it is the target the head records.
        if args.merged_target or needs_target(head, args.layout):
            if args.recipe is None:
                recorded = (read_config(head).get("target") or {}).get("name_or_path")
                args.overrides = [f"target.name_or_path={recorded}", *args.overrides]
            target = _target(_recipe(args))
        if args.merged_target:
            # Medusa-2: the adapter goes into the target's weights, saved as a model to serve.
            from headstart.train.joint import save_merged_target

            save_merged_target(head, target, args.merged_target)
            print(f"merged the head's LoRA adapter into its target and saved that model to {args.merged_target}")
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(args.dtype)
        with tempfile.TemporaryDirectory(prefix="headstart-export-") as tmp:
            if args.out is None and args.layout == "headstart":
                out = head  # the head folder is already in our layout: publish it as it is
            else:
                out = export(head, target, args.out or Path(tmp) / "head", args.layout, dtype=dtype,
                             merged_target=args.merged_target)
                print(f"wrote the {args.layout} layout of {head} to {out}")
            if args.push_to_hub:
                url = push_to_hub(out, args.push_to_hub, private=args.private, revision=args.revision)
                print(f"pushed {out} to {args.push_to_hub}: {url}")
    except (ExportError, HubError, ValueError) as e:
        print(f"headstart export: error: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_demo(args) -> int:
    from headstart.demo import run_demo

    recipe, overrides = args.recipe, list(args.overrides)
    if recipe is not None and "=" in recipe:  # no recipe given: the first word is an override
        recipe, overrides = None, [recipe, *overrides]
    return run_demo(recipe, overrides, quick=args.quick, kind=args.head)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headstart", description="Train and run draft heads for speculative decoding.")
    sub = p.add_subparsers(dest="verb", required=True)

    def verb(name: str, fn, help: str, recipe_required: bool = True):
        s = sub.add_parser(name, help=help, description=help)
        if recipe_required:
            s.add_argument("recipe", help="YAML recipe, e.g. recipes/smollm2-135m/medusa.yaml")
        else:
            s.add_argument("recipe", nargs="?", default=None, help="YAML recipe (default: the demo's)")
        s.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.lr=3e-4")
        s.set_defaults(fn=fn)
        return s

    verb("distill", cmd_distill, "the target answers the recipe's prompts (self-distillation)")
    verb("features", cmd_features, "write the target's features for the training data to data.features_dir (offline cache)")
    s = verb("self-instruct", cmd_self_instruct, "the target writes new prompts in the style of distill.prompts")
    s.add_argument("--n", type=int, default=500, help="how many new prompts")
    s.add_argument("--out", required=True, help="JSONL the prompts are appended to")
    s.add_argument("--exclude", default="data/prompts/eval.jsonl", help="prompts never to repeat (held-out set)")
    verb("train", cmd_train, "train the recipe's head on the frozen target")
    s = verb("eval", cmd_eval, "acceptance (τ, per depth) and speed of heads against plain decoding and HF's peers")
    s.add_argument("--head", required=True, action="append", help="head folder (config.json + model.safetensors); repeat to compare several")
    s.add_argument("--tree", default=None, help="override decode.tree (static heads)")
    s.add_argument("--temperature", type=float, action="append", default=[], help="override eval.temperatures (repeatable, e.g. 0 and 0.7)")
    s.add_argument("--assistant", default=None, metavar="PATH", help="a draft model for HF assisted generation (same tokenizer as the target)")
    s.add_argument("--no-peers", action="store_true", help="skip HF generate and prompt lookup")
    s = verb("generate", cmd_generate, "answer one prompt with speculative decoding")
    s.add_argument("--head", required=True, help="head folder")
    s.add_argument("--prompt", required=True, help="the user message")
    s.add_argument("--tree", default=None, help="override decode.tree")
    s.add_argument("--max-new-tokens", type=int, default=None)
    s.add_argument("--temperature", type=float, default=0.0, help="0: greedy; > 0: lossless speculative sampling")
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--top-k", type=int, default=0)
    s.add_argument("--seed", type=int, default=None, help="seed for sampling (reproducible output)")
    s.add_argument("--stop", action="append", default=[], help="a stop string (repeatable)")
    s.add_argument("--show-drafts", action="store_true", help="show each verification step: accepted, rejected, corrected")
    s.add_argument("--no-color", action="store_true", help="plain text for --show-drafts even on a terminal")
    s = verb("tune-tree", cmd_tune_tree, "measure this machine's forward costs and store the best tree in the head")
    s.add_argument("--head", required=True, help="head folder; its config.json gets the tree")
    s = verb("export", cmd_export, "write a head in a serving layout (SGLang/vLLM EAGLE-3, vLLM Medusa, Medusa) and/or push it to the Hub", recipe_required=False)
    s.add_argument("--head", required=True, help="head folder (config.json + model.safetensors)")
    s.add_argument("--layout", default="headstart", help="headstart, vllm-medusa, medusa, eagle3 or speculators (the recipe's target is loaded only when the layout needs it: a shared lm_head's rows, an EAGLE-3 layer's config)")
    s.add_argument("--out", default=None, help="folder to write (replaced atomically)")
    s.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"], help="cast the weights (default: as trained)")
    s.add_argument("--merged-target", default=None, metavar="DIR", help="Medusa-2 heads: merge the LoRA adapter into the target, save that model to DIR (to serve with the head)")
    s.add_argument("--push-to-hub", default=None, metavar="REPO", help="upload the head files and a model card to this Hub repo")
    s.add_argument("--private", action="store_true", help="create the Hub repo private")
    s.add_argument("--revision", default=None, help="Hub branch to commit to (created if missing)")
    s = verb("demo", cmd_demo, "distill, train Medusa heads and measure them on the embedded SmolLM2", recipe_required=False)
    s.add_argument("--quick", action="store_true", help="a tiny run (minutes) to check the whole path")
    s.add_argument("--head", default=None, choices=["medusa", "eagle", "eagle3"], help="head kind to train (its recipe in recipes/smollm2-135m/)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from headstart.config import RecipeError
    from headstart.heads.checkpoint import CheckpointError
    from headstart.jsonl import DataError

    try:
        return args.fn(args)
    except (RecipeError, DataError, CheckpointError) as e:
        print(f"headstart {args.verb}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
