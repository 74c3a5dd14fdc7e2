"""What the vLLM plugin's drafting costs per step as the context grows: the prompt-lookup index built
over the whole context at every step, against each row's index kept and extended (`RowIndexes`).

    python scripts/bench_proposer.py --head runs/demo/medusa/final
    python scripts/bench_proposer.py --head runs/demo/medusa/final --contexts 256 4096 --rows 1 8

Real text: the shipped distilled answers, tokenized by the embedded SmolLM2's tokenizer, cut into rows
of each context length; each row then grows by 3 tokens a step (about what a drafted step commits)
for --steps steps, and every step drafts each row's chain (`chain_draft`, the corpus proposer's,
and `hybrid_chain`, the hybrid plugin's, with a fixed head draft). Prints milliseconds per engine
step (all rows) both ways and their ratio; the drafts are checked equal. The engine's own step
(the target's forward) is not in it: this is the plugin's share.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time

from headstart.decode.corpus import CorpusNgram
from headstart.serve.proposer import RowIndexes, chain_draft, hybrid_chain


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--head", default="runs/demo/medusa/final", help="a head folder holding corpus_ngram.safetensors")
    p.add_argument("--data", default="data/distilled/smollm2-135m.jsonl.gz")
    p.add_argument("--contexts", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8], help="requests drafted per engine step")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--k", type=int, default=5, help="drafts per chain")
    args = p.parse_args()
    corpus = CorpusNgram.load(args.head)
    if corpus is None:
        p.error(f"{args.head} holds no corpus_ngram.safetensors")
    from transformers import AutoTokenizer

    from headstart.embedded import embedded_model_path

    tok = AutoTokenizer.from_pretrained(embedded_model_path())
    stream: list[int] = []
    need = max(args.rows) * (max(args.contexts) + 3 * args.steps + 1)
    with gzip.open(args.data, "rt") as f:
        for line in f:
            for m in json.loads(line).get("messages", []):
                if m.get("role") == "assistant":
                    stream += tok.encode(m["content"], add_special_tokens=False)
            if len(stream) >= need:
                break
    chain_draft(corpus, stream[:64], args.k)  # the table's first touch (its arrays read in) is not a step
    print(f"corpus table {args.head} (order {corpus.order}); k = {args.k}; {args.steps} steps of +3 tokens per row\n")
    print("| context | rows | drafter | index rebuilt each step (ms/step) | index kept per row (ms/step) | ratio |")
    print("|---|---|---|---|---|---|")
    for context in args.contexts:
        for rows in args.rows:
            span = context + 3 * args.steps + 1
            texts = [stream[r * span : (r + 1) * span] for r in range(rows)]
            for name, draft in (("corpus (chain_draft)", lambda t, i: chain_draft(corpus, t, args.k, index=i)),
                                ("hybrid (hybrid_chain)", lambda t, i: hybrid_chain(corpus, t, args.k, 42, i))):
                seconds, chains = [], []
                for kept in (False, True):
                    indexes, out = RowIndexes(), []
                    start = time.perf_counter()
                    for step in range(args.steps):
                        n = context + 3 * step
                        for r, text in enumerate(texts):
                            tokens = text[:n]
                            out.append(draft(tokens, indexes.of(r, tokens[:-1]) if kept else None))
                    seconds.append(time.perf_counter() - start)
                    chains.append(out)
                assert chains[0] == chains[1], "the kept index drafted other chains"
                rebuilt, kept = (1e3 * s / args.steps for s in seconds)
                print(f"| {context} | {rows} | {name} | {rebuilt:.2f} | {kept:.3f} | {rebuilt / kept:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
