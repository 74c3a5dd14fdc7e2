"""A prepared check for the day a GPU is lent: verification cost, the decoding loop's share, training throughput.

    python scripts/gpu_check.py --out runs/gpu_check.json       # on a CUDA GPU: a few minutes (docs/results.md#on-a-gpu)
    python scripts/gpu_check.py --device cpu --tiny             # the same code on a tiny model, on CPU (tests)

Builds a Llama-shaped model of about 1.2B parameters from a LlamaConfig (Llama-3.2-1B's shape:
hidden 2048, 16 layers, 32 heads, 8 KV heads, intermediate 8192, vocabulary 128256) straight on the
device in bf16 with random weights: nothing is downloaded. Then it measures, through headstart's
own code:

(a) the cost of one verification forward of 1, 2, 4, ..., 64 tree tokens against a 512-token
    cache, relative to 1 token: `Target.tree_forward` over the first nodes of the shipped 64-node
    tree, then the target's logits over every node, as decoding verifies;
(b) the speculative loop's share of a step: a few random prompts decoded with a freshly built,
    untrained EAGLE-3 head (τ near 1: the point is where the time goes) by
    `SpeculativeGenerator(...).generate(profile=True)`, split into draft, target forward, accept
    and commit; tokens/s of the speculative and the plain loop, each from an unprofiled pass;
(c) a training step's throughput per head kind: `profile_kind` of scripts/profile_train.py on
    made-up batches of the GPU recipes' batch size and length (Medusa and EAGLE-3:
    recipes/llama-3.1-8b-instruct, EAGLE: recipes/vicuna-7b-v1.3).

Prints Markdown tables; --out writes them as JSON too. Asked for a CUDA device where torch sees
none, it stops at once with one `error:` line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from functools import partial
from pathlib import Path

import torch

# transformers, headstart and scripts/profile_train.py are imported where they are used, after the
# device check: a machine without a GPU is told so at once, not after seconds of imports.

LLAMA_1B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=True,
)
GPU_RECIPES = {
    "medusa": "recipes/llama-3.1-8b-instruct/medusa.yaml",
    "eagle": "recipes/vicuna-7b-v1.3/eagle.yaml",
    "eagle3": "recipes/llama-3.1-8b-instruct/eagle3.yaml",
    "eagle3-parallel": "recipes/llama-3.1-8b-instruct/eagle3.yaml",  # with head.parallel_drafting=true
}
TREE_TOKENS = (1, 2, 4, 8, 16, 32, 64)


def check_device(device: str) -> None:
    """Stop with one `error:` line when a CUDA device is asked for and torch sees none."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        print(f"gpu_check.py: error: --device {device} needs a CUDA GPU, but torch {torch.__version__} ({build}) sees "
              "none; run it on a GPU machine with a CUDA build of torch, or pass --device cpu --tiny", file=sys.stderr)
        sys.exit(2)


def build_target(tiny: bool, device: str):
    """The 1B Llama in bf16 on `device`, or with `tiny` scripts/profile_train.py's tiny Llama in float32."""
    from profile_train import target_from_config, tiny_target
    from transformers import LlamaConfig

    if tiny:
        return tiny_target(torch.float32, device)
    return target_from_config(LlamaConfig(**LLAMA_1B), torch.bfloat16, device, "llama-1b-shaped (random weights)")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(fn, device: torch.device, repeats: int, warmup: int = 3) -> float:
    """Median wall time of fn() in ms, the device synchronised around each call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def tree_inputs(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Visibility (n, n) and depths (n,) of n verification inputs: the root and the first n - 1
    nodes of the shipped 64-node tree (its paths are sorted by depth, so any first ones form a tree)."""
    from headstart.decode.tree import shipped_trees, tree_from_paths

    if n == 1:
        return torch.ones(1, 1, dtype=torch.bool), torch.zeros(1, dtype=torch.long)
    tree = tree_from_paths(shipped_trees()["tree64"][: n - 1])
    return tree.visible, tree.depth


def verify_once(target, tokens: torch.Tensor, visible: torch.Tensor, positions: torch.Tensor, cache, prefix: int) -> None:
    """One verification as decoding runs it: the tree's forward over the cached prefix, the target's
    logits over every node (B, N, V), then the cache cut back to the prefix."""
    from headstart.decode.cache import truncate

    out = target.tree_forward(tokens, visible, positions, cache, prefix)
    target.logits(out.hidden)
    truncate(cache, prefix)


@torch.no_grad()
def verify_costs(target, sizes=TREE_TOKENS, prefix: int = 512, repeats: int = 20) -> list[dict]:
    """ms of one verification (tree forward + logits over the tree) of each size against a
    `prefix`-token cache, and its ratio to one token."""
    dev = target.device
    gen = torch.Generator().manual_seed(0)
    cache = target.new_cache()
    target(torch.randint(0, target.vocab_size, (1, prefix), generator=gen).to(dev), cache=cache)
    rows = []
    for n in sizes:
        visible, depth = tree_inputs(n)
        tokens = torch.randint(0, target.vocab_size, (1, n), generator=gen).to(dev)
        positions = (prefix + depth)[None].to(dev)  # (1, n)
        verify = partial(verify_once, target, tokens, visible.to(dev), positions, cache, prefix)
        rows.append({"tree_tokens": n, "ms": round(_median_ms(verify, dev, repeats), 3)})
    for r in rows:
        r["vs_one"] = round(r["ms"] / rows[0]["ms"], 3)
    return rows


def verify_table(rows: list[dict], prefix: int) -> str:
    lines = [f"| tree tokens (cache {prefix}) | ms per verification | vs 1 token |", "|---|---|---|"]
    lines += [f"| {r['tree_tokens']} | {r['ms']:.2f} | {r['vs_one']:.2f}x |" for r in rows]
    return "\n".join(lines)


def loop_share(target, prompts: int, prompt_len: int, new_tokens: int, tree: dict, draft_vocab: int,
               parallel: bool = False) -> dict:
    """Decode random prompts with an untrained EAGLE-3 head and plainly: tokens/s of each, τ, and
    the profiled split of a speculative step (seconds per phase, summed over the prompts). With
    `parallel` the head drafts P-EAGLE style: all `depth` positions in one draft forward."""
    from headstart import heads
    from headstart.decode.generate import SpeculativeGenerator
    from headstart.decode.plain import plain_generate

    dev = target.device
    extra = {"parallel_drafting": True, "parallel_tokens": max(2, tree["depth"])} if parallel else {}
    head = heads.build("eagle3", target, draft_vocab=torch.arange(min(draft_vocab, target.vocab_size)),
                       tree=tree, **extra)
    head = head.to(device=dev, dtype=target.dtype).eval().requires_grad_(False)  # as loading a head for decoding does
    spec = SpeculativeGenerator(target, head, **tree)
    gen = torch.Generator().manual_seed(1)
    ids = [torch.randint(0, target.vocab_size, (1, prompt_len), generator=gen).to(dev) for _ in range(prompts)]
    no_eos: list[int] = []  # random weights: run every prompt to new_tokens
    spec.generate(ids[0], 8, eos_token_id=no_eos)
    plain_generate(target, ids[0], 8, eos_token_id=no_eos)

    def run(decode, **kw) -> tuple[int, float, list[int], dict]:
        tokens, seconds, steps, timings = 0, 0.0, [], {}
        for p in ids:
            out = decode(p, new_tokens, eos_token_id=no_eos, **kw)
            tokens, seconds, steps = tokens + out.new_tokens, seconds + out.seconds, steps + out.accepted_per_step
            for k, v in out.timings.items():
                timings[k] = timings.get(k, 0.0) + v
        return tokens, seconds, steps, timings

    plain_tokens, plain_seconds, _, _ = run(lambda *a, **k: plain_generate(target, *a, **k))
    spec_tokens, spec_seconds, steps, _ = run(spec.generate)
    _, _, profiled_steps, timings = run(spec.generate, profile=True)
    return {
        "head": "P-EAGLE (parallel drafting)" if parallel else "EAGLE-3",
        "prompts": prompts,
        "prompt_tokens": prompt_len,
        "new_tokens": new_tokens,
        "tree": tree,
        "draft_vocab_size": head.options["draft_vocab_size"],
        "tau": round(sum(a + 1 for a in steps) / len(steps), 3),
        "plain_tokens_per_s": round(plain_tokens / plain_seconds, 1),
        "speculative_tokens_per_s": round(spec_tokens / spec_seconds, 1),
        "ms_per_step": {k: round(1000 * v / len(profiled_steps), 3) for k, v in timings.items()},
    }


def loop_table(loop: dict) -> str:
    phases = loop["ms_per_step"]
    step = sum(phases.values())
    lines = ["| phase of a speculative step | ms per step | share |", "|---|---|---|"]
    lines += [f"| {name} | {ms:.2f} | {ms / step:.1%} |" for name, ms in phases.items()]
    lines.append(f"| whole step | {step:.2f} | 100% |")
    t = loop["tree"]
    outside = 1 - phases.get("target_forward", 0.0) / step
    lines += [
        "",
        f"Untrained {loop['head']} head (draft vocabulary {loop['draft_vocab_size']}), dynamic tree depth {t['depth']}, "
        f"top-k {t['top_k']}, {t['total_tokens']} nodes; {loop['prompts']} random prompts of {loop['prompt_tokens']} "
        f"tokens x {loop['new_tokens']} new tokens, greedy: τ {loop['tau']:.2f}; speculative loop "
        f"{loop['speculative_tokens_per_s']} tok/s, plain loop {loop['plain_tokens_per_s']} tok/s; "
        f"outside the target's forward: {outside:.1%} of a step.",
    ]
    return "\n".join(lines)


def train_rows(target, kinds: list[str], tiny: bool, steps: int) -> list[dict]:
    """`profile_kind` per head kind on made-up batches of its GPU recipe's batch size and length."""
    from profile_train import made_up_examples, profile_kind, tiny_overrides

    from headstart.recipe import load_recipe

    rows = []
    for kind in kinds:
        path = GPU_RECIPES[kind]
        overrides = ["train.report_to=none"]
        if kind.startswith("eagle3"):
            overrides.append("head.feature_layers=null")  # the recipe's layers are an 8B's; the default fits any depth
        if kind == "eagle3-parallel":
            overrides += ["head.parallel_drafting=true", "decode.depth=4"]  # K = 4 positions per draft forward
        if tiny:
            overrides += [*tiny_overrides(path), "data.max_length=64"]
        recipe = load_recipe(path, overrides)
        examples = made_up_examples(recipe.train.batch_size * steps, recipe.data.max_length, target.vocab_size)
        rows.append({**profile_kind(recipe, target, examples, steps), "kind": kind})
        print(f"profiled training of {kind}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--tiny", action="store_true", help="a tiny Llama in float32 and small sizes (tests, CPU)")
    ap.add_argument("--kinds", nargs="+", default=list(GPU_RECIPES), choices=list(GPU_RECIPES))
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    check_device(args.device)
    from profile_train import machine, profile_table


    start = time.perf_counter()
    target = build_target(args.tiny, args.device)
    dev = target.device
    params = sum(p.numel() for p in target.model.parameters())
    where = machine(dev)
    print(f"{target.name}: {params:,} parameters, {str(target.dtype).removeprefix('torch.')}, "
          f"{where['kind']} ({where['name']}); built in {time.perf_counter() - start:.1f} s", flush=True)
    result = {"target": target.name, "parameters": params, "dtype": str(target.dtype).removeprefix("torch."),
              "machine": where, "config": "tiny" if args.tiny else LLAMA_1B, "time": time.strftime("%Y-%m-%d %H:%M")}
    failed = []

    def section(name: str, measure, table) -> None:
        """Run one section; a failure is printed and the next section still runs (device time is scarce),
        and the JSON holds whatever was measured so far."""
        try:
            result[name] = measure()
            print(table(result[name]), flush=True)
        except Exception:  # noqa: BLE001 - reported, and the script exits non-zero at the end
            failed.append(name)
            traceback.print_exc()
        result["seconds"] = round(time.perf_counter() - start, 1)
        if args.out:
            save(result, Path(args.out))

    prefix = 512
    print(f"\n(a) Verification forward against a {prefix}-token cache\n", flush=True)
    section("verify", lambda: verify_costs(target, TREE_TOKENS, prefix, repeats=3 if args.tiny else 20),
            lambda rows: verify_table(rows, prefix))

    if args.tiny:
        tree, sizes = {"depth": 3, "top_k": 4, "total_tokens": 8}, dict(prompts=2, prompt_len=32, new_tokens=16)
    else:  # EAGLE-2/3's GPU defaults, as the GPU recipes set them
        tree, sizes = {"depth": 6, "top_k": 10, "total_tokens": 60}, dict(prompts=4, prompt_len=128, new_tokens=128)
    print("\n(b) The speculative loop's share of a step\n", flush=True)
    section("loop", lambda: loop_share(target, tree=tree, draft_vocab=32000, **sizes), loop_table)
    print("\n(b') The same with a parallel-drafting (P-EAGLE) head: one draft forward per step\n", flush=True)
    section("loop_parallel", lambda: loop_share(target, tree=tree, draft_vocab=32000, parallel=True, **sizes),
            loop_table)

    print("\n(c) Training step per head kind (made-up batches of the GPU recipes' sizes)\n", flush=True)
    section("train", lambda: train_rows(target, args.kinds, args.tiny, steps=1 if args.tiny else 5), profile_table)
    print(f"\nchecks took {result['seconds']} s (imports excluded)")
    if failed:
        print(f"gpu_check.py: error: section(s) {', '.join(failed)} failed (traceback above)", file=sys.stderr)
        sys.exit(1)


def save(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)

if __name__ == "__main__":
    main()
