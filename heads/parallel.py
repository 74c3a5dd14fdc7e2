"""P-EAGLE: parallel drafting with an EAGLE-3 head (arXiv 2602.01469), as vLLM 0.32 serves it.

An EAGLE-3 head built with `parallel_drafting=True` drafts K tokens in ONE forward of its layer.
After the last committed position c (whose true fused feature f_c is known and whose next token,
the root x_{c+1}, the target chose), the forward reads K query slots:

    slot 0      (feature fc(f_c),         token x_{c+1}),    position c      -> draft 1 (x_{c+2})
    slot j ≥ 1  (feature fc(mask_hidden), token ptd_token_id), position c + j -> draft j + 1

`mask_hidden` is one learned vector of fc's input width (3D) that enters *before* fc, and
`ptd_token_id` is a placeholder token whose embedding is the target's (frozen). Attention is
causal: slot j sees the committed positions, slot 0 and the slots before it. Each slot's own
output gives its draft; none reads another draft's token, so all K come from one forward. The
committed positions since the previous call go through the same forward (their keys and values
stay in the head's cache; the placeholder slots' are dropped afterwards), so a chain of K costs
one draft forward, prefill of the newly committed positions included. This is vLLM's drafting:
`vllm/v1/spec_decode/utils.py` `copy_and_expand_eagle_inputs_kernel` (tokens, positions, masked
slots), `vllm/v1/spec_decode/llm_base_proposer.py` (`_init_parallel_drafting_params`,
`set_inputs_first_pass`: masked slots' hidden state = `combine_hidden_states(mask_hidden)`, i.e.
fc; one forward, K sampled rows) and `vllm/model_executor/models/llama_eagle3.py` (`mask_hidden`).

Trees: the K per-position distributions do not depend on the path, so the candidates of a step
are the top_k tokens of each of the first `depth` positions; the tree keeps the `total_tokens`
paths of highest probability (the product of their per-position probabilities: `best_tree_paths`
over this step's draft probabilities), a chain when top_k = 1. It is verified like any tree.

Training builds the blocks of every anchor of a sequence in one forward (`block_mask`): the T
true slots (feature f_t, token x_{t+1}, position t), then for each depth j = 1..K-1 one placeholder
slot per anchor t (position t + j) that sees the true slots 0..t and its own anchor's placeholder
slots 1..j, which is what drafting after t computes (tested). Loss: Σ_j decay^j · (the token loss
`train.loss`, heads/losses.py, against the target's distribution at t + 1 + j) over assistant
tokens x_{t+2+j}, every anchor t of the sequence counted. Where this may differ from the paper,
which was not available here: one draft layer (the served EAGLE-3 shape), every anchor of every
sequence trained at once (no sampling of anchors or sequence partitioning), position weights
decay^j as EAGLE-3's training-time test uses, and the placeholder token's embedding frozen.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from headstart.decode.cache import truncate
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.tree import Tree, best_tree_paths, tree_from_paths
from headstart.heads.drafting import CachedDrafter, block_attention
from headstart.heads.losses import CE, Objective, simulated_accept_length
from headstart.heads.options import HeadOptionsError
from headstart.target import float_mask

DEFAULT_PARALLEL_TOKENS = 4
DEFAULT_PTD_TOKEN_ID = 0  # any id works: the learned mask_hidden marks the slot


def parallel_options(
    vocab_size: int, parallel_drafting: bool, parallel_tokens: int | None, ptd_token_id: int | None
) -> dict:
    """The head options that turn parallel drafting on (empty when it is off), checked."""
    if not parallel_drafting:
        given = [name for name, value in (("parallel_tokens", parallel_tokens), ("ptd_token_id", ptd_token_id))
                 if value is not None]
        if given:
            raise HeadOptionsError(
                f"{', '.join(given)} set on a head without parallel drafting; pass parallel_drafting=True "
                f"(head.parallel_drafting: true) or leave them unset"
            )
        return {}
    options = {
        "parallel_drafting": True,
        "parallel_tokens": DEFAULT_PARALLEL_TOKENS if parallel_tokens is None else parallel_tokens,
        "ptd_token_id": DEFAULT_PTD_TOKEN_ID if ptd_token_id is None else ptd_token_id,
    }
    parallel_tokens_of({**options, "vocab_size": vocab_size})
    return options


def parallel_tokens_of(options: dict) -> int | None:
    """K of a head's options (None without parallel drafting), after checking K and the placeholder token."""
    if not options.get("parallel_drafting"):
        return None
    k, ptd, v = options.get("parallel_tokens"), options.get("ptd_token_id"), options["vocab_size"]
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise HeadOptionsError(
            f"parallel_tokens={k!r}: a parallel-drafting head drafts K >= 2 positions in one forward (the last "
            f"accepted token and K - 1 placeholders); give an integer of 2 or more, e.g. {DEFAULT_PARALLEL_TOKENS}"
        )
    if isinstance(ptd, bool) or not isinstance(ptd, int) or not 0 <= ptd < v:
        raise HeadOptionsError(f"ptd_token_id={ptd!r}: the placeholder token must be a target token id in [0, {v})")
    return k


def check_depth(depth: int, k: int) -> None:
    """Refuse a tree deeper than the K positions one forward drafts."""
    if depth > k:
        raise HeadOptionsError(
            f"this parallel-drafting EAGLE-3 head drafts {k} positions per forward, so a tree {depth} deep cannot be "
            f"filled: decode with depth <= {k} (decode.depth), or train a head with head.parallel_tokens={depth}"
        )


def init_mask_hidden(width: int) -> nn.Parameter:
    """(3D,) the placeholder slots' feature before fc; small random values (HF's initializer range)."""
    return nn.Parameter(torch.randn(width) * 0.02)


def mask_feature(head) -> torch.Tensor:
    """(D,) the placeholder slots' fused feature: fc(mask_hidden), as vLLM's combine_hidden_states."""
    return head.input_features(head.mask_hidden[None, None])[0, 0]


def block_mask(t: int, k: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(1, 1, K T, K T) additive mask of the training forward over T anchors and K - 1 placeholder depths.

    Slots are the T true ones (anchor order), then T placeholders of depth 1, ..., T of depth K - 1.
    A true slot t sees true slots 0..t; a placeholder (t, j) sees true slots 0..t and the placeholders
    (t, 1..j) of its own anchor.
    """
    causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
    eye = torch.eye(t, dtype=torch.bool, device=device)
    none = torch.zeros(t, t, dtype=torch.bool, device=device)
    rows = [torch.cat([causal] + [eye] * j + [none] * (k - 1 - j), dim=1) for j in range(k)]
    return float_mask(torch.cat(rows, dim=0), dtype)


def parallel_loss(
    head,
    features: torch.Tensor,
    target_logits: torch.Tensor,
    input_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    decay: float = 0.8,
    objective: Objective = CE,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Σ_j decay^j · loss of position j over every anchor, from one forward; features (B, T, 3D),
    target_logits (B, T, N). Position j of anchor t predicts x_{t+2+j}; metrics step{j}_top1 etc.
    `weights` (B, T): each token's loss weight (complementary training, heads/complement.py)."""
    b, t = input_ids.shape
    k, dev = head.parallel_tokens, input_ids.device
    m = (k - 1) * t  # placeholder slots
    hidden = torch.cat([head.input_features(features), mask_feature(head).expand(b, m, -1)], dim=1)  # (B, K T, D)
    nxt = F.pad(input_ids[:, 1:], (0, 1))  # (B, T) x_{t+1}, padded at the end
    tokens = torch.cat([nxt, nxt.new_full((b, m), head.options["ptd_token_id"])], dim=1)  # (B, K T)
    base = torch.arange(t, device=dev)
    positions = torch.cat([base + j for j in range(k)])[None].expand(b, -1)  # (B, K T)
    out = head.step(hidden, tokens, positions, block_mask(t, k, head.dtype, dev))  # (B, K T, D)
    out = out.view(b, k, t, -1)
    total = out.new_zeros((), dtype=torch.float32)
    metrics: dict[str, float] = {}
    for j in range(min(k, t - 2)):
        term = head.depth_loss(out[:, j], j, target_logits, input_ids, loss_mask, objective, metrics, weights)
        if term is not None:
            total = total + (decay**j) * term
    metrics["sim_accept_length"] = simulated_accept_length([metrics[f"step{j}_top1"] for j in range(k) if f"step{j}_top1" in metrics])
    return total, metrics


def parallel_tree(logp: torch.Tensor, spec: DynamicTreeSpec, token_ids: torch.Tensor) -> tuple[torch.Tensor, Tree]:
    """The tree of one step from per-position log-probabilities logp (K, N): the top_k tokens of each of
    the first `depth` positions, the `total_tokens` most probable paths kept. Returns the nodes' target
    ids (n,) in the tree's order and the Tree. token_ids (N,): target id of each draft id."""
    top = logp[: spec.depth].float().topk(min(spec.top_k, logp.shape[-1]), dim=-1)  # (depth, k)
    tree = tree_from_paths(best_tree_paths(top.values.exp().tolist(), spec.total_tokens))
    rank = torch.tensor([[len(p) - 1, p[-1]] for p in tree.paths], device=top.indices.device)  # (n, 2)
    return token_ids[top.indices[rank[:, 0], rank[:, 1]]], tree


class ParallelDrafter(CachedDrafter):
    """A parallel head's drafting: all K positions in one forward over its cache of committed positions."""

    @torch.no_grad()
    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        head = self.head
        k, dev, dtype = head.parallel_tokens, head.device, head.dtype
        check_depth(spec.depth, k)
        self.committed_cache(state)
        past, n = state.start, state.committed.shape[1]
        feats = head.input_features(state.features.to(device=dev, dtype=dtype))  # (1, n, D)
        hidden = torch.cat([feats, mask_feature(head).expand(1, k - 1, -1)], dim=1)  # (1, n + K - 1, D)
        tokens = state.next_tokens().to(dev)  # (1, n) the token after each committed position, the root last
        tokens = torch.cat([tokens, tokens.new_full((1, k - 1), head.options["ptd_token_id"])], dim=1)
        allowed, positions = block_attention(past, n + k - 1, dev)
        out = head.step(hidden, tokens, positions, self.mask(allowed, dtype), self.cache)  # (1, n + K - 1, D)
        truncate(self.cache, past + n)  # keep the committed positions only
        logp = head.draft_logits(out[0, n - 1 :]).float().log_softmax(-1)  # (K, N) drafts 1..K
        nodes, tree = parallel_tree(logp, spec, head.draft_ids)
        return Proposal(nodes[None], tree)
