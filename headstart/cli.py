"""`headstart distill | features | self-instruct | train | eval | generate | tune-tree | export | serve-check | serve | promote | demo`: each verb takes a recipe and dotted overrides.

    headstart train recipes/smollm2-135m/medusa.yaml train.lr=3e-4 train.max_minutes=5

Overrides may come anywhere on the line, after options too. A head decodes with the tree given on
the command line (`decode.*` overrides, `--tree`), else its own saved or tuned tree, else the
recipe's decode section (`headstart.decode.tune.tree_options`). A bad input (a recipe value, a file, a
head for another target) is one `headstart VERB: error: ...` line and exit status 2; `--debug`
shows its traceback instead. Results are printed for people and written as JSON for programs.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path

from headstart.config import CONTEXT_WHY, DEPTH_WHY, MAX_CONTEXT, MAX_DEPTH, Bounds
from headstart.errors import HeadstartError


def _recipe(args):
    """The recipe with this command line's overrides; the dotted keys they set go into `args.given`."""
    from headstart.config import override_keys
    from headstart.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    args.given = override_keys(args.overrides)
    return recipe


def _no_recipe_first_override(args) -> None:
    """Verbs whose recipe is optional: a first word like `key=value` is an override, not the recipe."""
    if args.recipe is not None and "=" in args.recipe:
        args.recipe, args.overrides = None, [args.recipe, *args.overrides]


def _tree_given(args, recipe) -> frozenset[str]:
    """The decode fields this command line sets (dotted `decode.*` overrides, recorded by `_recipe`, and
    `--tree`, which goes into recipe.decode.tree): they beat the head's own tree (`tune.tree_options`)."""
    from headstart.config import section_fields

    given = section_fields(args.given, "decode")
    if args.tree:
        recipe.decode.tree, given = args.tree, given | {"tree"}
    return given


def _target(recipe):
    import os

    import torch

    from headstart.target import Target

    t = recipe.target
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else None
    return Target.from_pretrained(
        t.name_or_path, dtype=t.dtype, revision=t.revision, attn_implementation=t.attn_implementation, device=device,
        pack_linears=t.pack_linears,
    )


def cmd_distill(args) -> int:
    from headstart.lock import output_lock
    from headstart.train.distill import distill, load_prompt_rows
    from headstart.train.formats import expand_sources

    recipe = _recipe(args)
    if all(Path(s).is_file() for s in expand_sources(recipe.distill.prompts)):  # their rows checked before the target loads
        load_prompt_rows(recipe.distill)
    with output_lock(recipe.distill.output, "distill.output", "headstart distill"):  # before the target loads
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
    from headstart.train.trainer import check_recipe, run_lock, train, zero3_loading

    recipe = _recipe(args)
    check_recipe(recipe)
    with run_lock(recipe):  # before the target loads: a second run into output_dir is refused at once
        with zero3_loading(recipe):  # a ZeRO-3 recipe partitions the target across processes as it loads
            target = _target(recipe)
        summary = train(recipe, target)
    print(json.dumps({**summary.record(), "final": str(summary.final)}, indent=2))
    return 0


def cmd_eval(args) -> int:
    from headstart.eval.run import evaluate, format_table
    from headstart.heads.checkpoint import load_heads

    twice = sorted({path for path in args.head if args.head.count(path) > 1})
    if twice:
        raise HeadstartError(f"--head {twice[0]} is given twice; give each head once")
    recipe = _recipe(args)
    if args.temperature:
        recipe.eval.temperatures = args.temperature
    if args.assistant:
        recipe.eval.assistant = args.assistant
    if args.no_peers:
        recipe.eval.peers = False
    target = _target(recipe)
    heads = {path: load_heads(path, target=target, allow_other_target=args.allow_other_target) for path in args.head}
    report = evaluate(target, heads, recipe.decode, recipe.eval, given=_tree_given(args, recipe))
    print(format_table(report))
    if recipe.eval.output:
        out = Path(recipe.eval.output)
        print(f"\nresults: {out} (JSON, schema in docs/eval.md), {out.with_suffix('.md')}, {out.with_suffix('.png')} (plot), "
              f"{out.with_suffix('.html')} (every verification step)")
    return 0


def cmd_generate(args) -> int:
    from transformers import TextStreamer

    from headstart.chat import encode_chat
    from headstart.decode.generate import SpeculativeGenerator
    from headstart.decode.hybrid import HybridSettings, with_lookup
    from headstart.decode.steps import format_steps
    from headstart.decode.tune import tree_options
    from headstart.heads.checkpoint import load_heads

    recipe = _recipe(args)
    given = _tree_given(args, recipe)
    target = _target(recipe)
    head = load_heads(args.head, target=target, allow_other_target=args.allow_other_target)
    head = with_lookup(head, HybridSettings.from_decode(recipe.decode))  # hybrid trees
    options, source = tree_options(head, recipe.decode, given)
    gen = SpeculativeGenerator(target, head, draft_int8=recipe.decode.draft_int8, **options)
    tok = target.tokenizer
    ids = encode_chat(tok, [{"role": "user", "content": args.prompt}])
    streamer = None if args.show_drafts else TextStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    out = gen.generate(
        ids,
        max_new_tokens=recipe.decode.max_new_tokens if args.max_new_tokens is None else args.max_new_tokens,
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
    lookup = settings.get("lookup")
    branch = f", + a prompt-lookup branch of up to {lookup['max_tokens']} tokens" if lookup else ""
    if lookup and lookup.get("corpus_nodes"):
        branch += (f" and a corpus tree, the head's nodes and the corpus's sharing {lookup['shared_nodes']} by probability"
                   if lookup.get("shared_nodes") else f" and a corpus tree of {lookup['corpus_nodes']} nodes")
    print(
        f"\n[acceptance length {out.acceptance_length:.2f} ({settings['kind']} tree: {settings['size']} nodes, depth "
        f"{settings['depth']}, top-k {settings['top_k']}{branch}; from the {source}), {len(out.accepted_per_step)} target forwards, "
        f"temperature {args.temperature}, stopped by {out.finish_reasons[0]}]",
        file=sys.stderr,
    )
    return 0


def cmd_tune_tree(args) -> int:
    from headstart.decode.dynamic import DynamicTreeSpec
    from headstart.decode.tune import format_tuning, tune_tree
    from headstart.heads.checkpoint import load_heads
    from headstart.heads.results import set_default_tree

    recipe = _recipe(args)
    target = _target(recipe)
    head = load_heads(args.head, target=target, allow_other_target=args.allow_other_target)
    tree, table = tune_tree(target, head, prompts=args.prompts, num_prompts=args.num_prompts, grid=args.grid or None,
                            draft_int8=recipe.decode.draft_int8)
    set_default_tree(head, tree, folder=args.head, tuning=table)
    print(format_tuning(table))
    what = (f"a tree of depth {tree.depth}, top-k {tree.top_k}, {tree.total_tokens} nodes" if isinstance(tree, DynamicTreeSpec)
            else f"a {tree.size}-node tree")
    print(f"wrote {what} into {Path(args.head) / 'config.json'} (the table: its tree_tuning); decoding and eval use it "
          f"unless their command line sets decode.* or --tree")
    return 0


def cmd_export(args) -> int:
    from headstart.lock import output_lock

    if args.out is None and args.push_to_hub is None:
        raise HeadstartError("give --out DIR, --push-to-hub REPO, or both")
    with output_lock(args.out, "--out", "headstart export") if args.out else nullcontext():  # before the target loads
        return _export(args)


def _export(args) -> int:
    import tempfile

    import torch

    from headstart.embedded import HUB_ID
    from headstart.heads.checkpoint import read_config
    from headstart.heads.export import export, needs_target
    from headstart.heads.hub import push_to_hub

    head = Path(args.head)
    _no_recipe_first_override(args)
    target = None
    # The target is loaded only when the layout must hold its weights (a shared lm_head's rows);
    # without a recipe, it is the target the head records.
    if args.merged_target or needs_target(head, args.layout):
        if args.recipe is None:
            recorded = (read_config(head).get("target") or {}).get("name_or_path")
            if recorded == HUB_ID:  # the embedded copy of that model, shipped: no Hub needed (its fingerprint is checked)
                recorded = "embedded"
            args.overrides = [f"target.name_or_path={recorded}", *args.overrides]
        target = _target(_recipe(args))
    if args.merged_target:
        # Medusa-2: the adapter goes into the target's weights, saved as a model to serve. --out is
        # checked first, so that a refused --out leaves no merged model behind either.
        from headstart.files import replace_refusal
        from headstart.heads.export import ExportError
        from headstart.heads.merged_target import save_merged_target

        refusal = args.out and replace_refusal(args.out, args.force, keep=[head])
        if refusal:
            raise ExportError(f"not exporting to {args.out}: {refusal}")
        save_merged_target(head, target, args.merged_target, force=args.force)
        print(f"merged the head's LoRA adapter into its target and saved that model to {args.merged_target}")
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(args.dtype)
    with tempfile.TemporaryDirectory(prefix="headstart-export-") as tmp:
        if args.out is None and args.layout == "headstart":
            out = head  # the head folder is already in our layout: publish it as it is
        else:
            out = export(head, target, args.out or Path(tmp) / "head", args.layout, dtype=dtype,
                         merged_target=args.merged_target, force=args.force)
            print(f"wrote the {args.layout} layout of {head} to {out}")
        if args.push_to_hub:
            url = push_to_hub(out, args.push_to_hub, private=args.private, revision=args.revision)
            print(f"pushed {out} to {args.push_to_hub}: {url}")
    return 0


def cmd_serve_check(args) -> int:
    from headstart.serve.check import format_serving, serve_check

    recipe = _recipe(args)
    out = args.out or str(Path(recipe.eval.output).with_name("serve-check.json"))
    report = serve_check(recipe, _target(recipe), args.head, k=args.k, layout=args.layout, ngram=not args.no_ngram, output=out,
                         interleave=not args.sequential, compiled=args.compiled)
    print(format_serving(report))
    print(f"\nresults: {out} (JSON), {Path(out).with_suffix('.md')}, vLLM's log {Path(out).with_suffix('.vllm.log')}")
    return 0


def _serve_extras(args) -> dict:
    """vLLM's environment for --learn and --log-served, each checked (serve/server.py's learn_env, log_env)."""
    from headstart.serve.server import learn_env, log_env

    given = [name for name, value in (("--learn-dir", args.learn_dir), ("--learn-every", args.learn_every),
                                      ("--learn-cap", args.learn_cap)) if value is not None]
    if given and not args.learn:
        raise HeadstartError(f"{given[0]} applies to --learn; add --learn")
    extra = {}
    if args.learn:
        options = {k: v for k, v in (("every", args.learn_every), ("cap", args.learn_cap)) if v is not None}
        extra |= learn_env(args.method, args.head, args.learn_dir, **options)
    if args.log_served:
        extra |= log_env(args.log_served, args.log_served_mb)
    return extra


def cmd_serve(args) -> int:
    from headstart.serve.server import check_before_target, prepare, serve

    python = check_before_target(args.host, args.port)  # before the target loads, and before anything is written
    extra = _serve_extras(args)
    recipe = _recipe(args)
    plan = prepare(recipe, _target(recipe), args.head, args.method, args.k, extra)  # the target is freed before vLLM starts
    return serve(plan, python, host=args.host, port=args.port, eager=args.eager, max_model_len=args.max_model_len)


def cmd_promote(args) -> int:
    from headstart.files import write_json
    from headstart.serve.promote import PromoteError, format_promotion, logged_rows, promote, promote_refusal

    refusal = promote_refusal(Path(args.head), Path(args.over))  # before the target loads
    if refusal:
        raise PromoteError(refusal)
    rows = logged_rows(args.prompts, args.num_prompts)  # a bad log is refused before the target loads too
    recipe = _recipe(args)
    report = promote(_target(recipe), args.head, args.over, args.prompts, k=args.k, margin=args.margin,
                     num_prompts=args.num_prompts, rows=rows)
    print(format_promotion(report))
    if args.out:
        write_json(args.out, report)
        print(f"results: {args.out}")
    return 0


def cmd_demo(args) -> int:
    from headstart.demo import run_demo

    _no_recipe_first_override(args)
    return run_demo(args.recipe, args.overrides, quick=args.quick, kind=args.head)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports a bad command line as one `headstart VERB: error: ...` line."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


class _VerbParser(_Parser):
    """One verb's parser: words left over after its options are dotted overrides, as users type them
    (`headstart eval R --head H eval.num_prompts=13`); an unknown `--option` is still an error."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extra = super().parse_known_args(args, namespace)
        unknown = [a for a in extra if a.startswith("-")]
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        namespace.overrides = [*namespace.overrides, *extra]
        return namespace, []


def _ranged(tp: type, bounds: Bounds):
    """An argparse `type`: the text as `tp`, refused when it lies outside `bounds`."""

    def convert(text: str):
        try:
            value = tp(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if tp is int else 'a number'} {bounds}, got {text!r}") from None
        if value not in bounds:
            raise argparse.ArgumentTypeError(f"expected a value {bounds}, got {text}")
        return value

    return convert


def _grid_entry(text: str) -> tuple[int, ...]:
    """An argparse `type`: 'DEPTH,TOP_K,TOTAL' -> (depth, top_k, total_tokens)."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected DEPTH,TOP_K,TOTAL_TOKENS (three integers, e.g. 4,2,7), got {text!r}")
    return values


def _allow_other_target(s: argparse.ArgumentParser) -> None:
    s.add_argument("--allow-other-target", action="store_true",
                   help="load a head trained on another model of the same shapes (its drafts are tuned to that model: fewer are accepted)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="headstart", description="Train and run draft heads for speculative decoding.")
    debug = "on an error, show its traceback instead of one line"
    p.add_argument("--debug", action="store_true", help=debug)
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_VerbParser)

    def verb(name: str, fn, help: str, recipe_required: bool = True):
        s = sub.add_parser(name, help=help, description=help)
        if recipe_required:
            s.add_argument("recipe", help="YAML recipe, e.g. recipes/smollm2-135m/medusa.yaml")
        else:
            s.add_argument("recipe", nargs="?", default=None, help="YAML recipe (default: the demo's)")
        s.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.lr=3e-4 (anywhere on the line)")
        s.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug)  # SUPPRESS: keeps `headstart --debug VERB`
        s.set_defaults(fn=fn)
        return s

    verb("distill", cmd_distill, "the target answers the recipe's prompts (self-distillation)")
    verb("features", cmd_features, "write the target's features for the training data to data.features_dir (offline cache)")
    s = verb("self-instruct", cmd_self_instruct, "the target writes new prompts in the style of distill.prompts")
    s.add_argument("--n", type=_ranged(int, Bounds(ge=1)), default=500, help="how many new prompts")
    s.add_argument("--out", required=True, help="JSONL the prompts are appended to")
    s.add_argument("--exclude", default="data/prompts/eval.jsonl", help="prompts never to repeat (held-out set)")
    verb("train", cmd_train, "train the recipe's head on the frozen target")
    s = verb("eval", cmd_eval, "acceptance (τ, per depth) and speed of heads against plain decoding and HF's peers")
    s.add_argument("--head", required=True, action="append", help="head folder (config.json + model.safetensors); repeat to compare several")
    _allow_other_target(s)
    s.add_argument("--tree", default=None, help="decode.tree for every static head (beats each head's own tree, as decode.* overrides do)")
    s.add_argument("--temperature", type=_ranged(float, Bounds(ge=0)), action="append", default=[], help="override eval.temperatures (repeatable, e.g. 0 and 0.7)")
    s.add_argument("--assistant", default=None, metavar="PATH", help="a draft model for HF assisted generation (same tokenizer as the target)")
    s.add_argument("--no-peers", action="store_true", help="skip HF generate and prompt lookup")
    s = verb("generate", cmd_generate, "answer one prompt with speculative decoding")
    s.add_argument("--head", required=True, help="head folder")
    _allow_other_target(s)
    s.add_argument("--prompt", required=True, help="the user message")
    s.add_argument("--tree", default=None, help="decode.tree for a static head (beats the head's own tree, as decode.* overrides do)")
    s.add_argument("--max-new-tokens", type=_ranged(int, Bounds(ge=1, le=MAX_CONTEXT, why=CONTEXT_WHY)), default=None, help="default: decode.max_new_tokens")
    s.add_argument("--temperature", type=_ranged(float, Bounds(ge=0)), default=0.0, help="0: greedy; > 0: lossless speculative sampling")
    s.add_argument("--top-p", type=_ranged(float, Bounds(gt=0, le=1)), default=1.0, help="nucleus sampling threshold (1: off)")
    s.add_argument("--top-k", type=_ranged(int, Bounds(ge=0)), default=0, help="sample among the k likeliest tokens (0: off)")
    s.add_argument("--seed", type=int, default=None, help="seed for sampling (reproducible output)")
    s.add_argument("--stop", action="append", default=[], help="a stop string (repeatable)")
    s.add_argument("--show-drafts", action="store_true", help="show each verification step: accepted, rejected, corrected")
    s.add_argument("--no-color", action="store_true", help="plain text for --show-drafts even on a terminal")
    s = verb("tune-tree", cmd_tune_tree, "measure this machine's costs and the head's acceptance; store the best tree in the head (any kind)")
    s.add_argument("--head", required=True, help="head folder; its config.json gets the tree")
    _allow_other_target(s)
    s.add_argument("--prompts", default="data/prompts/train.jsonl", help="EAGLE heads: prompts decoded to measure τ (default: the distillation prompts, never the eval set)")
    s.add_argument("--num-prompts", type=_ranged(int, Bounds(ge=1)), default=3, help="EAGLE heads: how many of them (the first ones)")
    s.add_argument("--grid", type=_grid_entry, action="append", default=[], metavar="DEPTH,TOP_K,TOTAL",
                   help="EAGLE heads: a candidate tree (repeatable; default: chains of 2..5, trees of 4, 7, 12, 16 nodes with top-k 2..4)")
    s = verb("export", cmd_export, "write a head in a serving layout (SGLang/vLLM EAGLE-3, vLLM Medusa, Medusa) and/or push it to the Hub", recipe_required=False)
    s.add_argument("--head", required=True, help="head folder (config.json + model.safetensors)")
    s.add_argument("--layout", default="headstart", help="headstart, vllm-medusa, medusa, eagle3, speculators or dflash (the recipe's target is loaded only when the layout needs it: a shared lm_head's rows, an EAGLE-3 layer's config)")
    s.add_argument("--out", default=None, help="folder to write (replaced atomically)")
    s.add_argument("--force", action="store_true", help="replace --out even if it holds other files (never a folder holding the head or a checkpoint)")
    s.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"], help="cast the weights (default: as trained)")
    s.add_argument("--merged-target", default=None, metavar="DIR", help="Medusa-2 heads: merge the LoRA adapter into the target, save that model to DIR (to serve with the head)")
    s.add_argument("--push-to-hub", default=None, metavar="REPO", help="upload the head files and a model card to this Hub repo")
    s.add_argument("--private", action="store_true", help="create the Hub repo private")
    s.add_argument("--revision", default=None, help="Hub branch to commit to (created if missing)")
    s = verb("serve-check", cmd_serve_check, "serve a head in vLLM (.venv-vllm, `make vllm`) and compare its acceptance, output and speed with headstart's")
    s.add_argument("--head", required=True, help="head folder (EAGLE-3 or Medusa)")
    s.add_argument("--k", type=_ranged(int, Bounds(ge=1, le=MAX_DEPTH, why=DEPTH_WHY)), default=3, help="draft tokens per step, a chain (vLLM's num_speculative_tokens; Medusa: at most its heads)")
    s.add_argument("--layout", default=None, help="export layout vLLM loads: eagle3 (default) or speculators for EAGLE-3, vllm-medusa for Medusa")
    s.add_argument("--no-ngram", action="store_true", help="skip vLLM's n-gram proposer")
    s.add_argument("--sequential", action="store_true",
                   help="load vLLM's engines one after the other (each in its own process) instead of all at once, taking turns prompt by prompt")
    s.add_argument("--compiled", action="store_true",
                   help="run vLLM compiled (torch.compile, its own default; how a server runs) instead of eager (enforce_eager=True)")
    s.add_argument("--out", default=None, help="JSON report path (default: serve-check.json beside eval.output); .md beside it")
    s = verb("serve", cmd_serve, "serve a head with vLLM's OpenAI-compatible server (.venv-vllm, `make vllm`) until Ctrl-C or SIGTERM")
    s.add_argument("--head", required=True, help="head folder (EAGLE-3 or Medusa; --method corpus: any head folder holding a corpus table)")
    s.add_argument("--method", default="head", choices=["head", "hybrid", "corpus", "ngram", "plain"],
                   help="head: the exported head, a chain of k; hybrid: prompt lookup, the corpus table and the head (EAGLE-3 heads); "
                        "corpus: prompt lookup and the corpus table, no head forward; ngram: vLLM's own n-gram proposer; plain: no drafts (default: head)")
    s.add_argument("--k", type=_ranged(int, Bounds(ge=1, le=MAX_DEPTH, why=DEPTH_WHY)), default=3, help="draft tokens per step (vLLM's num_speculative_tokens; Medusa: at most its heads)")
    s.add_argument("--port", type=_ranged(int, Bounds(ge=1, le=65535)), default=8000, help="port to listen on")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only; 0.0.0.0 opens it to the network)")
    s.add_argument("--eager", action="store_true", help="run vLLM eager (enforce_eager): starts sooner, decodes slower than its compiled default")
    s.add_argument("--max-model-len", type=_ranged(int, Bounds(ge=16)), default=None, help="longest prompt + answer in tokens (default: the target's)")
    s.add_argument("--learn", action="store_true",
                   help="corpus, hybrid: count each finished answer into the corpus table, so that later requests draft from "
                        "earlier answers (lossless: a table only proposes; docs/serving.md#learning-from-what-is-served)")
    s.add_argument("--learn-dir", default=None, metavar="DIR",
                   help="where the learned table is saved and continued from (default: the cache's serve/learned/<head key>; never the head folder)")
    s.add_argument("--learn-every", type=_ranged(int, Bounds(ge=1)), default=None, help="answers between saves of the learned table (default 100)")
    s.add_argument("--learn-cap", type=_ranged(int, Bounds(ge=1)), default=None,
                   help="contexts the learned table keeps, the least recently used dropped first (default 1,000,000)")
    s.add_argument("--log-served", default=None, metavar="DIR",
                   help="append each answered chat to DIR/served-*.jsonl as training rows (mode 0600; `headstart train ... data.train_files=[DIR/*.jsonl]`)")
    s.add_argument("--log-served-mb", type=_ranged(int, Bounds(ge=1)), default=1024, help="size cap of DIR's logs in MiB; logging stops there, nothing is deleted (default 1024)")
    s = verb("promote", cmd_promote, "swap the served head folder for a new head only if it drafts better on logged traffic (the old one kept)")
    s.add_argument("--head", required=True, metavar="NEW", help="the new head folder (left as it is; copied into --over when promoted)")
    s.add_argument("--over", required=True, metavar="OLD", help="the served head folder; when the new head wins it is renamed OLD.prev-<UTC time>, never deleted")
    s.add_argument("--prompts", required=True, metavar="DIR_OR_FILE", help="a --log-served folder (its served-*.jsonl) or a JSONL file of chats ending with the answer")
    s.add_argument("--num-prompts", type=_ranged(int, Bounds(ge=1)), default=200, help="the newest logged chats compared (default 200; hold them out of the new head's training)")
    s.add_argument("--margin", type=_ranged(float, Bounds(ge=0.0, le=10.0)), default=0.02, help="relative gain in mean acceptance length the new head needs (default 0.02: 2%%)")
    s.add_argument("--k", type=_ranged(int, Bounds(ge=1, le=MAX_DEPTH, why=DEPTH_WHY)), default=3, help="draft tokens per step, a chain (as served)")
    s.add_argument("--out", default=None, help="JSON report path")
    s = verb("demo", cmd_demo, "distill, train an EAGLE-3 head and measure it on the embedded SmolLM2", recipe_required=False)
    s.add_argument("--quick", action="store_true", help="a tiny run (minutes) to check the whole path")
    s.add_argument("--head", default=None, choices=["medusa", "eagle", "eagle3"], help="head kind to train (its recipe in recipes/smollm2-135m/; default eagle3)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one verb; a HeadstartError (bad input: RecipeError, DataError, CheckpointError, ...) becomes
    one error line and exit status 2, or its traceback with --debug. Any other exception is a bug."""
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except HeadstartError as e:
        if args.debug:
            raise
        print(f"headstart {args.verb}: error: {one_line(str(e))}", file=sys.stderr)
        return 2


def one_line(message: str) -> str:
    """`message` on one line: every character that breaks a line (newlines, and the form feeds and
    separators a user's input may hold) written as its escape, so an error stays one line."""
    return "".join(ch if len(f"{ch}x".splitlines()) == 1 else ch.encode("unicode_escape").decode() for ch in message)


if __name__ == "__main__":
    sys.exit(main())
