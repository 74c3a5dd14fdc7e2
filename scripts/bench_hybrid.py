"""What each source of a hybrid tree is worth: the variants side by side in one run.

    python scripts/bench_hybrid.py --head runs/demo/medusa/final
    python scripts/bench_hybrid.py --head runs/demo/medusa/final --rounds 1 --num-prompts 4
    python scripts/bench_hybrid.py --head runs/a/final --more-heads runs/b/final --only-margin \
        --shared-nodes 8 12 --free-nodes 8 12

Decodes the held-out prompts greedily with headstart's plain loop and with hybrid trees built from
the head (its saved tree), the prompt-lookup branch (L = 10), the branch growing alone while the text
copies its context (`decode.lookup_copy`) and the corpus tree (`decode.corpus_draft` nodes, the head
folder's corpus_ngram.safetensors; beside it the same table's argmax chain), each switched on in
turn, the head's nodes and the corpus's sharing a budget (`--shared-nodes`, `decode.hybrid_nodes`),
plus the sources without the head (`--free-nodes`: corpus trees of these sizes) and
prompt lookup alone; every variant on each prompt in turn (a few seconds apart), `--rounds` passes
over the prompts, so that drift on a shared machine falls on all alike. `--more-heads` adds other heads (each alone and in the shared hybrids),
`--only-margin` keeps only what the head's margin is made of; `--sure` adds the shared hybrids with the
head sitting out the steps the corpus table is sure of; `--head-continue` those with the table continuing the head's paths; `--hybrid-tree` is the tree an EAGLE head drafts
inside the hybrids. Prints τ (bonus token counted),
tokens/s and the ratio to plain decoding, overall and per category, then the head's margin: the
fastest variant with a head against the fastest without one, each at its best size. Embedded
target in bf16, weights packed, the heads' products in int8 (`--draft-int8`, as `decode.draft_int8`),
unless told otherwise.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from headstart.chat import encode_chat
from headstart.config import DecodeConfig
from headstart.decode.contract import trait
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.hybrid import HybridHead, head_stats
from headstart.decode.lookup import LookupHead
from headstart.decode.plain import plain_generate
from headstart.decode.tune import tree_options
from headstart.eval.prompts import load_eval_prompts
from headstart.heads.checkpoint import load_heads
from headstart.target import Target, cpu_kind


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--head", required=True, help="a head folder saved by training (with its corpus_ngram.safetensors)")
    p.add_argument("--target", default="embedded")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--prompts", default="data/prompts/eval.jsonl")
    p.add_argument("--num-prompts", type=int, default=9)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--rounds", type=int, default=2, help="passes over every variant; tokens and seconds are summed")
    p.add_argument("--corpus-nodes", type=int, nargs="*", default=[], help="also the full hybrid with corpus trees of these many nodes")
    p.add_argument("--head-nodes", type=int, nargs="*", default=[],
                   help="also the head's tree whole beside the corpus tree, rebuilt from its held-out accuracy at these sizes (Medusa)")
    p.add_argument("--shared-nodes", type=int, nargs="*", default=[],
                   help="also the full hybrid with the head's scored nodes and the corpus's sharing these many nodes (decode.hybrid_nodes)")
    p.add_argument("--only-corpus", action="store_true", help="only plain, the argmax chain, the corpus tree beside the head's, no head, and the variants asked for")
    p.add_argument("--free-nodes", type=int, nargs="*", default=[8],
                   help="the sources without a head, with corpus trees of these many nodes (decode.corpus_draft)")
    p.add_argument("--sure", type=float, nargs="*", default=[],
                   help="also each shared hybrid with the head sitting out the steps where the corpus's next token is at least this probable")
    p.add_argument("--head-weight", type=float, nargs="*", default=[],
                   help="also each shared hybrid with the head's probabilities weighed by W against the corpus's (decode.hybrid_head_weight)")
    p.add_argument("--head-continue", type=int, nargs="*", default=[],
                   help="also each shared hybrid (at each --head-weight, each --sure) with the table continuing the head's paths by C nodes (decode.hybrid_continue)")
    p.add_argument("--more-heads", nargs="*", default=[], help="other head folders, each alone and in the --shared-nodes hybrids")
    p.add_argument("--draft-int8", choices=["on", "off", "both"], default="on",
                   help="the heads' products in int8 (decode.draft_int8, on by default as there), in their stored dtype (off), "
                        "or both: each head also as a second copy in int8, '<folder> (int8)', alone and in the same hybrids")
    p.add_argument("--only-margin", action="store_true",
                   help="only plain, lookup alone, the sources without a head, and each head alone and in the --shared-nodes hybrids")
    p.add_argument("--dynamic-tree", type=int, nargs=3, metavar=("DEPTH", "TOP_K", "NODES"),
                   help="dynamic heads (EAGLE) draft this tree instead of the one saved with them")
    p.add_argument("--hybrid-tree", type=int, nargs=3, metavar=("DEPTH", "TOP_K", "NODES"),
                   help="dynamic heads (EAGLE) draft this tree inside the hybrids (decode.hybrid_tree), their own or --dynamic-tree's alone")
    p.add_argument("--cpu-time", action="store_true",
                   help="one thread, timed by its CPU time instead of the wall clock: ratios a busy machine does not bend "
                        "(slower than two threads; what compares is the ratios)")
    args = p.parse_args()
    int8_on = args.draft_int8 == "on"  # every head's products in int8 (`both`: only the '(int8)' copies)
    if args.cpu_time:
        torch.set_num_threads(1)

    target = Target.from_pretrained(args.target, dtype=getattr(torch, args.dtype))
    target.pack_linears()
    head = load_heads(args.head, target=target)
    corpus = head.corpus
    if corpus is None:
        p.error(f"{args.head} holds no corpus_ngram.safetensors: train it with this headstart (train.corpus_ngram > 0)")
    chain = copy.copy(corpus)
    chain.top_k = 1  # the same table drafting its argmax chain (width 1)
    tok = target.tokenizer
    records = load_eval_prompts(args.prompts, args.num_prompts)
    prompts = [encode_chat(tok, [{"role": "user", "content": r.prompt}]) for r in records]
    eos, n = target.model.generation_config.eos_token_id, args.max_new_tokens

    def speculative(h, head_nodes: int | None = None, int8: bool = int8_on):
        """h decoded with the head's saved tree, or (head_nodes) a tree of that many nodes from its held-out accuracy."""
        given = {"tree_size"} if head_nodes else set()
        decode = DecodeConfig(tree_size=head_nodes or 16)
        drafts_with_a_head = not isinstance(h, LookupHead) and not (isinstance(h, HybridHead) and h.head is None)
        if args.dynamic_tree and drafts_with_a_head:  # dynamic heads (EAGLE): the tree they draft, over their saved one
            decode.depth, decode.top_k, decode.total_tokens = args.dynamic_tree
            given |= {"depth", "top_k", "total_tokens"}
        if args.hybrid_tree and isinstance(h, HybridHead) and trait(h.head, "dynamic"):
            h.hybrid_tree = DynamicTreeSpec(*args.hybrid_tree)
        gen = SpeculativeGenerator(target, h, draft_int8=int8, **tree_options(h, decode, given)[0])

        def run(ids):
            return gen.generate(ids, n, eos_token_id=eos)

        run.stats = head_stats(h)  # what its head adds, step by step (hybrids with a head)
        return run

    free = {f"lookup branch + corpus tree of {k} nodes, no head": speculative(HybridHead(None, 10, copy_tokens=40, corpus=corpus, corpus_nodes=k))
            for k in args.free_nodes}
    variants = {
        "plain": lambda ids: plain_generate(target, ids, n, eos_token_id=eos),
        "head alone": speculative(head),
        "head + lookup branch (L 10)": speculative(HybridHead(head, 10)),
        "+ copying branch grows to 40": speculative(HybridHead(head, 10, copy_tokens=40)),
        "+ corpus argmax chain of 8": speculative(HybridHead(head, 10, copy_tokens=40, corpus=chain, corpus_nodes=8)),
        "+ corpus tree of 8 nodes beside the head's tree": speculative(HybridHead(head, 10, copy_tokens=40, corpus=corpus, corpus_nodes=8)),
        "lookup branch + corpus tree, no head": speculative(HybridHead(None, 10, copy_tokens=40, corpus=corpus, corpus_nodes=8)),
        "prompt lookup alone (chain <= 10)": speculative(LookupHead(10)),
    }
    if args.only_corpus:
        keep = ("plain", "+ corpus argmax chain of 8", "+ corpus tree of 8 nodes beside the head's tree", "lookup branch + corpus tree, no head")
        variants = {k: v for k, v in variants.items() if k in keep}
    for k in args.corpus_nodes:
        variants[f"+ corpus tree of {k} nodes"] = speculative(HybridHead(head, 10, copy_tokens=40, corpus=corpus, corpus_nodes=k))
    for k in args.shared_nodes:
        default = " (the default, decode.hybrid_nodes)" if k == DecodeConfig().hybrid_nodes else ""
        variants[f"+ head and corpus share {k} nodes{default}"] = speculative(
            HybridHead(head, 10, copy_tokens=40, corpus=corpus, corpus_nodes=8, shared_nodes=k))
    for k in args.head_nodes:
        variants[f"+ corpus tree of 8 nodes beside the head's tree cut to {k} nodes"] = speculative(
            HybridHead(head, 10, copy_tokens=40, corpus=corpus, corpus_nodes=8), head_nodes=k)
    heads = {args.head: head, **{h: load_heads(h, target=target) for h in args.more_heads}}
    copies = {f"{folder} (int8)": load_heads(folder, target=target) for folder in heads} if args.draft_int8 == "both" else {}
    heads.update(copies)
    if args.only_margin:
        variants = {k: v for k, v in variants.items() if k in ("plain", "prompt lookup alone (chain <= 10)")}

    def shared(h, k: int, int8: bool, **kw):
        """h's hybrid, its nodes and the corpus's sharing k places (`kw`: sure, head_weight, head_continue)."""
        return speculative(HybridHead(h, 10, copy_tokens=40, corpus=corpus, corpus_nodes=k, shared_nodes=k, **kw), int8=int8)

    for folder, h in heads.items():
        if args.only_margin or folder != args.head:
            in_int8 = int8_on or folder in copies
            variants[f"{folder}: head alone"] = speculative(h, int8=in_int8)
            variants.update({f"{folder}: head and corpus share {k} nodes": shared(h, k, in_int8) for k in args.shared_nodes})
            variants.update({f"{folder}: head and corpus share {k} nodes, the head out where the corpus is {sure:.2f} sure": shared(h, k, in_int8, sure=sure)
                             for k in args.shared_nodes for sure in args.sure})
            variants.update({f"{folder}: head (weighed x{w:g}) and corpus share {k} nodes{f', the head out where the corpus is {sure:.2f} sure' if sure else ''}":
                             shared(h, k, in_int8, sure=sure, head_weight=w)
                             for k in args.shared_nodes for w in args.head_weight for sure in (args.sure or [0.0])})
            variants.update({f"{folder}: head{f' (weighed x{w:g})' if w != 1 else ''} and corpus share {k} nodes, the table continuing its paths by {c}{f', the head out where the corpus is {sure:.2f} sure' if sure else ''}":
                             shared(h, k, in_int8, sure=sure, head_weight=w, head_continue=c)
                             for k in args.shared_nodes for w in (args.head_weight or [1.0]) for sure in (args.sure or [0.0]) for c in args.head_continue})
    variants.update(free)
    head_free = {"plain", "prompt lookup alone (chain <= 10)", *free}
    totals = {v: [[0, 0.0, 0, 0, 0] for _ in prompts] for v in variants}  # per prompt: tokens, seconds, verifications, accepted,
    # and the drafts the head added over the head-free paths of the same steps (hybrids with a head, decode/hybrid.py)
    for r in range(args.rounds):
        for decode in variants.values():
            decode(prompts[0][:, :8])  # warm-up
        for i, ids in enumerate(prompts):  # every variant on one prompt, then the next: drift falls on all alike
            for name, decode in variants.items():
                stats = getattr(decode, "stats", None)
                gained = stats.head_gain if stats else 0
                cpu = time.thread_time()
                out = decode(ids)
                cpu = time.thread_time() - cpu
                row = totals[name][i]
                row[4] += stats.head_gain - gained if stats else 0
                row[0] += out.sequences.shape[1] - ids.shape[1]
                row[1] += cpu if args.cpu_time else out.seconds
                row[2] += len(out.accepted_per_step)
                row[3] += sum(out.accepted_per_step)
        print(f"round {r + 1} done", flush=True)

    def rate(rows):
        return sum(x[0] for x in rows) / sum(x[1] for x in rows)

    def tau(rows):
        steps = sum(x[2] for x in rows)
        return (sum(x[3] for x in rows) + steps) / steps if steps else None

    plain = totals["plain"]
    cats = [r.category for r in records]
    print(f"\n{target.name} ({args.dtype}, packed), {len(prompts)} prompts x {n} tokens, greedy, batch 1, "
          f"{torch.get_num_threads()} threads{' (CPU time)' if args.cpu_time else ''}, {cpu_kind()} CPU; head {args.head} ({head.kind}); "
          f"{'its' if int8_on else 'the (int8) copies' if copies else 'no'} products in int8; {args.rounds} rounds")
    print("τ: tokens per verification after prefill, the bonus token counted (plain decoding = 1.00); τ without the head: "
          "the same steps' head-free paths alone (the lookup branch, the corpus table's own tree; hybrids with a head)\n")
    print("| decoding | τ | τ without the head | tokens/s | vs plain | " + " | ".join(cats) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cats))
    for name, rows in totals.items():
        t = tau(rows)
        steps = sum(x[2] for x in rows)
        without = f"{t - sum(x[4] for x in rows) / steps:.2f}" if getattr(variants[name], "stats", None) and steps else "-"
        cells = [f"{rate([x]) / rate([q]):.2f}x" for x, q in zip(rows, plain)]
        print(f"| {name} | {'-' if t is None else f'{t:.2f}'} | {without} | {rate(rows):.1f} | {rate(rows) / rate(plain):.2f}x | "
              + " | ".join(cells) + " |")
    best = max((v for v in totals if v not in head_free), key=lambda v: rate(totals[v]))
    free_best = max(head_free, key=lambda v: rate(totals[v]))
    print(f"\nthe head's margin: {rate(totals[best]) / rate(totals[free_best]):.2f}x: {best} against {free_best}")


if __name__ == "__main__":
    main()
