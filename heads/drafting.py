"""EAGLE-2 dynamic-tree drafting with the head's own small KV cache, for the heads that read the
target's features (EAGLE-1/2 and EAGLE-3; their base is heads/feature_head.py).

A feature-autoregressive head reads, at position t, the target's feature f_t and the next token
x_{t+1}, and predicts the feature at t + 1 (hence the token at t + 2). At decode time:
- the positions the target committed since the last call (the prompt, then each accepted path)
  go through the head with their true features; their keys and values stay in the head's cache;
- the output at the last of them gives the first tree layer (tokens after the root);
- each deeper layer feeds the best frontier nodes, with their parent's *predicted* feature, as a
  tree over the cache (`grow_tree`); the tree's entries are dropped from the cache afterwards.
Heads provide `input_features`, `step`, `draft_logits`, `draft_ids`, `dtype` and `device`.
"""

from __future__ import annotations

import math

import torch

from headstart.decode.cache import truncate
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import (
    DynamicTreeSpec,
    frontier_attention,
    grow_tree,
    kept_candidates,
    select_dynamic_tree,
)
from headstart.heads.lean_layer import DraftKV
from headstart.target import float_mask


def block_attention(past: int, width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """`width` new positions after `past` cached ones, causal among themselves: what each may see,
    (width, past + width) bool, and their positions (1, width)."""
    allowed = torch.ones(width, past + width, dtype=torch.bool, device=device)
    allowed[:, past:] = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    return allowed, torch.arange(past, past + width, device=device)[None]


class CachedDrafter:
    """The per-sequence drafting state of one head: its KV cache over the committed positions."""

    def __init__(self, head):
        self.head = head
        self.cache = None

    def committed_cache(self, state: DraftState):
        """The head's cache cut back to the positions committed before `state.start` (new at a sequence's start):
        the head's own kind where it has one (`new_cache`), else transformers' DynamicCache."""
        from transformers import DynamicCache

        if state.start == 0 or self.cache is None:
            self.cache = self.head.new_cache() if hasattr(self.head, "new_cache") else DynamicCache()
        truncate(self.cache, state.start)
        return self.cache

    def mask(self, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The attention mask of `allowed` (Q, K) as the head's step takes it: bool for a head's own
        cache (its lean forward hands it to SDPA as it is), additive for transformers' layers."""
        return allowed if isinstance(self.cache, DraftKV) else float_mask(allowed, dtype)


class FeatureDrafter(CachedDrafter):
    """EAGLE-2 dynamic trees drafted one depth per forward of the head (see the module docstring)."""

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        parents, scores, toks = self._grow(state, spec)
        kept, tree, kept_scores = select_dynamic_tree(
            torch.tensor(parents), torch.tensor(scores), torch.tensor(toks, device=self.head.device), spec.total_tokens
        )
        return Proposal(kept[None], tree, scores=kept_scores.exp()[None])  # scores: path probabilities

    def scored_paths(self, state: DraftState, spec: DynamicTreeSpec, floor: float = 0.0) -> list[tuple[list[int], float]]:
        """What `propose` drafts as (token path from the root, path probability) per node, parents first (its
        scores as `propose` rounds them): what a hybrid's shared budget reads, without the tree's tensors.
        `floor`: a path probability below which the caller uses no path; the paths at or above it are the same
        (`grow_tree`'s floor: the tree is not grown below it, which can save the deeper forwards)."""
        parents, scores, toks = self._grow(state, spec, math.log(floor) if floor > 0 else -math.inf)
        scores = torch.tensor(scores)  # float32, as `propose` ranks them
        kept = kept_candidates(parents, scores.tolist(), spec.total_tokens)
        probs = scores[kept].exp().tolist()
        path: dict[int, list[int]] = {}
        for i in kept:
            path[i] = [*path[parents[i]], toks[i]] if parents[i] >= 0 else [toks[i]]
        return [(path[i], p) for i, p in zip(kept, probs)]

    @torch.no_grad()
    def _grow(self, state: DraftState, spec: DynamicTreeSpec, floor: float = -math.inf) -> tuple[list[int], list[float], list[int]]:
        """The candidates of the step's tree (`grow_tree`, not grown below `floor`): parents, cumulative
        log-probabilities, target ids."""
        head = self.head
        dev, dtype = head.device, head.dtype
        self.committed_cache(state)
        tokens = state.next_tokens().to(dev)  # (1, n) the token after each committed position
        n, past = tokens.shape[1], state.start
        feats = head.input_features(state.features.to(device=dev, dtype=dtype))  # (1, n, D)
        allowed, positions = block_attention(past, n, dev)
        out = head.step(feats, tokens, positions, self.mask(allowed, dtype), self.cache)  # (1, n, D)
        committed = past + n  # cache entries of true features; also the root's position
        h_root = out[0, -1]  # predicts the feature at the root's position
        outputs: dict[int, torch.Tensor] = {}  # candidate -> its output (predicted next feature)
        entry: dict[int, int] = {}  # candidate -> its index in the cache

        def expand(frontier, parents, toks, depths):
            base = self.cache.get_seq_length()
            allowed = frontier_attention(frontier, parents, entry, committed, base, dev)
            hid = torch.stack([outputs[parents[c]] if parents[c] >= 0 else h_root for c in frontier])[None]
            tok = torch.tensor([[toks[c] for c in frontier]], device=dev)
            pos = torch.tensor([[committed - 1 + depths[c] for c in frontier]], device=dev)
            o = head.step(hid, tok, pos, self.mask(allowed, dtype), self.cache)[0]  # (m, D)
            for row, c in enumerate(frontier):
                entry[c], outputs[c] = base + row, o[row]
            return head.draft_logits(o).float().log_softmax(-1)

        root_logp = head.draft_logits(h_root).float().log_softmax(-1)
        parents, scores, toks, _ = grow_tree(root_logp, spec, expand, head.draft_ids, floor)
        truncate(self.cache, committed)
        return parents, scores, toks
