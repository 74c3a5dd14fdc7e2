"""A head served by vLLM at k = 1..K beside vLLM plain, vLLM n-gram and headstart's own loop: one run.

    python scripts/bench_serving.py recipes/smollm2-135m/eagle3.yaml --head runs/smollm2-eagle3/final --ks 1 2 3 4 5

The head is exported once (the recipe's first vLLM layout for its kind), vLLM (`.venv-vllm`, `make
vllm`) loads one engine after another on the same prompts (greedy, batch 1), and headstart decodes
the same prompts plainly and with the head as a chain of each k. Prints a Markdown table and writes
JSON beside it (every engine's acceptance counts and output tokens too). Acceptance length counts the
bonus token on both sides (vLLM's 1 + accepted/drafts per draft step; headstart's τ). headstart predicts
vLLM's figure twice: its loop's τ on its own greedy text, and its drafter along the text vLLM served
(eval/serving.py `along_text_acceptance`); in bf16 the two engines' texts part at near-ties, so only the
second is measured on the same text. Timings need the machine to themselves: the load average is printed.
A shared machine's speed drifts over a run of several minutes (2x within one run here), so by default
all vLLM engines are loaded at once in one process and each prompt is decoded by every engine in turn
(eval/vllm_run.py `interleave`); the drift then slows them alike. `--sequential` loads one engine after
the other in vLLM's usual engine process instead, with vLLM plain first and again last, the speedups
over both together, and the table's first line says how far the two were apart. vLLM runs eager
(`enforce_eager=True`, quicker to start) unless `--compiled` asks for its own default, torch.compile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from headstart.chat import encode_chat
from headstart.config import load_recipe, parse_script_args
from headstart.decode.vllm_proposer import along_text_counts
from headstart.eval.prediction import (
    acceptance_from_counts,
    along_text_steps,
    headstart_acceptance,
    hybrid_along_text_counts,
)
from headstart.eval.prompts import load_eval_prompts
from headstart.eval.serving import (
    SERVED,
    _model_folder,
    corpus_env,
    corpus_speculative_config,
    engine_record,
    eos_ids,
    head_speculative_config,
    headstart_side,
    hybrid_engine,
    ngram_speculative_config,
    run_vllm,
    vllm_job,
    vllm_mode,
)
from headstart.heads.checkpoint import load_heads
from headstart.heads.export import export, import_heads
from headstart.target import Target, cpu_kind


def counted(m: dict) -> dict:
    """vLLM's counters as acceptance figures."""
    return acceptance_from_counts(m["drafts"], m["draft_tokens"], m["accepted"], m["accepted_per_pos"])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--head", required=True)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--ngram-k", type=int, nargs="+", default=[3],
                    help="k of vLLM's n-gram proposer (one engine each), run beside the head; 0: not run")
    ap.add_argument("--corpus-ks", type=int, nargs="+", default=[],
                    help="also vLLM with headstart's corpus proposer (decode/vllm_proposer.py; the head folder's corpus table) at these k")
    ap.add_argument("--hybrid-ks", type=int, nargs="+", default=[],
                    help="also the head served as headstart's hybrid (prompt lookup, the corpus table and the head's first draft in "
                         "one chain a step; decode/vllm_proposer.py) at these k")
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
    layout, method = SERVED[head.kind][0][0], SERVED[head.kind][1]
    ngram_ks = [k for k in args.ngram_k if k > 0]
    cfg = recipe.eval
    prompts = [encode_chat(target.tokenizer, p.messages)[0].tolist() for p in load_eval_prompts(cfg.prompts, cfg.num_prompts, cfg.categories or None)]
    dtype, eos = str(target.dtype).removeprefix("torch."), eos_ids(target)
    with tempfile.TemporaryDirectory(prefix="headstart-bench-serving-") as tmp:
        folder = export(args.head, target, Path(tmp) / layout, layout, dtype=target.dtype)
        served = import_heads(folder, target, layout)
        engines = [{"name": "plain", "speculative_config": None}]
        engines += [{"name": f"k{k}", "speculative_config": head_speculative_config(head, method, folder, k)} for k in args.ks]
        engines += [{"name": f"ngram{k}", "speculative_config": ngram_speculative_config(k)} for k in ngram_ks]
        engines += [{"name": f"corpus{k}", "speculative_config": corpus_speculative_config(k)} for k in args.corpus_ks]
        engines += [hybrid_engine(head, method, folder, k) for k in args.hybrid_ks]
        if args.sequential:
            engines.append({"name": "plain_end", "speculative_config": None})  # plain again last: the machine's drift over the run
        env = corpus_env(args.head, Path(tmp)) if args.corpus_ks or args.hybrid_ks else None
        job = vllm_job(_model_folder(t.name_or_path), prompts, engines, dtype, cfg.max_new_tokens, eos, interleave=not args.sequential,
                       compiled=args.compiled)
        result = run_vllm(job, log=Path(args.out).with_suffix(".vllm.log"), env=env)
    ours = {k: headstart_side(target, served, prompts, k, cfg.max_new_tokens, eos, plain=(k == args.ks[0])) for k in args.ks}
    acceptance = {}  # k -> vLLM's, headstart's on its own text, headstart's along vLLM's text; per prompt too
    for k in args.ks:
        r = engine_record(result, f"k{k}")
        along = [along_text_steps(target, served, p, text, k) for p, text in zip(prompts, r["outputs"])]
        acceptance[k] = {
            "vllm": counted(r["metrics"]),
            "headstart_own_text": ours[k]["acceptance"],
            "headstart_along_vllm_text": headstart_acceptance([a for steps in along for a in steps], k),
            "per_prompt": [{"vllm": counted(m), "headstart_along_vllm_text": headstart_acceptance(steps, k)}
                           for m, steps in zip(r["prompt_metrics"], along)],
        }
    plain = engine_record(result, "plain")
    if args.sequential:  # the base is vLLM plain run first and last, together: a shared machine's speed drifts over a run
        plain_end = engine_record(result, "plain_end")
        base = (plain["tokens"] + plain_end["tokens"]) / (plain["seconds"] + plain_end["seconds"])
        first, last = plain["tokens"] / plain["seconds"], plain_end["tokens"] / plain_end["seconds"]
        how = f"engines one after the other; vLLM plain {first:.1f} tok/s first and {last:.1f} last ({last / first - 1:+.0%} over the run)"
    else:
        base = plain["tokens"] / plain["seconds"]
        how = "vLLM engines interleaved prompt by prompt in one process"
    ref = plain["outputs"]
    ours_plain = ours[args.ks[0]]["plain"]
    ours_base = sum(map(len, ours_plain["outputs"])) / ours_plain["seconds"]

    def same(outs):
        return sum(a == b for a, b in zip(outs, ref))

    rows = [("vLLM plain (run first and last)" if args.sequential else "vLLM plain", "-", 1.0, "-", "-", base, same(plain["outputs"]))]
    for k in args.ks:
        r, acc = engine_record(result, f"k{k}"), acceptance[k]
        rows.append((f"vLLM + head, k={k}", k, acc["vllm"]["mean_acceptance_length"], acc["headstart_own_text"]["mean_acceptance_length"],
                     acc["headstart_along_vllm_text"]["mean_acceptance_length"], r["tokens"] / r["seconds"], same(r["outputs"])))
    for k in ngram_ks:
        ng = engine_record(result, f"ngram{k}")
        ng_acc = counted(ng["metrics"])
        rows.append((f"vLLM n-gram, k={k}", k, ng_acc["mean_acceptance_length"], "-", "-", ng["tokens"] / ng["seconds"], same(ng["outputs"])))
    # headstart's proposers in vLLM, drafts of 0..k tokens: the acceptance length is per step that carried drafts
    proposers = [("corpus", "vLLM + headstart's corpus proposer", args.corpus_ks, lambda texts, k: along_text_counts(head.corpus, prompts, texts, k)),
                 ("hybrid", "vLLM + head as headstart's hybrid", args.hybrid_ks,
                  lambda texts, k: hybrid_along_text_counts(target, served, head.corpus, prompts, texts, k))]
    for prefix, label, ks, counts in proposers:
        for k in ks:
            r = engine_record(result, f"{prefix}{k}")
            served_acc, along = counted(r["metrics"]), counted(counts(r["outputs"], k))
            acceptance[f"{prefix}{k}"] = {"vllm": served_acc, "headstart_along_vllm_text": along,
                                          "per_prompt_vllm": [counted(m) for m in r["prompt_metrics"]]}
            rows.append((f"{label}, k={k}", k, served_acc["mean_acceptance_length"], "-", along["mean_acceptance_length"],
                         r["tokens"] / r["seconds"], same(r["outputs"])))
    rows.append(("headstart plain loop", "-", 1.0, "-", "-", ours_base, same(ours_plain["outputs"])))
    for k in args.ks:
        h = ours[k]["head"]
        rows.append((f"headstart loop + head, chain {k}", k, ours[k]["acceptance"]["mean_acceptance_length"], "-", "-",
                     sum(map(len, h["outputs"])) / h["seconds"], same(h["outputs"])))

    lines = [f"{target.name}, {dtype}, greedy, {len(prompts)} prompts x {cfg.max_new_tokens} tokens, batch 1, "
             f"{cpu_kind()} CPU, {torch.get_num_threads()} threads, vLLM {result['vllm']} {vllm_mode(args.compiled)}, "
             f"load average {os.getloadavg()[0]:.2f}; {how}; "
             "headstart's loop runs after vLLM",
             "",
             "| decoding | k | acceptance length (bonus counted) | headstart's prediction, its own text | headstart's prediction, "
             "along vLLM's text | tokens/s | vs vLLM plain | same as vLLM plain |",
             "|---|---|---|---|---|---|---|---|"]
    def fmt(x) -> str:
        return x if isinstance(x, str) else f"{x:.2f}"

    for name, k, tau, pred, along, tps, n in rows:
        lines.append(f"| {name} | {k} | {fmt(tau)} | {fmt(pred)} | {fmt(along)} | {tps:.1f} | {tps / base:.2f}x | {n}/{len(ref)} |")
    lines += ["", "Acceptance length = 1 + accepted drafts / draft steps (bonus counted, per verification step). headstart's "
              "prediction on its own text: its loop's τ with the head; along vLLM's text: vLLM's output tokens teacher-forced "
              "through the target, headstart's drafter proposing k from each last accepted position, drafts accepted while "
              "they match that text. Per-position acceptance of each is in the JSON."]
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "acceptance": acceptance, "prompts": prompts,
                               "outputs": {"headstart_plain": ours_plain["outputs"], **{e["name"]: e.get("outputs") for e in result["engines"]},
                                           **{f"headstart_k{k}": ours[k]["head"]["outputs"] for k in args.ks}},
                               "engine_load_seconds": {e["name"]: e.get("load_seconds") for e in result["engines"]}},
                              indent=2, default=str) + "\n")
    out.with_suffix(".md").write_text(table + "\n")


if __name__ == "__main__":
    main()
