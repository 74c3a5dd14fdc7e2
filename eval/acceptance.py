"""Acceptance statistics from the per-step accepted-draft counts: pure functions, hand-checkable.

One verification step accepts `a` drafts (0 ≤ a ≤ depth) and adds the target's own bonus token,
so it writes a + 1 tokens. The conventions, and how they map onto the serving engines:

- τ (acceptance length) = mean of (a + 1) over steps: tokens per target forward after prefill,
  bonus counted, so plain decoding scores 1.00. It is vLLM's "mean acceptance length"
  (1 + num_accepted_tokens / num_drafts) and SGLang's average accept length.
- Tree sizes are reported without the root. SGLang's `speculative_num_draft_tokens` counts the
  root (our N nodes = SGLang's N + 1); vLLM's `num_speculative_tokens` does not (= our N for a chain).
- `draft_token_acceptance` = accepted drafts / drafted nodes: vLLM's "acceptance rate". For a
  tree it is small by construction (only one path can be accepted), so compare it only between
  equal trees; τ and the per-depth rates are what to compare across trees.
"""

from __future__ import annotations

from collections import Counter

from headstart.decode.verify import acceptance_length


def acceptance_stats(accepted_per_step: list[int], depth: int, drafted_nodes: int | None = None) -> dict:
    """τ, acceptance per depth (≥ d drafts accepted), conditional rates and the histogram.

    accepted_per_step: drafts accepted at each verification; depth: the deepest draft the tree
    holds (the histogram has depth + 1 bins, index = accepted drafts); drafted_nodes: draft nodes
    verified over all steps (for vLLM's per-token acceptance rate; None leaves it out).
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    deepest = max(accepted_per_step, default=0)
    if deepest > depth or min(accepted_per_step, default=0) < 0:
        raise ValueError(f"accepted counts must lie in 0..{depth} (the tree's depth), got {deepest}")
    steps = len(accepted_per_step)
    hist = Counter(accepted_per_step)
    at_least = [sum(v for a, v in hist.items() if a >= d) for d in range(depth + 1)]  # at_least[0] = steps
    per_depth = [at_least[d] / steps if steps else 0.0 for d in range(1, depth + 1)]
    conditional = [at_least[d] / at_least[d - 1] if at_least[d - 1] else None for d in range(1, depth + 1)]
    accepted = sum(accepted_per_step)
    return {
        "steps": steps,
        "accepted_drafts": accepted,
        "tau": acceptance_length(accepted_per_step),
        "acceptance_per_depth": per_depth,
        "conditional_acceptance": conditional,
        "accepted_histogram": [hist.get(a, 0) for a in range(depth + 1)],
        "draft_token_acceptance": accepted / drafted_nodes if drafted_nodes else None,
    }


def free_drafter_bound(tau: float, relative_cost: dict[int, float], verify_tokens: int) -> dict:
    """The speedup a drafter that costs nothing would give: τ / cost(verify_tokens) relative to 1.

    relative_cost: the target's forward cost over n new tokens divided by its cost over one (as
    measured by `headstart.decode.tune.forward_cost`); verify_tokens: tree nodes + 1 (the root).
    Uses the nearest measured n at or above verify_tokens (a conservative bound).
    """
    sizes = sorted(n for n in relative_cost if n >= verify_tokens)
    n = sizes[0] if sizes else max(relative_cost)
    cost = relative_cost[n]
    return {"verify_tokens": verify_tokens, "measured_at": n, "verify_cost": cost, "free_drafter_speedup": tau / cost}


def interpolated_cost(relative_cost: dict[int, float], n: int) -> float:
    """The forward cost over n tokens, linear between the nearest measured sizes (flat past the ends)."""
    sizes = sorted(relative_cost)
    if n <= sizes[0]:
        return relative_cost[sizes[0]]
    if n >= sizes[-1]:
        return relative_cost[sizes[-1]]
    hi = next(s for s in sizes if s >= n)
    lo = max(s for s in sizes if s <= n)
    if hi == lo:
        return relative_cost[lo]
    return relative_cost[lo] + (relative_cost[hi] - relative_cost[lo]) * (n - lo) / (hi - lo)


def varying_drafter_bound(tau: float, relative_cost: dict[int, float], verified: list[int]) -> dict:
    """The free-drafter bound of a method whose verifications feed different numbers of tokens (a
    lookup chain or branch: `verified` holds each step's tree nodes + 1): τ over the mean cost of the
    forwards it ran, each priced on the measured cost curve (`interpolated_cost`). Equals
    `free_drafter_bound` when every step feeds the same measured size."""
    mean_cost = sum(interpolated_cost(relative_cost, n) for n in verified) / len(verified)
    return {
        "verify_tokens": max(verified), "mean_verify_tokens": sum(verified) / len(verified),
        "measured_at": "each step, interpolated", "verify_cost": mean_cost, "free_drafter_speedup": tau / mean_cost,
    }


def round_floats(value, digits: int = 4):
    """Round every float in nested lists and dicts (for stable, readable JSON)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v, digits) for v in value]
    return value
