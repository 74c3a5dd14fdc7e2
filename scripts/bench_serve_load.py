"""Load on `headstart serve`: N chat requests from C concurrent clients against each method (a benchmark, not a test).

    python scripts/bench_serve_load.py recipes/smollm2-135m/medusa.yaml --head runs/demo/medusa/final \
        --methods plain ngram head hybrid corpus --requests 32 --concurrency 1 4 8
    python scripts/bench_serve_load.py recipes/smollm2-135m/eagle3.yaml --head runs/demo/eagle3/final \
        --requests 64 --concurrency 8 --context-lengths 0 1000 2000 4000 8000    # mixed lengths up to the context

For each method in turn, `headstart serve` is started as a user starts it (its own process; vLLM compiled, its
default, unless --eager), timed until `/v1/models` answers and until its first answer (one short chat request);
then the recipe's eval prompts (first turns, `eval.prompts`, `eval.num_prompts`) are sent as --requests greedy
chat requests of at most --max-tokens new tokens from --concurrency clients at once (each level in turn, on the
same server). Reported per method and level: requests/s, p50 and p95 latency, new tokens/s and its ratio to
plain's at the same level, the server's own acceptance over the load (1 + accepted / drafts, from its /metrics;
bonus counted), and how many answers equal the same prompt's at the first level (every request is answered,
none twice: the answers come back in the prompts' order). `--cold` first removes the head's cached export, so that the first
start that serves the head exports it again (time to first answer, cold). Prints a Markdown table and writes
JSON (--out). Timings need the machine to themselves: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from headstart.config import parse_script_args
from headstart.recipe import load_recipe
from headstart.serve.load import ask_chat, free_port, load_summary, run_load, started_server
from headstart.serve.prediction import acceptance_from_metrics
from headstart.serve.server import served_counts


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--head", required=True)
    ap.add_argument("--methods", nargs="+", default=["plain", "ngram", "head", "hybrid", "corpus"],
                    choices=["plain", "ngram", "head", "hybrid", "corpus"])
    ap.add_argument("--k", type=int, default=3, help="draft tokens per step (headstart serve --k)")
    ap.add_argument("--requests", type=int, default=32, help="requests per method")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[4],
                    help="clients sending at once; several (1 4 8) load the same server in turn, one row each")
    ap.add_argument("--max-tokens", type=int, default=96, help="new tokens per request at most (EOS ends one sooner)")
    ap.add_argument("--context-lengths", type=int, nargs="+", default=None, metavar="TOKENS",
                    help="mixed prompt lengths: request i reads a document of TOKENS[i %% n] tokens (cut to fit the "
                         "context) before its question; 0 asks the question alone")
    ap.add_argument("--max-model-len", type=int, default=None, help="headstart serve --max-model-len (default: the target's)")
    ap.add_argument("--eager", action="store_true", help="vLLM eager (headstart serve --eager) instead of compiled")
    ap.add_argument("--cold", action="store_true", help="remove the head's cached export first (the first start exports it again)")
    ap.add_argument("--out", default="runs/bench_serve_load.json")
    ap.add_argument("overrides", nargs="*", help="dotted recipe overrides (section.key=value)")
    return ap



def remove_cached_export(recipe, head: str) -> None:
    """The head's cached exports for this target, in every layout vLLM serves it from, removed."""
    from headstart.embedded import cache_dir
    from headstart.heads.checkpoint import load_heads, resolve_folder
    from headstart.serve.job import SERVED
    from headstart.serve.server import export_key
    from headstart.target import Target

    t = recipe.target
    target = Target.from_pretrained(t.name_or_path, dtype=t.dtype, revision=t.revision, pack_linears=t.pack_linears)
    folder = resolve_folder(head)
    for layout in SERVED.get(load_heads(folder, target=target).kind, ((),))[0]:
        shutil.rmtree(cache_dir() / "serve" / export_key(folder, target, layout), ignore_errors=True)


def bench_method(args, method: str, prompts: list[str], logs: Path) -> list[dict]:
    """One method: its start timed, one short request, then the load at each concurrency in turn; per load, the
    server's counts over it and how many answers equal the first load's answer to the same prompt."""
    argv = [args.recipe, "--head", args.head, "--method", method, "--k", str(args.k), *(["--eager"] if args.eager else []),
            *(["--max-model-len", str(args.max_model_len)] if args.max_model_len else []), *args.overrides]
    rows = []
    with started_server(argv, free_port(), logs / f"serve-{method}") as server:
        ask_chat(server.url, server.model, prompts[0], 8)
        first_answer = server.seconds_since_start()
        for clients in args.concurrency:
            before = served_counts(server.url)
            answers, wall = run_load(server.url, server.model, prompts, args.requests, clients, args.max_tokens)
            after = served_counts(server.url)
            counts = {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")}
            counts["accepted_per_pos"] = [a - b for a, b in zip(after["accepted_per_pos"], before["accepted_per_pos"])] or [0] * args.k
            first = rows[0]["outputs"] if rows else [a["ids"] for a in answers]
            rows.append({"method": method, "concurrency": clients, **load_summary(answers, wall),
                         "acceptance_length": acceptance_from_metrics(counts)["mean_acceptance_length"], "counts": counts,
                         "outputs": [a["ids"] for a in answers], "same_as_first": sum(a["ids"] == f for a, f in zip(answers, first))})
    export = "reused" if "export reused" in server.stdout else "written" if "export written" in server.stdout else None
    for row in rows:
        row |= {"ready_seconds": server.ready_seconds, "first_answer_seconds": first_answer, "export": export}
    return rows


def with_documents(questions: list[str], lengths: list[int], requests: int, tokenizer, room: int) -> tuple[list[str], list[int]]:
    """`requests` prompts of mixed lengths: request i asks question i (in turn) after a document of lengths[i] (in
    turn) tokens, cut from the repository's passages (data/prompt_tables/passages.yaml, repeated as needed) so that
    the chat stays within `room` tokens; also each prompt's length in tokens as the chat template renders it."""
    import yaml

    from headstart.chat import encode_chat

    table = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "prompt_tables" / "passages.yaml").read_text())
    passages = [f"{p['title']}\n{' '.join(p['text'].split())}" for p in table["fillers"]["passages"]]
    words = tokenizer("\n\n".join(passages), add_special_tokens=False)["input_ids"]
    prompts, sizes = [], []
    for i in range(requests):
        question, want = questions[i % len(questions)], lengths[i % len(lengths)]
        bare = encode_chat(tokenizer, [{"role": "user", "content": question}]).shape[1]
        take = max(0, min(want, room - bare - 8))
        document = tokenizer.decode((words * (take // len(words) + 1))[:take]) if take else ""
        prompt = f"{document}\n\nAbout the text above, or on its own: {question}" if document else question
        prompts.append(prompt)
        sizes.append(encode_chat(tokenizer, [{"role": "user", "content": prompt}]).shape[1])
    return prompts, sizes


def format_rows(rows: list[dict], args, sizes: list[int] | None = None) -> str:
    levels = " / ".join(map(str, args.concurrency))
    mixed = (f"; prompts of {min(sizes)} to {max(sizes)} tokens (mean {sum(sizes) / len(sizes):.0f}: documents of "
             f"{' / '.join(map(str, args.context_lengths))} tokens before the eval prompts)") if sizes else ""
    lines = [f"{args.requests} requests from {levels} clients, greedy, at most {args.max_tokens} new tokens, k = {args.k}, "
             f"vLLM {'eager' if args.eager else 'compiled'}{mixed}; load average {os.getloadavg()[0]:.2f}. \"same\": answers "
             f"equal to the same prompt's at {args.concurrency[0]} client(s), \"= plain\": to plain's at the same level (bf16 "
             "batches may flip near-ties); x plain: tokens/s over plain's at the same concurrency", "",
             "| method | clients | ready (s) | first answer (s) | export | requests/s | p50 (s) | p95 (s) | tokens/s | x plain "
             "| acceptance length | same | = plain |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    plain = {r["concurrency"]: r for r in rows if r["method"] == "plain"}
    for r in rows:
        acc = f"{r['acceptance_length']:.2f}" if r["acceptance_length"] else "-"
        base = plain.get(r["concurrency"])
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x" if base else "-"
        as_plain = f"{sum(a == b for a, b in zip(r['outputs'], base['outputs']))}/{r['requests']}" if base else "-"
        lines.append(f"| {r['method']} | {r['concurrency']} | {r['ready_seconds']:.1f} | {r['first_answer_seconds']:.1f} | "
                     f"{r['export'] or '-'} | {r['requests_per_s']:.2f} | {r['latency_p50']:.2f} | {r['latency_p95']:.2f} | "
                     f"{r['tokens_per_s']:.1f} | {ratio} | {acc} | {r['same_as_first']}/{r['requests']} | {as_plain} |")
    return "\n".join(lines)


def main() -> None:
    from headstart.eval.prompts import load_eval_prompts

    args = parse_script_args(parser(), sys.argv[1:])
    recipe = load_recipe(args.recipe, args.overrides)
    cfg = recipe.eval
    prompts = [p.prompt for p in load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)]
    sizes = None
    if args.context_lengths:
        from transformers import AutoConfig, AutoTokenizer

        from headstart.serve.job import model_folder

        folder = model_folder(recipe.target.name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        context = args.max_model_len or AutoConfig.from_pretrained(folder).max_position_embeddings
        prompts, sizes = with_documents(prompts, args.context_lengths, args.requests, tokenizer, context - args.max_tokens)
    if args.cold:
        remove_cached_export(recipe, args.head)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [row for method in args.methods for row in bench_method(args, method, prompts, out.parent)]
    table = format_rows(rows, args, sizes)
    print(table)
    out.write_text(json.dumps({"args": vars(args), "prompt_tokens": sizes, "rows": rows}, indent=1) + "\n")
    out.with_suffix(".md").write_text(table + "\n")
    print(f"\nresults: {out}, {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
