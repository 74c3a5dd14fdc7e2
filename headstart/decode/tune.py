"""Which tree a head decodes with, and choosing one for the machine at hand.

`tree_options` is the one rule every command follows: the command line (dotted `decode.*`
overrides, `--tree`) beats the tree saved or tuned with the head, which beats the recipe's decode
section (whose defaults stand in for the engine's).

Tuning weighs the acceptance a tree buys against what a step with it costs here, relative to a
plain step (`forward_cost`: the target's forward over n new tokens, relative to one token):

- static trees (Medusa): expected τ from the head's held-out per-depth top-k accuracy, over tree
  sizes (`best_tree_for_cost`);
- dynamic trees (EAGLE, EAGLE-3, P-EAGLE): τ measured by really decoding a few prompts greedily
  with each (depth, top_k, total_tokens) of a small grid; step cost = the verification forward
  over total_tokens + 1 inputs + the head's measured drafting time + the loop's fixed cost
  (accepting and committing), per step (`tune_dynamic`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import torch

from headstart.config import DecodeConfig
from headstart.decode.contract import DraftState, TreeSpec, trait
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.generate import SpeculativeGenerator
from headstart.decode.tree import StaticTreeSpec, best_tree_paths, expected_accept_length, load_tree
from headstart.decode.verify import acceptance_length
from headstart.errors import HeadstartError

TREE_SOURCES = ("command", "head", "recipe")  # highest precedence first
DYNAMIC_FIELDS = ("depth", "top_k", "total_tokens")
TUNING_PROMPTS = "data/prompts/train.jsonl"  # the distillation prompts: never the held-out eval set
CHAINS = (2, 3, 4, 5)  # chain lengths of the default grid
TREES = (4, 7, 12, 16)  # tree sizes of the default grid ...
TREE_TOP_K = (2, 3, 4)  # ... each with these top_k
MAX_DEPTH = 5


class TuneError(HeadstartError):
    """A tree tuning that cannot run as asked (a head without measurements, a bad grid, no prompts)."""


# ---------------------------------------------------------------- which tree decodes


def tree_options(head, decode: DecodeConfig, given: Collection[str] = ()) -> tuple[dict, str]:
    """SpeculativeGenerator's tree keyword arguments for `head`, and where they came from.

    Precedence, field by field: the command line (`given`: the decode fields set there) > the
    head's own tree (`head.default_tree`: saved with it, tuned, or the trainer's) > the recipe's decode
    section; a hybrid given a tree for its EAGLE head (decode.hybrid_tree) drafts that one whole. The
    source is 'command', 'head' or 'recipe', or several joined by '+' when the fields come from
    different places.
    """
    own = trait(head, "default_tree")  # a DynamicTreeSpec for dynamic heads, a StaticTreeSpec else
    hybrid = trait(head, "hybrid_tree")  # a hybrid's tree for its EAGLE head (decode.hybrid_tree): whole
    if hybrid is not None:
        return {name: getattr(hybrid, name) for name in DYNAMIC_FIELDS}, "command" if "hybrid_tree" in given else "recipe"
    if trait(head, "dynamic"):
        kwargs, sources = {}, set()
        for name in DYNAMIC_FIELDS:
            source = "command" if name in given else "head" if own is not None else "recipe"
            kwargs[name] = getattr(own, name) if source == "head" else getattr(decode, name)
            sources.add(source)
        return kwargs, "+".join(s for s in TREE_SOURCES if s in sources)
    if "tree_size" in given or ("tree" in given and decode.tree != "auto"):
        if decode.tree == "auto":  # a size on the command: built from the head's accuracy, not its own tree
            held_out = trait(head, "held_out")
            accuracy = held_out.topk if held_out is not None else None
            num_heads = trait(head, "options").get("num_heads")
            return {"tree": load_tree("auto", accuracy, decode.tree_size, num_heads)}, "command"
        return {"tree": decode.tree}, "command"
    if own is not None:
        return {"tree": own}, "head"
    return {"tree": decode.tree, "tree_size": decode.tree_size}, "recipe"


# ---------------------------------------------------------------- what a step costs


@torch.no_grad()
def forward_cost(target, sizes: list[int], past_len: int = 256, repeats: int = 5) -> dict[int, float]:
    """Seconds of one target forward (with logits) over n new tokens after `past_len` cached ones
    (fewer where the target's context is too short for both), for n = 1 and each of `sizes`.

    A shared machine's speed drifts within seconds, so the sizes take turns: each of `repeats`
    rounds times every size once (after one warm-up round), each size keeps its median, and the
    curve is made non-decreasing in n (`monotone_costs`): a forward over more tokens never costs
    less, and a size timed in a slow moment no longer looks dearer than a larger one."""
    limit = target.max_position_embeddings or 4096
    past_len = max(8, min(past_len, limit - max(sizes, default=1) - 1))
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, target.vocab_size, (1, past_len), generator=gen).to(target.device)
    cache = target.new_cache()
    target(prefix, cache=cache)
    inputs = {}
    for n in sorted(set([1, *sizes])):
        tokens = torch.randint(0, target.vocab_size, (1, n), generator=gen).to(target.device)
        inputs[n] = (tokens, torch.ones(n, n, dtype=torch.bool).tril(), (past_len + torch.arange(n))[None].to(target.device))
    times: dict[int, list[float]] = {n: [] for n in inputs}
    for round_ in range(repeats + 1):
        for n, (tokens, visible, positions) in inputs.items():
            start = time.perf_counter()
            out = target.tree_forward(tokens, visible, positions, cache, past_len)
            target.logits(out.hidden[0]).argmax(-1)
            if round_:  # the first round warms up
                times[n].append(time.perf_counter() - start)
            cache.crop(-n)
    return monotone_costs({n: statistics.median(t) for n, t in times.items()})


def monotone_costs(costs: dict[int, float]) -> dict[int, float]:
    """The non-decreasing curve (in the number of tokens) closest to `costs` in squared error:
    isotonic regression by pooling adjacent violators, each size weighing the same."""
    blocks: list[list] = []  # [mean, sizes pooled]
    for n in sorted(costs):
        blocks.append([costs[n], [n]])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (a, na), (b, nb) = blocks[-2], blocks.pop()
            blocks[-1] = [(a * len(na) + b * len(nb)) / (len(na) + len(nb)), na + nb]
    return {n: mean for mean, sizes in blocks for n in sizes}


# ---------------------------------------------------------------- static trees (Medusa)


def best_tree_for_cost(
    accuracy: list[list[float]], costs: dict[int, float], draft_cost: float = 0.0, max_depth: int | None = None
) -> tuple[list[tuple[int, ...]], dict]:
    """The tree maximising expected τ / (verify cost + draft cost), over the measured sizes.

    costs: seconds per forward of n + 1 inputs (the root and n nodes), as `forward_cost` returns
    for n + 1; draft_cost: seconds the head takes to propose. Returns the paths and a table.
    """
    acc = accuracy[:max_depth] if max_depth else accuracy
    base = costs[1]
    table = {}
    best, best_paths = -1.0, None
    for n_inputs, seconds in sorted(costs.items()):
        n = n_inputs - 1
        if n < 1:
            continue
        paths = best_tree_paths(acc, n)
        tau = expected_accept_length(acc, paths)
        speed = tau / ((seconds + draft_cost) / base)  # relative to plain decoding
        table[n] = {"expected_tau": round(tau, 3), "step_cost": round((seconds + draft_cost) / base, 3), "expected_speedup": round(speed, 3)}
        if speed > best:
            best, best_paths = speed, paths
    return best_paths, table


def tune_static(target, head, sizes: Sequence[int], past_len: int) -> tuple[StaticTreeSpec, dict]:
    """Medusa: the tree size whose expected τ (from the head's held-out accuracy) per unit of step cost is highest."""
    if trait(head, "held_out") is None:
        raise TuneError(
            "the head has no measured held-out accuracy (head.held_out), which its tree is built from; "
            "train it with `headstart train` (which measures it) before tuning its tree"
        )
    costs = forward_cost(target, [n + 1 for n in sizes], past_len)
    state = DraftState(hidden=torch.zeros(1, target.hidden_size, dtype=target.dtype, device=target.device), root=torch.zeros(1, dtype=torch.long))
    tree = load_tree("chain1")
    head.propose(state, tree)
    start = time.perf_counter()
    for _ in range(5):
        head.propose(state, tree)
    draft_cost = (time.perf_counter() - start) / 5
    paths, table = best_tree_for_cost(head.held_out.topk, costs, draft_cost, max_depth=head.options.get("num_heads"))
    table = {"kind": "static", "sizes": table, "plain_step_s": round(costs[1], 5), "draft_s": round(draft_cost, 5)}
    return StaticTreeSpec(paths), table


# ---------------------------------------------------------------- dynamic trees (EAGLE, EAGLE-3, P-EAGLE)


def dynamic_grid(max_depth: int | None = None) -> list[DynamicTreeSpec]:
    """The default candidates: chains of 2..5 and trees of 4, 7, 12 and 16 nodes with top_k 2..4,
    none deeper than max_depth (a parallel head's K). A tree of n nodes grows n // top_k + 1
    levels (at most 5): room for its likeliest paths, and no more draft forwards than that."""
    cap = min(MAX_DEPTH, max_depth or MAX_DEPTH)
    grid = [DynamicTreeSpec(d, 1, d) for d in CHAINS if d <= cap]
    grid += [DynamicTreeSpec(min(cap, n // k + 1), k, n) for n in TREES for k in TREE_TOP_K]
    return list(dict.fromkeys(grid))


def check_grid(grid, max_depth: int | None) -> list[DynamicTreeSpec]:
    """The grid's (depth, top_k, total_tokens) triples as specs; a TuneError names the first bad one."""
    if not grid:
        raise TuneError("the grid of candidate trees is empty; give (depth, top_k, total_tokens) triples, e.g. [(3, 1, 3), (3, 2, 7)]")
    specs = []
    for entry in grid:
        values = tuple(vars(entry).values()) if isinstance(entry, DynamicTreeSpec) else entry
        if (not isinstance(values, (list, tuple)) or len(values) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)):
            raise TuneError(f"grid entry {entry!r}: expected (depth, top_k, total_tokens), three integers >= 1, e.g. (3, 2, 7)")
        spec = DynamicTreeSpec(*values)
        if max_depth is not None and spec.depth > max_depth:
            raise TuneError(
                f"grid entry {tuple(values)} is {spec.depth} deep, but this parallel-drafting head drafts {max_depth} "
                f"positions per forward; keep depth <= {max_depth}"
            )
        specs.append(spec)
    return specs


def tuning_prompts(target, path: str | Path = TUNING_PROMPTS, n: int = 3) -> list[torch.Tensor]:
    """(1, T) ids of the first n prompts of a headstart prompt file (rows with 'prompt'), chat-encoded."""
    from headstart.chat import encode_chat
    from headstart.jsonl import read_jsonl

    if target.tokenizer is None:
        raise TuneError("reading prompts needs the target's tokenizer; pass token ids instead (prompts=[ids, ...])")
    out = []
    for lineno, row in read_jsonl(path):
        text = row.get("prompt")
        if not isinstance(text, str) or not text:
            raise TuneError(f"{path}:{lineno}: a tuning prompt row needs 'prompt' (a string), as in {TUNING_PROMPTS}")
        out.append(encode_chat(target.tokenizer, [{"role": "user", "content": text}]))
        if len(out) == n:
            break
    if not out:
        raise TuneError(f"{path} holds no prompts; name a JSONL file of {{'prompt': ...}} rows")
    return out


def _decode_stats(target, head, spec: DynamicTreeSpec, prompts: list[torch.Tensor], max_new_tokens: int,
                  draft_int8: bool = False) -> dict:
    """Greedy decoding of `prompts` with `spec` (the head's products in int8 with `draft_int8`, as decoding
    will run them): τ, and seconds per step spent drafting and in the loop's fixed work (accepting,
    committing), from the generator's own phase timings."""
    gen = SpeculativeGenerator(target, head, depth=spec.depth, top_k=spec.top_k, total_tokens=spec.total_tokens,
                               draft_int8=draft_int8)
    accepted: list[int] = []
    timings: dict[str, float] = {}
    for ids in prompts:
        out = gen.generate(ids.to(target.device), max_new_tokens=max_new_tokens, profile=True)
        accepted += out.accepted_per_step
        for phase, seconds in out.timings.items():
            timings[phase] = timings.get(phase, 0.0) + seconds
    steps = max(len(accepted), 1)
    fixed = timings.get("accept", 0.0) + timings.get("commit_and_bookkeeping", 0.0)
    return {"tau": acceptance_length(accepted), "steps": len(accepted), "draft_s": timings.get("draft", 0.0) / steps,
            "fixed_s": fixed / steps, "draft_int8": gen.draft_int8}


def tune_dynamic(
    target, head, prompts: list[torch.Tensor], specs: list[DynamicTreeSpec], max_new_tokens: int = 24, past_len: int = 256,
    draft_int8: bool = False,
) -> tuple[DynamicTreeSpec, dict]:
    """The (depth, top_k, total_tokens) of `specs` (checked: `check_grid`) with the highest measured
    τ / step cost, the head drafting as decoding will (`draft_int8`); returns it and the table of every
    candidate."""
    costs = forward_cost(target, sorted({s.total_tokens + 1 for s in specs}), past_len)
    plain = costs[1]
    warm = _decode_stats(target, head, specs[0], prompts[:1], 4, draft_int8)  # one-time costs stay out of the first row
    int8 = warm["draft_int8"]  # whether the products ran in int8 (not where the CPU lacks the kernels)
    rows = []
    for spec in specs:
        m = _decode_stats(target, head, spec, prompts, max_new_tokens, draft_int8)
        verify = costs[spec.total_tokens + 1] / plain
        step = verify + (m["draft_s"] + m["fixed_s"]) / plain
        rows.append({**vars(spec), "tau": round(m["tau"], 3), "steps": m["steps"], "verify_cost": round(verify, 3),
                     "draft_cost": round(m["draft_s"] / plain, 3), "fixed_cost": round(m["fixed_s"] / plain, 3),
                     "step_cost": round(step, 3), "expected_speedup": round(m["tau"] / step, 3)})
    best = max(rows, key=lambda r: r["expected_speedup"])
    tree = DynamicTreeSpec(*(best[name] for name in DYNAMIC_FIELDS))
    table = {"kind": "dynamic", "plain_step_s": round(plain, 5), "draft_int8": int8, "chosen": tree.to_json(), "candidates": rows}
    return tree, table


def tune_tree(
    target,
    head,
    sizes: Sequence[int] = (4, 8, 12, 16, 24, 32),
    past_len: int = 256,
    prompts: str | Path | Sequence[torch.Tensor] = TUNING_PROMPTS,
    num_prompts: int = 3,
    grid=None,
    max_new_tokens: int = 24,
    draft_int8: bool = False,
) -> tuple[TreeSpec, dict]:
    """The best tree for `head` on this machine, and the table it was chosen from. Nothing is written:
    `headstart.heads.results.set_default_tree` makes it the head's own (config.json: head.tree, and the
    table as tree_tuning).

    Static heads (Medusa): a StaticTreeSpec, over tree `sizes`, from the head's measured accuracy.
    Dynamic heads (EAGLE, EAGLE-3, parallel EAGLE-3): a DynamicTreeSpec over `grid`
    (default `dynamic_grid`), τ measured by greedy decoding of `prompts` (a prompt file, of which
    the first `num_prompts` are used, or (1, T) token ids) for `max_new_tokens` each, its products in int8
    with `draft_int8` (`decode.draft_int8`: the cost decoding will pay; the head is changed in place, as a
    generator changes it).
    """
    if not trait(head, "dynamic"):
        if grid is not None:
            raise TuneError("a grid of (depth, top_k, total_tokens) applies to dynamic heads (EAGLE); a Medusa head's tree is chosen over sizes")
        return tune_static(target, head, sizes, past_len)
    k = trait(head, "parallel_tokens")  # a parallel head's K bounds the depth
    specs = check_grid(dynamic_grid(k) if grid is None else grid, k)
    file = None
    if isinstance(prompts, (str, Path)):
        file, prompts = str(prompts), tuning_prompts(target, prompts, num_prompts)
    if not prompts:
        raise TuneError("no prompts to decode; give a prompt file or token ids")
    tree, table = tune_dynamic(target, head, list(prompts), specs, max_new_tokens, past_len, draft_int8)
    table["prompts"] = {"file": file, "count": len(prompts), "max_new_tokens": max_new_tokens}
    return tree, table


def format_tuning(table: dict) -> str:
    """The tuning table for people: one line per candidate, the chosen one marked."""
    if table.get("kind") == "dynamic":
        chosen = table["chosen"]
        p = table["prompts"]
        where = f"{p['count']} prompts of {p['file']}" if p["file"] else f"{p['count']} given prompts"
        if p["file"] == TUNING_PROMPTS:
            where += " (the distillation prompts, not the held-out eval set)"
        drafted = ", the head's products in int8" if table.get("draft_int8") else ""
        lines = [f"τ measured by greedy decoding of {where}, {p['max_new_tokens']} tokens each{drafted}; costs relative to a plain step",
                 "  depth top_k nodes |    τ | verify  draft  fixed   step | expected speedup"]
        for r in table["candidates"]:
            mark = " <- chosen" if {n: r[n] for n in DYNAMIC_FIELDS} == chosen else ""
            lines.append(f"  {r['depth']:5d} {r['top_k']:5d} {r['total_tokens']:5d} | {r['tau']:4.2f} | {r['verify_cost']:6.2f} "
                         f"{r['draft_cost']:6.2f} {r['fixed_cost']:6.2f} {r['step_cost']:6.2f} | {r['expected_speedup']:.2f}x{mark}")
        return "\n".join(lines)
    best = max(table["sizes"].items(), key=lambda kv: kv[1]["expected_speedup"])[0]
    lines = ["expected τ from the head's held-out accuracy; costs relative to a plain step",
             "  nodes | expected τ | step cost | expected speedup"]
    for n, r in table["sizes"].items():
        mark = " <- chosen" if n == best else ""
        lines.append(f"  {n:5d} | {r['expected_tau']:10.2f} | {r['step_cost']:9.2f} | {r['expected_speedup']:.2f}x{mark}")
    return "\n".join(lines)
