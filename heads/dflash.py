"""DFlash: a block drafter conditioned on the target's features (Chen, Liang and Liu, 2026, "DFlash:
Block Diffusion for Flash Speculative Decoding", arXiv 2602.06036), in the shape vLLM 0.32 serves
(`vllm/model_executor/models/qwen3_dflash.py`, drafted by `vllm/v1/spec_decode/dflash.py`).

The head is N Qwen3-shaped decoder layers (q/k norms, SiLU MLP) that read no feature of their own:
- context: the target's features of the committed positions 0..c (outputs of `target_layer_ids`,
  concatenated) fused by `fc` (F·D -> D) and normed by `hidden_norm`; every layer projects these
  context states with its own k_proj/k_norm/v_proj into keys and values ("KV injection");
- block: S = block_size query slots at positions c + 1 .. c + S: the root x_{c+1} (the token the
  target chose), then S - 1 copies of `mask_token_id`, embedded by the target's embedding. The
  slots attend to the whole context and to one another, non-causally; slot j >= 1 drafts the token
  at its own position, x_{c+1+j}, through `norm` and the target's lm_head.
So one forward of N layers over S slots drafts K = S - 1 tokens, the newly committed positions'
context keys included (they stay in the head's cache; the block's are dropped). The embedding and
lm_head are the target's (frozen, never saved: `TargetParts`), as vLLM shares them; the draft
vocabulary is therefore the target's whole vocabulary. The mask token's embedding is the target's
row of `mask_token_id` (default: the last id of the vocabulary), as vLLM embeds it.

Trees: the K per-position distributions do not depend on the path, so a tree is built as P-EAGLE's
(`parallel_tree`: the top_k tokens of each of the first `depth` positions, the most probable paths
kept); a chain when top_k = 1.

Training (the paper's scheme): per sequence, `train.dflash_blocks` anchors are sampled at random
among the positions t whose first draft x_{t+2} is an answer token (all of them when fewer); each
anchor's block (x_{t+1}, then masks) sees the context 0..t and its own block, and all the blocks of a
sequence run in one forward (`block_attention_mask`). Loss: Σ_i decay^i · (the token loss `train.loss`
against the target's distribution at t + 1 + i) for the draft i of every anchor, over answer tokens;
decay^i is the paper's exp(-i/γ) with decay = exp(-1/γ) (γ = 7 for blocks of 16: decay 0.87).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from headstart.config import DEPTH_WHY, MAX_DEPTH, MAX_TREE, recipe_field
from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.heads.drafting import CachedDrafter
from headstart.heads.feature_head import FeatureHead, Rotary, llama_draft_config
from headstart.heads.losses import CE, LossSettings, Objective, simulated_accept_length, soft_draft_loss
from headstart.heads.options import HeadOptionsError
from headstart.heads.parallel import parallel_tree
from headstart.heads.results import dynamic_tree, set_default_tree


@dataclass
class DFlashOptions:
    """DFlash's recipe options: its `head:` fields and its training field under `train:`."""

    feature_layers: list[int] | None = recipe_field(None, "DFlash: the target decoder layers whose outputs the draft reads, one or more, ascending; None = one per draft layer, spread from layer 1 to n-3", ge=0)
    draft_layers: int | None = recipe_field(None, "DFlash: Qwen3-shaped draft decoder layers; None = 2", ge=1, le=MAX_DEPTH, why="layers run one after the other in every draft")
    block_size: int | None = recipe_field(None, "DFlash: query slots per block, the root then block_size - 1 mask slots, each drafting one token (serve with vLLM num_speculative_tokens = block_size - 1; decode.depth <= block_size - 1); None = 8", ge=2, le=MAX_DEPTH + 1, why=DEPTH_WHY)
    dflash_blocks: int = recipe_field(64, "DFlash: blocks trained per sequence, at anchors drawn at random among its answer positions (all of them when fewer)", ge=1, le=MAX_TREE, why="each block is a query window in the one training forward", section="train")


DEFAULT_BLOCK_SIZE = 8
DEFAULT_DRAFT_LAYERS = 2


def default_target_layers(num_layers: int, count: int) -> list[int]:
    """The paper's target layers: `count` layers spread evenly from layer 1 to layer n - 3 (fewer, distinct,
    on a target too shallow for that span)."""
    start = min(1, num_layers - 1)
    end = max(start, num_layers - 3)
    if count == 1:
        return [(start + end) // 2]
    return sorted({round(start + i * (end - start) / (count - 1)) for i in range(count)})


def check_target_layers(layers: list[int], num_layers: int) -> None:
    """Refuse target layers that vLLM would not feed fc as we do: it captures each listed layer once, in
    the order the layers run, so they must be distinct, ascending and inside the target."""
    ok = bool(layers) and all(isinstance(i, int) and 0 <= i < num_layers for i in layers)
    if not ok or list(layers) != sorted(set(layers)):
        raise HeadOptionsError(
            f"feature_layers={list(layers)}: a DFlash head reads one or more distinct target layers in ascending order, "
            f"in [0, {num_layers}); give e.g. {default_target_layers(num_layers, DEFAULT_DRAFT_LAYERS)}, or leave it unset"
        )


def check_block(block_size: object, draft_layers: object, mask_token_id: object, vocab_size: int) -> None:
    """Refuse a block of fewer than 2 slots, no draft layer, or a mask token outside the vocabulary."""
    for name, value, least in (("block_size", block_size, 2), ("draft_layers", draft_layers, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise HeadOptionsError(f"{name}={value!r}: a DFlash head needs an integer of {least} or more "
                                   f"(head.{name}; block_size counts the root slot and its K = block_size - 1 drafts)")
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int) or not 0 <= mask_token_id < vocab_size:
        raise HeadOptionsError(f"mask_token_id={mask_token_id!r}: the mask token must be a target token id in [0, {vocab_size})")


def check_depth(depth: int, k: int) -> None:
    """Refuse a tree deeper than the K positions one block drafts."""
    if depth > k:
        raise HeadOptionsError(
            f"this DFlash head drafts {k} positions per block, so a tree {depth} deep cannot be filled: decode with "
            f"depth <= {k} (decode.depth), or train a head with head.block_size={depth + 1}"
        )


def dflash_layer_config(target_config, draft_layers: int, rope: dict | None = None):
    """The Qwen3Config of the draft layers, as vLLM's qwen3_dflash builds them for any target: the target's
    widths, heads, head_dim, eps and RoPE (`rope`: the head's own), SiLU, full attention, no biases."""
    from transformers import Qwen3Config

    llama = llama_draft_config(target_config, rope=rope)  # the target's shapes and RoPE, for a one-layer draft
    cfg = Qwen3Config(
        hidden_size=llama.hidden_size, intermediate_size=llama.intermediate_size, num_hidden_layers=draft_layers,
        num_attention_heads=llama.num_attention_heads, num_key_value_heads=llama.num_key_value_heads,
        head_dim=llama.head_dim, rms_norm_eps=llama.rms_norm_eps, max_position_embeddings=llama.max_position_embeddings,
        rope_parameters=dict(llama.rope_parameters), hidden_act="silu", vocab_size=llama.vocab_size,
        attention_bias=False, use_sliding_window=False, layer_types=["full_attention"] * draft_layers,
    )
    cfg._attn_implementation = "sdpa"
    return cfg


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE (NeoX halves, as HF's Qwen3 and vLLM's is_neox_style) on x (B, H, n, hd); cos, sin (B, n, hd)."""
    cos, sin = cos[:, None], sin[:, None]
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def project_kv(attn, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, n, D) states -> keys (k_norm, then RoPE) and values of one layer, (B, Hkv, n, hd) each."""
    b, n, _ = x.shape
    shape = (b, n, -1, attn.head_dim)
    k = attn.k_norm(attn.k_proj(x).view(shape)).transpose(1, 2)
    return rotate(k, cos, sin), attn.v_proj(x).view(shape).transpose(1, 2)


def block_attention_mask(anchors: torch.Tensor, t: int, size: int) -> torch.Tensor:
    """(B, 1, M S, T + M S) bool: the block of anchor anchors[b, m] (S slots) sees the context 0..anchor
    and every slot of its own block, nothing else (the training forward of M blocks at once)."""
    b, m = anchors.shape
    ctx = torch.arange(t, device=anchors.device)[None, None] <= anchors[:, :, None]  # (B, M, T)
    block = torch.arange(m, device=anchors.device).repeat_interleave(size)  # (M S,) block of each slot
    own = (block[:, None] == block[None, :]).expand(b, -1, -1)  # (B, M S, M S)
    return torch.cat([ctx.repeat_interleave(size, dim=1), own], dim=-1)[:, None]


def sample_anchors(loss_mask: torch.Tensor, count: int, generator: torch.Generator | None = None):
    """(anchors (B, M), valid (B, M)): up to `count` anchors per row drawn without replacement among the
    positions t whose first draft x_{t+2} is an answer token; every such t when there are fewer (the
    other M entries are invalid). M = min(count, T)."""
    b, t = loss_mask.shape
    ok = torch.zeros(b, t, dtype=torch.bool, device=loss_mask.device)
    ok[:, : max(t - 2, 0)] = loss_mask[:, 2:].bool()
    score = torch.rand(b, t, generator=generator, device=loss_mask.device) + ok  # valid ones rank first
    anchors = score.topk(min(count, t), dim=1).indices.sort(dim=1).values
    return anchors, ok.gather(1, anchors)


class DFlashHead(FeatureHead):
    """N DFlash draft layers. `options`: hidden_size, vocab_size, draft_vocab_size (None: the whole
    vocabulary), target_layer_ids, draft_layers, block_size, mask_token_id, model_type. Its own dynamic
    tree is `default_tree` (heads/results.py)."""

    kind = "dflash"
    scores_drafts = False  # a block drafted in one forward: no path probabilities
    options_class = DFlashOptions  # its recipe options

    def __init__(self, options: dict, target):
        super().__init__(options, target)
        layers = list(options["target_layer_ids"])
        check_target_layers(layers, target.num_layers)
        check_block(options["block_size"], options["draft_layers"], options["mask_token_id"], options["vocab_size"])
        self.feature_layers = tuple(layers)
        self.block_size = options["block_size"]
        d = options["hidden_size"]
        from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RMSNorm, Qwen3RotaryEmbedding

        cfg = dflash_layer_config(target.config, options["draft_layers"], options.get("rope_parameters"))
        self.draft_config = cfg
        self.fc = nn.Linear(len(layers) * d, d, bias=False)
        self.hidden_norm = Qwen3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(cfg, layer_idx=i) for i in range(options["draft_layers"]))
        self.norm = Qwen3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.rotary = Rotary(Qwen3RotaryEmbedding, cfg)
        self._drafter = self.drafter()

    @classmethod
    def layers_for(cls, target, feature_layers: list[int] | None = None, draft_layers: int | None = None,
                   **options) -> tuple[int, ...]:
        """The target layers a head built with these options reads (default: the paper's spread, one per
        draft layer), checked."""
        count = DEFAULT_DRAFT_LAYERS if draft_layers is None else draft_layers
        layers = list(feature_layers or default_target_layers(target.num_layers, max(int(count), 1)))
        check_target_layers(layers, target.num_layers)
        return tuple(layers)

    @classmethod
    def build(
        cls,
        target,
        draft_vocab: torch.Tensor | None = None,
        feature_layers: list[int] | None = None,
        draft_layers: int | None = None,
        block_size: int | None = None,
        mask_token_id: int | None = None,
        tree: DynamicTreeSpec | dict | None = None,
    ) -> "DFlashHead":
        """A new head: `draft_layers` layers (default 2) drafting block_size - 1 tokens per block (default
        block 8), reading `feature_layers` (default: the paper's spread); mask_token_id default V - 1.
        Its default tree is at most block_size - 1 deep."""
        if draft_vocab is not None:
            raise HeadOptionsError(
                "a DFlash head drafts over the target's whole vocabulary (vLLM's DFlash shares the target's lm_head): "
                "leave head.draft_vocab_size unset"
            )
        size = DEFAULT_BLOCK_SIZE if block_size is None else block_size
        n = DEFAULT_DRAFT_LAYERS if draft_layers is None else draft_layers
        mask = target.vocab_size - 1 if mask_token_id is None else mask_token_id
        check_block(size, n, mask, target.vocab_size)
        tree = dynamic_tree(tree or DynamicTreeSpec(depth=min(DynamicTreeSpec().depth, size - 1)))
        check_depth(tree.depth, size - 1)
        options = {
            "hidden_size": target.hidden_size,
            "vocab_size": target.vocab_size,
            "draft_vocab_size": None,
            "target_layer_ids": list(cls.layers_for(target, feature_layers, n)),
            "draft_layers": n,
            "block_size": size,
            "mask_token_id": mask,
            "model_type": target.config.model_type,
        }
        head = cls(options, target)
        head.target_info = target.describe()
        set_default_tree(head, tree)
        return head.to(target.device)

    @property
    def draft_ids(self) -> torch.Tensor:
        """(V,) the target id of each draft id: the identity (the whole vocabulary)."""
        return torch.arange(self.options["vocab_size"], device=self.device)

    # ---- the layers ----
    def context_kv(self, features: torch.Tensor, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Target features (B, n, F·D) at positions (B, n) -> each layer's context keys and values
        (B, Hkv, n, hd), from hidden_norm(fc(features)) (vLLM's precompute_and_store_context_kv)."""
        ctx = self.hidden_norm(self.fc(features.to(self.dtype)))  # (B, n, D)
        cos, sin = self.rotary(ctx, positions)
        return [project_kv(layer.self_attn, ctx, cos, sin) for layer in self.layers]

    def blocks(self, tokens: torch.Tensor, positions: torch.Tensor, context: list, allowed: torch.Tensor | None) -> torch.Tensor:
        """Query slots tokens (B, Q) at positions (B, Q) through the layers, attending to each layer's context
        keys and values and to the slots `allowed` lets them (bool (B, 1, Q, n + Q); None: all) -> (B, Q, D)."""
        x = self.target_parts.embed_tokens(tokens).to(self.dtype)
        cos, sin = self.rotary(x, positions)
        for layer, (ctx_k, ctx_v) in zip(self.layers, context):
            attn, h = layer.self_attn, layer.input_layernorm(x)
            b, q, _ = h.shape
            query = rotate(attn.q_norm(attn.q_proj(h).view(b, q, -1, attn.head_dim)).transpose(1, 2), cos, sin)
            k, v = project_kv(attn, h, cos, sin)
            out = F.scaled_dot_product_attention(query, torch.cat([ctx_k, k], dim=2), torch.cat([ctx_v, v], dim=2),
                                                 attn_mask=allowed, enable_gqa=True)  # (B, H, Q, hd)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(b, q, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return x

    def draft_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., D) outputs -> (..., V) logits: `norm`, then the target's lm_head (no softcapping, as vLLM)."""
        lm_head = self.target_parts.lm_head
        return lm_head(self.norm(h.to(self.dtype)).to(lm_head.weight.dtype))

    # ---- training ----
    def training_loss(self, out, batch: dict, target, options: DFlashOptions,
                      shared: LossSettings = LossSettings()) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss of `options.dflash_blocks` random blocks per sequence; held-out measurement (eval mode)
        draws the same anchors every time."""
        feats = torch.cat([out.features[i] for i in self.feature_layers], dim=-1)
        target_logits = self.target_logits(out.hidden)  # (B, T, V) the target's own
        generator = None
        if not self.training:
            generator = torch.Generator(device=batch["loss_mask"].device).manual_seed(0)
        anchors, valid = sample_anchors(batch["loss_mask"], options.dflash_blocks, generator)
        return dflash_loss(self, feats, target_logits, batch["input_ids"], batch["loss_mask"], anchors, valid,
                           shared.decay, shared.objective)

    def train_blocks(self, features: torch.Tensor, input_ids: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """The blocks of `anchors` (B, M) in one forward: features (B, T, F·D) -> outputs (B, M, S, D), slot j of
        anchor t at position t + 1 + j (slot 0 reads x_{t+1}, the others the mask token)."""
        b, t = input_ids.shape
        size, dev = self.block_size, input_ids.device
        context = self.context_kv(features, torch.arange(t, device=dev)[None].expand(b, -1))
        root = input_ids.gather(1, (anchors + 1).clamp(max=t - 1))  # (B, M) x_{t+1}
        tokens = torch.cat([root[..., None], root.new_full((b, anchors.shape[1], size - 1), self.options["mask_token_id"])], -1)
        positions = anchors[..., None] + 1 + torch.arange(size, device=dev)  # (B, M, S)
        out = self.blocks(tokens.flatten(1), positions.flatten(1), context, block_attention_mask(anchors, t, size))
        return out.view(b, anchors.shape[1], size, -1)

    # ---- drafting ----
    def drafter(self) -> "DFlashDrafter":
        """A fresh drafting state for one sequence (its cache of context keys and values)."""
        return DFlashDrafter(self)


def dflash_loss(
    head: DFlashHead,
    features: torch.Tensor,
    target_logits: torch.Tensor,
    input_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    anchors: torch.Tensor,
    valid: torch.Tensor,
    decay: float = 0.8,
    objective: Objective = CE,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Σ_i decay^i · loss of draft i over the `valid` anchors (B, M); features (B, T, F·D), target_logits
    (B, T, V). Draft i of anchor t is slot i + 1, predicting x_{t+2+i}; it counts where that token exists
    and is an answer token. Metrics step{i}_top1 / _ce / _accept and sim_accept_length."""
    b, t = input_ids.shape
    out = head.train_blocks(features, input_ids, anchors)  # (B, M, S, D)
    total = out.new_zeros((), dtype=torch.float32)
    metrics: dict[str, float] = {}
    rows = torch.arange(b, device=input_ids.device)[:, None].expand_as(anchors)
    for i in range(head.block_size - 1):
        label = anchors + 2 + i  # (B, M) the position draft i predicts
        counted = valid & (label < t) & loss_mask.gather(1, label.clamp(max=t - 1)).bool()
        if not counted.any():
            continue
        logq = head.draft_logits(out[:, :, i + 1][counted]).float().log_softmax(-1)  # (R, V)
        with torch.no_grad():
            p = target_logits[rows[counted], label[counted] - 1].float().softmax(-1)
        term = soft_draft_loss(logq, p, objective)
        total = total + (decay**i) * term.loss
        with torch.no_grad():
            metrics[f"step{i}_top1"] = (logq.argmax(-1) == input_ids[rows[counted], label[counted]]).float().mean().item()
        metrics[f"step{i}_ce"] = term.ce.item()
        metrics[f"step{i}_accept"] = term.accept.item()
    metrics["sim_accept_length"] = simulated_accept_length(
        [metrics[f"step{i}_top1"] for i in range(head.block_size - 1) if f"step{i}_top1" in metrics])
    return total, metrics


class DFlashDrafter(CachedDrafter):
    """One sequence's DFlash drafting: the committed positions' context keys and values in the cache, then
    one block forward (root + K masks, all visible to one another) drafts K positions."""

    @torch.no_grad()
    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        head = self.head
        size, dev = head.block_size, head.device
        check_depth(spec.depth, size - 1)
        cache = self.committed_cache(state)
        past, n = state.start, state.committed.shape[1]
        new = head.context_kv(state.features.to(dev), torch.arange(past, past + n, device=dev)[None])
        context = [cache.update(k, v, i) for i, (k, v) in enumerate(new)]  # (1, Hkv, past + n, hd) each
        root = state.root.to(dev)[:, None]  # (1, 1) x_{c+1}
        tokens = torch.cat([root, root.new_full((1, size - 1), head.options["mask_token_id"])], dim=1)
        positions = torch.arange(past + n, past + n + size, device=dev)[None]
        out = head.blocks(tokens, positions, context, None)  # (1, S, D)
        logp = head.draft_logits(out[0, 1:]).float().log_softmax(-1)  # (K, V) drafts 1..K
        nodes, tree = parallel_tree(logp, spec, head.draft_ids)
        return Proposal(nodes[None], tree)
