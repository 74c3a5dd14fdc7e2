"""Choosing a tree for the machine at hand: measured forward cost against expected acceptance.

A tree of n nodes accepts more tokens per step as n grows, but the verification forward costs
more. `forward_cost` measures the target's forward over n new tokens on this machine, relative to
one token; `best_tree_for_cost` picks the tree size whose expected τ per unit of step cost is
highest, given a head's measured per-depth top-k accuracy.
"""

from __future__ import annotations

import time

import torch

from headstart.decode.tree import best_tree_paths, expected_accept_length


@torch.no_grad()
def forward_cost(target, sizes: list[int], past_len: int = 256, repeats: int = 5) -> dict[int, float]:
    """Seconds of one target forward (with logits) over n new tokens after `past_len` cached ones."""
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, target.vocab_size, (1, past_len), generator=gen).to(target.device)
    cache = target.new_cache()
    target(prefix, cache=cache)
    costs = {}
    for n in sorted(set([1, *sizes])):
        tokens = torch.randint(0, target.vocab_size, (1, n), generator=gen).to(target.device)
        visible = torch.ones(n, n, dtype=torch.bool).tril()
        positions = (past_len + torch.arange(n))[None].to(target.device)
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            out = target.tree_forward(tokens, visible, positions, cache, past_len)
            target.logits(out.hidden[0]).argmax(-1)
            times.append(time.perf_counter() - start)
            cache.crop(-n)
        costs[n] = min(times[1:])
    return costs


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


@torch.no_grad()
def tune_tree(target, heads, sizes: tuple[int, ...] = (4, 8, 12, 16, 24, 32), past_len: int = 256) -> tuple[list, dict]:
    """Measure this machine's forward costs and the head's draft cost; return the best tree."""
    from headstart.decode.contract import DraftState
    from headstart.decode.tree import load_tree

    accuracy = heads.options.get("accuracy")
    if not accuracy:
        raise ValueError("the head has no measured accuracy (options['accuracy']); train it with headstart first")
    costs = forward_cost(target, [n + 1 for n in sizes], past_len)
    state = DraftState(hidden=torch.zeros(1, target.hidden_size, dtype=target.dtype, device=target.device), root=torch.zeros(1, dtype=torch.long))
    tree = load_tree("chain1")
    heads.propose(state, tree)
    start = time.perf_counter()
    for _ in range(5):
        heads.propose(state, tree)
    draft_cost = (time.perf_counter() - start) / 5
    paths, table = best_tree_for_cost(accuracy, costs, draft_cost, max_depth=heads.options.get("num_heads"))
    return paths, {"sizes": table, "plain_step_s": round(costs[1], 5), "draft_s": round(draft_cost, 5)}
