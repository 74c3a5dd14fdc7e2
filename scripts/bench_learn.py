"""Does the corpus table learn from what is served? Acceptance over each successive block of prompts of a stream,
the table frozen against learning (`headstart serve --method corpus --learn`).

    python scripts/bench_learn.py --head runs/demo/eagle3/final                      # 160 HumanEval prompts, blocks of 20
    python scripts/bench_learn.py --data data/distilled/smollm2-135m.jsonl.gz --prompts 40 --new 64

The stream: HumanEval's problems (eval/prompts.py `humaneval_prompts`) in order, each answered greedily by the
target (headstart's plain decoding, bf16 by default, stopping at EOS or --new tokens). The table: the head
folder's `corpus_ngram.safetensors`, or one counted from --data's assistant answers as training counts it. Along
each answer, vLLM's counters for headstart's corpus proposer are predicted (serve/prediction.py
`learning_counts`, the same chains the proposer drafts; vLLM's own counters equal them, tests/end_to_end/
test_vllm.py): frozen, and learning, where each answer is counted into the table before the next request drafts.
Prints, per block, drafts, accepted tokens and vLLM's mean acceptance length (1 + accepted / drafts) both ways;
--out writes them as JSON.

--continue RECIPE measures the other half of the loop: a head continued on served answers, then compared. The
stream's answers (--continue-on, a JSONL of chats as --answers or `headstart serve --log-served` write them) are
split: the first --first are the served chats the head is continued on for --minutes (`headstart train RECIPE
head.init_from=--head`, mixed with --data's chats so that the served ones are --share of the mix), the rest are
held out. Both heads then draft along the held-out answers (and each --also file's), as `headstart promote`
compares them, with their folders' corpus tables, without swapping anything:

    python scripts/bench_learn.py --head runs/demo/eagle3/final --continue recipes/smollm2-135m/eagle3.yaml \
        --continue-on runs/bench/he_answers.jsonl --out-dir runs/bench/continued --first 100 --minutes 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import torch

from headstart.chat import encode_chat
from headstart.decode.corpus import CorpusNgram
from headstart.decode.plain import greedy_generate
from headstart.eval.prompts import humaneval_prompts, load_eval_prompts
from headstart.eval.speed import eos_ids
from headstart.jsonl import DataError, read_jsonl
from headstart.serve.prediction import learning_counts
from headstart.target import Target


def table_of(args, tokenizer) -> CorpusNgram:
    """The head folder's table, or one counted from the data file's assistant answers (order 4, as training's)."""
    if args.head:
        corpus = CorpusNgram.load(args.head)
        if corpus is None:
            sys.exit(f"bench_learn: error: {args.head} holds no corpus_ngram.safetensors; give a head folder with one, or --data")
        return corpus
    return CorpusNgram.build(data_answers(args.data, tokenizer), order=4)


def data_answers(path: str, tokenizer) -> list[list[int]]:
    """The assistant answers of a JSONL(.gz) file of chats, as token ids."""
    answers = []
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for line in f:
            answers += [tokenizer.encode(m["content"], add_special_tokens=False)
                        for m in json.loads(line).get("messages", []) if m.get("role") == "assistant"]
    return answers


def resident_mb() -> float:
    """This process's resident memory in MiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def table_cost(corpus: CorpusNgram, answers: list[list[int]], n: int, k: int) -> None:
    """What learning costs after n served answers, each new text (the worst case: `answers` with their token ids
    shifted, so that nearly every context is new): contexts, resident memory, and `chain_draft`'s time per step
    (the corpus proposer's work for one request and step, its index built anew), frozen against learning, along
    200 of the answers as they are."""
    from headstart.serve.learn import LearningTable
    from headstart.serve.proposer import chain_draft

    rng = random.Random(0)
    base = resident_mb()
    table = LearningTable.of(corpus)
    start, loaded = time.perf_counter(), resident_mb()
    vocab = 1 + max(max(a) for a in answers if a)
    for _ in range(n):  # new text each time, the worst case for memory: an answer with its token ids shifted
        shift = rng.randrange(1, vocab)
        table.count([(t + shift) % vocab for t in answers[rng.randrange(len(answers))]])
    counted = time.perf_counter() - start
    probes = [answers[rng.randrange(len(answers))] for _ in range(200)]

    def per_step(t) -> float:
        calls, began = 0, time.perf_counter()
        for text in probes:
            for j in range(2, len(text), 4):
                chain_draft(t, text[:j], k)
                calls += 1
        return (time.perf_counter() - began) / calls * 1e3

    frozen, learning = per_step(corpus), per_step(table)
    print(f"| table | contexts | resident MiB | drafting ms / step |\n|---|---|---|---|\n"
          f"| frozen (the head's) | {len(corpus)} | {base:.0f} (the process) | {frozen:.3f} |\n"
          f"| learning, as loaded | {len(corpus)} | +{loaded - base:.0f} | - |\n"
          f"| learning, after {n} answers ({counted:.0f} s to count) | {len(table)} | +{resident_mb() - base:.0f} | {learning:.3f} |")


def stream(args) -> list:
    """The stream's prompts in the order they are served (EvalPrompt: its first turn is asked)."""
    if args.stream == "humaneval":
        return humaneval_prompts()[: args.prompts]
    chat = args.prompts // 2
    return load_eval_prompts("data/prompts/eval.jsonl", chat) + humaneval_prompts()[: args.prompts - chat]


def block_summary(counts: list[dict]) -> dict:
    drafts, accepted = sum(c["drafts"] for c in counts), sum(c["accepted"] for c in counts)
    return {"drafts": drafts, "accepted": accepted, "mean_acceptance_length": 1 + accepted / drafts if drafts else None}


def chats_of(path) -> list[dict]:
    """The rows of a JSONL file of chats; a missing or malformed file is one error line."""
    try:
        return [row for _, row in read_jsonl(path)]
    except (OSError, DataError) as e:
        sys.exit(f"bench_learn: error: {path}: {e}")


def continued(args, target) -> None:
    """--continue: continue --head on the first --first chats of --continue-on for --minutes, then compare the
    continued head with --head along the rest (and each --also file), heads and corpus tables, swapping nothing."""
    from headstart.heads.checkpoint import load_heads
    from headstart.serve.promote import compare

    out = Path(args.out_dir)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"bench_learn: error: --out-dir {out} is not empty; give a new folder (nothing there is replaced)")
    rows = chats_of(args.continue_on)
    if not 0 < args.first < len(rows):
        sys.exit(f"bench_learn: error: --first {args.first}: {args.continue_on} holds {len(rows)} chats; "
                 "continue on fewer than all, so that some are held out")
    out.mkdir(parents=True, exist_ok=True)
    served, heldout = out / "served.jsonl", out / "heldout.jsonl"
    served.write_text("".join(json.dumps(r) + "\n" for r in rows[: args.first]))
    heldout.write_text("".join(json.dumps(r) + "\n" for r in rows[args.first :]))
    limit = round(args.first / args.share)  # the served chats first, then the corpus's up to the limit
    command = [sys.executable, "-m", "headstart", "train", args.continue_recipe, f"head.init_from={args.head}",
               f"data.train_files=[{served},{args.data}]", f"data.limit={limit}", f"data.eval_size={max(1, limit // 10)}",
               f"train.max_minutes={args.minutes}", f"train.epochs={args.epochs}", f"train.output_dir={out / 'head'}"]
    print(" ".join(command), file=sys.stderr, flush=True)
    if subprocess.run(command, stdout=sys.stderr).returncode != 0:  # its log on stderr: stdout is the table
        sys.exit("bench_learn: error: headstart train failed (its message is above)")
    heads = {"continued": load_heads(out / "head" / "final", target=target), "served": load_heads(args.head, target=target)}
    steps = json.loads((out / "head" / "final" / "config.json").read_text()).get("training", {}).get("steps")
    print(f"\n--head {args.head} continued {args.minutes} min ({steps} steps) on the first {args.first} chats of "
          f"{args.continue_on} with {limit - args.first} of {args.data}; a chain of k = {args.k}, teacher-forced, vLLM's counts\n")
    print("| answers | head τ continued / served | continued / served | corpus table τ continued / served |")
    print("|---|---|---|---|")
    results = []
    for path in [heldout, *args.also]:
        chats = chats_of(path)
        try:
            counts, tables = compare(target, heads, chats, args.k)  # as `headstart promote` compares them
        except DataError as e:
            sys.exit(f"bench_learn: error: {path}: {e}")
        tau = {n: c["mean_acceptance_length"] for n, c in counts.items()}
        table = {n: t["mean_acceptance_length"] if t else None for n, t in tables.items()}
        results.append({"answers": str(path), "chats": len(chats), "head": tau, "table": table})
        shown = [f"{t:.3f}" if t else "-" for t in (table["continued"], table["served"])]
        print(f"| {path} ({len(chats)}) | {tau['continued']:.3f} / {tau['served']:.3f} | {tau['continued'] / tau['served']:.3f}x "
              f"| {shown[0]} / {shown[1]} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "steps": steps, "limit": limit, "results": results}, f, indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="embedded", help="a model folder or Hub id, or `embedded` (SmolLM2-135M-Instruct)")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--head", default=None, help="a head folder holding corpus_ngram.safetensors")
    p.add_argument("--data", default="data/distilled/smollm2-135m.jsonl.gz", help="without --head: answers to count the table from")
    p.add_argument("--prompts", type=int, default=160, help="prompts in the stream (HumanEval has 164)")
    p.add_argument("--stream", default="humaneval", choices=["humaneval", "switch"],
                   help="humaneval: HumanEval's problems in order; switch: held-out chat prompts (data/prompts/eval.jsonl, "
                        "first turns, round-robin over its categories) for the first half, then HumanEval's problems")
    p.add_argument("--block", type=int, default=20, help="prompts per row of the table")
    p.add_argument("--new", type=int, default=128, help="new tokens per answer at most")
    p.add_argument("--k", type=int, default=3, help="drafts per step (vLLM's num_speculative_tokens)")
    p.add_argument("--out", default=None, help="JSON results")
    p.add_argument("--table-cost", type=int, default=0, metavar="N",
                   help="instead: count N answers (--data's, in a shuffled order) into a learning table started from the table, "
                        "each new text (token ids shifted), and print its contexts, its memory and the corpus proposer's drafting time per "
                        "step, frozen and learning")
    p.add_argument("--answers", default=None, help="also write the stream as JSONL chats (messages: the prompt, the answer), "
                   "the rows `headstart serve --log-served` logs: to continue a head on them and `headstart promote` it")
    p.add_argument("--continue", dest="continue_recipe", default=None, metavar="RECIPE",
                   help="instead: continue --head on served chats with this recipe and compare it with --head (module doc)")
    p.add_argument("--continue-on", default=None, help="--continue: the stream's chats, in order (what --answers wrote)")
    p.add_argument("--out-dir", default=None, help="--continue: a new folder for the split chats and the continued head")
    p.add_argument("--first", type=int, default=100, help="--continue: the chats the head is continued on (the rest held out)")
    p.add_argument("--share", type=float, default=0.5, help="--continue: the served chats' share of the training mix "
                   "(the rest --data's chats; 0.5 measured best on HumanEval, docs/results.md)")
    p.add_argument("--minutes", type=float, default=5.0, help="--continue: training's clock")
    p.add_argument("--epochs", type=int, default=6, help="--continue: epochs at most (the clock usually ends first)")
    p.add_argument("--also", nargs="*", default=[], help="--continue: more held-out chats to compare on (e.g. another domain's)")
    args = p.parse_args()
    if args.continue_recipe and not (args.head and args.continue_on and args.out_dir):
        p.error("--continue needs --head (the served head), --continue-on and --out-dir")
    if args.continue_recipe and not 0 < args.share <= 1:
        p.error(f"--share must lie in (0, 1], got {args.share}")
    if args.target == "embedded":
        from headstart.embedded import embedded_model_path

        args.target = str(embedded_model_path())
    target = Target.from_pretrained(args.target, dtype=getattr(torch, args.dtype))
    if args.continue_recipe:
        return continued(args, target)
    corpus = table_of(args, target.tokenizer)
    if args.table_cost:
        return table_cost(corpus, data_answers(args.data, target.tokenizer), args.table_cost, args.k)
    served = stream(args)
    prompts = [encode_chat(target.tokenizer, e.messages[:1])[0].tolist() for e in served]
    start, texts = time.perf_counter(), []
    for i, prompt in enumerate(prompts):
        out = greedy_generate(target, torch.tensor([prompt]), args.new, eos_token_id=eos_ids(target))
        texts.append(out.sequences[0, len(prompt):].tolist())
        print(f"\ranswered {i + 1}/{len(prompts)} ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if args.answers:
        with open(args.answers, "w") as f:
            for e, text in zip(served, texts):
                answer = target.tokenizer.decode(text, skip_special_tokens=True)
                f.write(json.dumps({"messages": [e.messages[0], {"role": "assistant", "content": answer}],
                                    "answer_token_ids": text}) + "\n")
    ways = {way: learning_counts(corpus, prompts, texts, args.k, learn=way == "learning") for way in ("frozen", "learning")}
    rows = []
    what = "HumanEval prompts" if args.stream == "humaneval" else f"prompts ({args.prompts // 2} chat, then HumanEval)"
    print(f"corpus proposer, k = {args.k}, {len(prompts)} {what} in blocks of {args.block}, {args.new} new tokens at most, "
          f"{args.dtype}; table: {args.head or args.data} ({len(corpus)} contexts)\n")
    print("| prompts | frozen: accepted / drafts | frozen τ | learning: accepted / drafts | learning τ |")
    print("|---|---|---|---|---|")
    for first in range(0, len(prompts), args.block):
        span = slice(first, first + args.block)
        frozen, learning = block_summary(ways["frozen"][span]), block_summary(ways["learning"][span])
        rows.append({"prompts": [first + 1, min(first + args.block, len(prompts))], "frozen": frozen, "learning": learning})
        tau = [f"{b['mean_acceptance_length']:.3f}" if b["mean_acceptance_length"] else "-" for b in (frozen, learning)]
        print(f"| {first + 1}-{rows[-1]['prompts'][1]} | {frozen['accepted']} / {frozen['drafts']} | {tau[0]} "
              f"| {learning['accepted']} / {learning['drafts']} | {tau[1]} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "blocks": rows}, f, indent=1)


if __name__ == "__main__":
    main()
