"""A head served by vLLM at k = 1..K beside vLLM plain, vLLM n-gram and headstart's own loop: one run.

    python scripts/bench_serving.py recipes/smollm2-135m/eagle3.yaml --head runs/smollm2-eagle3/final --ks 1 2 3 4 5

The head is exported once (the recipe's first vLLM layout for its kind), vLLM (`.venv-vllm`, `make
vllm`) loads one engine after another on the same prompts (greedy, batch 1), and headstart decodes
the same prompts plainly and with the head as a chain of each k. Prints a Markdown table and writes
JSON beside it (every engine's acceptance counts and output tokens too). Acceptance length counts the
bonus token on both sides (vLLM's 1 + accepted/drafts per draft step; headstart's τ). headstart predicts
vLLM's figure twice: its loop's τ on its own greedy text, and its drafter along the text vLLM served
(headstart.serve.prediction `along_text_acceptance`); in bf16 the two engines' texts part at near-ties, so only the
second is measured on the same text. Timings need the machine to themselves: the load average is printed.
A shared machine's speed drifts over a run of several minutes (docs/results.md#serving-checks), so by default
all vLLM engines are loaded at once in one process and each prompt is decoded by every engine in turn
(headstart.serve.engine `interleave`); the drift then slows them alike. `--sequential` loads one engine after
the other in vLLM's usual engine process instead, with vLLM plain first and again last, the speedups
over both together, and the table's first line says how far the two were apart. vLLM runs eager
(`enforce_eager=True`, quicker to start) unless `--compiled` asks for its own default, torch.compile.
"""

from __future__ import annotations

import argparse
import sys

from headstart.config import parse_script_args
from headstart.heads.checkpoint import load_heads
from headstart.recipe import load_recipe
from headstart.serve.bench import BenchPlan, bench_serving
from headstart.target import Target


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--head", required=True)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--ngram-k", type=int, nargs="+", default=[3],
                    help="k of vLLM's n-gram proposer (one engine each), run beside the head; 0: not run")
    ap.add_argument("--corpus-ks", type=int, nargs="+", default=[],
                    help="also vLLM with headstart's corpus proposer (headstart.serve.proposer; the head folder's corpus table) at these k")
    ap.add_argument("--hybrid-ks", type=int, nargs="+", default=[],
                    help="also the head served as headstart's hybrid (prompt lookup, the corpus table and the head's first draft in "
                         "one chain a step; headstart.serve.proposer) at these k")
    ap.add_argument("--sequential", action="store_true",
                    help="one vLLM engine after the other (vLLM plain first and last) instead of interleaved prompt by prompt")
    ap.add_argument("--compiled", action="store_true",
                    help="vLLM compiled (torch.compile, its own default) instead of eager (enforce_eager=True)")
    ap.add_argument("--out", default="runs/bench_serving.json")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides (section.key=value), before or after the options")
    return ap


def main() -> None:
    ap = parser()
    args = parse_script_args(ap, sys.argv[1:])  # dotted overrides may follow a list option
    recipe = load_recipe(args.recipe, args.overrides)
    t = recipe.target
    target = Target.from_pretrained(t.name_or_path, dtype=t.dtype, revision=t.revision, attn_implementation=t.attn_implementation,
                                    pack_linears=t.pack_linears)
    head = load_heads(args.head, target=target)
    if (args.corpus_ks or args.hybrid_ks) and head.corpus is None:
        ap.error(f"--corpus-ks/--hybrid-ks: {args.head} holds no corpus_ngram.safetensors (training saves it with train.corpus_ngram > 0)")
    plan = BenchPlan(ks=tuple(args.ks), ngram_ks=tuple(k for k in args.ngram_k if k > 0), corpus_ks=tuple(args.corpus_ks),
                     hybrid_ks=tuple(args.hybrid_ks), sequential=args.sequential, compiled=args.compiled)
    print(bench_serving(recipe, target, head, args.head, plan, out=args.out))


if __name__ == "__main__":
    main()
