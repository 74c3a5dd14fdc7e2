"""EAGLE-3 heads (Li et al., 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language
Models via Training-Time Test").

Features come from three target layers (low, middle, high; `feature_layers` are ids of decoder
layers whose *output* is read), fused by `fc` (3D -> D, no bias). The draft layer is Llama-shaped,
as SGLang, vLLM and TensorRT-LLM serve EAGLE-3 drafts whatever the target (`LlamaForCausalLMEagle3`):
its attention reads concat(input_norm(embed(x_{t+1})), hidden_norm(h_t)) (2D wide), its residual
stream is h_t; `norm` then its own lm_head over a draft vocabulary of N frequent tokens, with
`d2t` (target id = draft id + d2t[draft id]) and `t2d` (bool over the target vocabulary).

Training-time test: the head is unrolled on its own outputs for `ttt_steps` steps. Step i at
index t stands for the depth-i draft after the last true position t: it reads its step-(i-1)
output and the token x_{t+1+i} at position t + i, and attends to the step-0 entries 0..t and to
its own earlier-step entries at index t (`ttt_mask`). Loss Σ_i decay^i · CE(target distribution
at t + 1 + i over the draft vocabulary, draft distribution), over assistant tokens.

Parallel drafting (P-EAGLE, `parallel_drafting=True`): the same layer plus a learned `mask_hidden`
drafts K tokens in one forward and trains on all anchors at once; see heads/parallel.py.

Three normalisations vLLM's EAGLE-3 layer reads from a draft's config (vllm/model_executor/models/
llama_eagle3.py), all off in headstart's own heads and on by default in vLLM's speculators trainer
(0.9), are options of the head (`NORMS`), so that drafts trained with them import and decode as vLLM
serves them: `norm_before_fc` (an RMSNorm `input_norm` over the 3D features before fc),
`norm_before_residual` (hidden_norm(h_t) is the residual stream too, not only the attention's input)
and `norm_output` (each step passes on its normed output; the lm_head then reads it as it is).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from headstart.config import DEPTH_WHY, MAX_DEPTH, recipe_field
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.heads.drafting import FeatureDrafter
from headstart.heads.feature_head import FeatureHead, Rotary, llama_draft_config
from headstart.heads.lean_layer import DraftKV, LeanDraftLayer
from headstart.heads.losses import CE, LossSettings, Objective, simulated_accept_length, soft_draft_loss
from headstart.heads.options import check_feature_layers
from headstart.heads.parallel import (
    ParallelDrafter,
    check_depth,
    init_mask_hidden,
    parallel_loss,
    parallel_options,
    parallel_tokens_of,
)
from headstart.heads.results import dynamic_tree, set_default_tree
from headstart.heads.vocab import (
    d2t_from_ids,
    draft_size,
    draft_vocab_size,
    ids_from_d2t,
    index_in_draft_vocab,
    t2d_from_ids,
)
from headstart.target import WeightRows, float_mask


@dataclass
class Eagle3Options:
    """EAGLE-3's recipe options: its `head:` fields (P-EAGLE's parallel drafting among them) and its training
    field under `train:`."""

    feature_layers: list[int] | None = recipe_field(None, "EAGLE-3: the three target decoder layers whose outputs are fused (low, middle, high); None = SGLang/vLLM's default, outputs of layers 1, n/2-1, n-4.", ge=0)
    parallel_drafting: bool = recipe_field(False, "EAGLE-3: P-EAGLE parallel drafting: one draft forward proposes parallel_tokens tokens (the last accepted token, then placeholder positions read a learned mask_hidden feature); vLLM serves it as eagle3 with parallel_drafting: true")
    parallel_tokens: int | None = recipe_field(None, "EAGLE-3 with parallel_drafting: K, the positions trained and drafted in one forward (serve with vLLM num_speculative_tokens <= K; decode.depth <= K); None = 4", ge=2, le=MAX_DEPTH, why=DEPTH_WHY)
    ttt_steps: int = recipe_field(7, "EAGLE-3: training-time-test steps (the draft unrolled on its own outputs)", ge=1, le=MAX_DEPTH, why="the draft is unrolled this many times in every training step", section="train")


#: the normalisation options of the draft layer (module doc), each off unless the head's options turn it on
NORMS = ("norm_before_fc", "norm_before_residual", "norm_output")


def ttt_mask(t: int, step: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(1, 1, T, (step + 1) T) additive mask of training-time-test step `step` (0-based).

    Keys are the step-0 entries (causal: query t sees 0..t) followed by the entries of steps
    1..step, of which query t sees only its own index t (the path it drafted itself).
    """
    eye = torch.eye(t, dtype=torch.bool, device=device)
    causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
    return float_mask(torch.cat([causal] + [eye] * step, dim=1), dtype)


class Eagle3Head(FeatureHead):
    """One EAGLE-3 draft layer. `options`: hidden_size, vocab_size, draft_vocab_size, feature_layers,
    model_type; with parallel drafting also parallel_drafting, parallel_tokens (K), ptd_token_id; any of
    `NORMS` set true where the draft uses it. Its own dynamic tree is `default_tree` (heads/results.py)."""

    kind = "eagle3"
    options_class = Eagle3Options  # its recipe options

    def __init__(self, options: dict, target):
        super().__init__(options, target)
        layers = list(options["feature_layers"])
        check_feature_layers(layers, target.num_layers)
        self.feature_layers = tuple(layers)
        d, v = options["hidden_size"], options["vocab_size"]
        n = draft_size(options)
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

        cfg = llama_draft_config(target.config, rope=options.get("rope_parameters"))
        self.draft_config = cfg
        self.fc = nn.Linear(3 * d, d, bias=False)
        self.midlayer = LlamaDecoderLayer(cfg, layer_idx=0)
        attn, width = self.midlayer.self_attn, 2 * d
        attn.q_proj = nn.Linear(width, attn.q_proj.out_features, bias=False)
        attn.k_proj = nn.Linear(width, attn.k_proj.out_features, bias=False)
        attn.v_proj = nn.Linear(width, attn.v_proj.out_features, bias=False)
        self.midlayer.hidden_norm = LlamaRMSNorm(d, eps=cfg.rms_norm_eps)
        self.norm = LlamaRMSNorm(d, eps=cfg.rms_norm_eps)
        self.norms = {name: bool(options.get(name, False)) for name in NORMS}
        if self.norms["norm_before_fc"]:
            self.input_norm = LlamaRMSNorm(3 * d, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(d, n, bias=False)
        self.rotary = Rotary(LlamaRotaryEmbedding, cfg)
        self.register_buffer("d2t", torch.zeros(n, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(v, dtype=torch.bool) if n == v else torch.zeros(v, dtype=torch.bool))
        self.parallel_tokens = parallel_tokens_of(self.options)  # K, None without parallel drafting
        if self.parallel_tokens:
            self.mask_hidden = init_mask_hidden(3 * d)  # (3D,) the placeholder slots' feature before fc
        self._lean = LeanDraftLayer(self)
        self._drafter = self.drafter()

    @classmethod
    def layers_for(cls, target, feature_layers: list[int] | None = None, **options) -> tuple[int, ...]:
        """The three target layers a head built with `feature_layers` reads (default: the target's
        low, middle and high layers), checked."""
        layers = list(feature_layers or target.default_feature_layers())
        check_feature_layers(layers, target.num_layers)
        return tuple(layers)

    @classmethod
    def build(
        cls,
        target,
        draft_vocab: torch.Tensor | None = None,
        feature_layers: list[int] | None = None,
        tree: DynamicTreeSpec | dict | None = None,
        parallel_drafting: bool = False,
        parallel_tokens: int | None = None,
        ptd_token_id: int | None = None,
    ) -> "Eagle3Head":
        """A new head; draft_vocab: the target ids it ranks (sorted here), default the whole vocabulary.
        parallel_drafting: P-EAGLE (heads/parallel.py), K = parallel_tokens positions per forward
        (default 4), placeholder token ptd_token_id (default 0); its default tree is at most K deep."""
        parallel = parallel_options(target.vocab_size, parallel_drafting, parallel_tokens, ptd_token_id)
        if parallel and tree is None:
            tree = DynamicTreeSpec(depth=min(DynamicTreeSpec().depth, parallel["parallel_tokens"]))
        tree = dynamic_tree(tree)
        options = {
            "hidden_size": target.hidden_size,
            "vocab_size": target.vocab_size,
            "draft_vocab_size": draft_vocab_size(target, draft_vocab),
            "feature_layers": list(cls.layers_for(target, feature_layers)),
            "model_type": target.config.model_type,
            **parallel,
        }
        if parallel:
            check_depth(tree.depth, parallel["parallel_tokens"])
        head = cls(options, target)
        ids = torch.arange(target.vocab_size) if draft_vocab is None else draft_vocab.cpu().sort().values
        head.d2t.copy_(d2t_from_ids(ids))
        head.t2d.copy_(t2d_from_ids(ids, target.vocab_size))
        with torch.no_grad():  # start from the target's own output rows: a strong init
            head.lm_head.weight.copy_(WeightRows()(target.lm_head.weight, ids).float())
        head.target_info = target.describe()
        set_default_tree(head, tree)
        return head.to(target.device)

    @property
    def draft_ids(self) -> torch.Tensor:
        """(N,) the target id of each draft id: draft id + d2t."""
        return ids_from_d2t(self.d2t)

    def draft_index(self, ids: torch.Tensor) -> torch.Tensor:
        """Target ids -> draft ids, -1 outside the draft vocabulary."""
        return index_in_draft_vocab(self.draft_ids, self.options["vocab_size"], ids)

    # ---- the layer ----
    def input_features(self, features: torch.Tensor) -> torch.Tensor:
        """(B, n, 3D) concatenated target layers -> (B, n, D)."""
        features = features.to(self.dtype)
        return self.fc(self.input_norm(features) if self.norms["norm_before_fc"] else features)

    def step(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, mask, cache=None) -> torch.Tensor:
        """hidden (B, n, D) fused features or previous outputs, next tokens (B, n) -> outputs (B, n, D).
        Drafting (no gradients, the head's own `new_cache()`) takes the lean forward of heads/lean_layer.py."""
        if isinstance(cache, DraftKV) and not torch.is_grad_enabled():
            return self._lean.step(hidden, tokens, positions, mask, cache)
        layer = self.midlayer
        hidden = hidden.to(self.dtype)
        embed = layer.input_layernorm(self.target_parts.embed_tokens(tokens).to(self.dtype))
        normed = layer.hidden_norm(hidden)
        if self.norms["norm_before_residual"]:
            hidden = normed  # the residual stream starts from the normed features too
        x = torch.cat([embed, normed], dim=-1)  # (B, n, 2D)
        pe = self.rotary(x, positions)
        attn, _ = layer.self_attn(hidden_states=x, position_embeddings=pe, attention_mask=mask, cache=cache)
        hidden = hidden + attn
        out = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.norm(out) if self.norms["norm_output"] else out

    def draft_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., D) outputs -> (..., N) logits over the draft vocabulary (outputs of a `norm_output` head
        are normed already)."""
        h = h.to(self.dtype)
        return self.lm_head(h if self.norms["norm_output"] else self.norm(h))

    @staticmethod
    def new_cache() -> DraftKV:
        """The drafting cache `step` takes its lean forward with."""
        return DraftKV()

    # ---- training ----
    def training_loss(self, out, batch: dict, target, options: Eagle3Options,
                      shared: LossSettings = LossSettings()) -> tuple[torch.Tensor, dict[str, float]]:
        feats = torch.cat([out.features[i] for i in self.feature_layers], dim=-1)
        target_logits = self.target_logits(out.hidden)  # (B, T, N) the target's own, over the draft vocabulary
        if self.parallel_tokens:
            return parallel_loss(self, feats, target_logits, batch["input_ids"], batch["loss_mask"], shared.decay,
                                 shared.objective, batch.get("draft_weight"))
        return self.loss(feats, target_logits, batch["input_ids"], batch["loss_mask"], options.ttt_steps, shared.decay,
                         shared.objective, batch.get("draft_weight"))

    def loss(
        self,
        features: torch.Tensor,
        target_logits: torch.Tensor,
        input_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        ttt_steps: int = 7,
        decay: float = 0.8,
        objective: Objective = CE,
        weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Training-time test over `ttt_steps` steps; features (B, T, 3D), target_logits (B, T, N).

        Step i at index t predicts x_{t+2+i}; it counts where that token exists and is an
        assistant token. Accuracy: the draft's top-1 (as a target id) equals the data's token.
        `weights` (B, T): each token's loss weight wherever it is predicted (complementary training).
        """
        from transformers import DynamicCache

        b, t = input_ids.shape
        dev = input_ids.device
        cache = DynamicCache()
        hidden = self.input_features(features)  # (B, T, D)
        total = hidden.new_zeros((), dtype=torch.float32)
        metrics: dict[str, float] = {}
        base = torch.arange(t, device=dev)[None].expand(b, t)
        for i in range(ttt_steps):
            if t < i + 3:
                break
            nxt = F.pad(input_ids[:, 1 + i :], (0, 1 + i))  # (B, T) x_{t+1+i}, padded at the end
            hidden = self.step(hidden, nxt, base + i, ttt_mask(t, i, self.dtype, dev), cache)
            term = self.depth_loss(hidden, i, target_logits, input_ids, loss_mask, objective, metrics, weights)
            if term is not None:
                total = total + (decay**i) * term
        metrics["sim_accept_length"] = simulated_accept_length([metrics[f"step{i}_top1"] for i in range(ttt_steps) if f"step{i}_top1" in metrics])
        return total, metrics

    def depth_loss(
        self,
        hidden: torch.Tensor,
        i: int,
        target_logits: torch.Tensor,
        input_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        objective: Objective,
        metrics: dict[str, float],
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor | None:
        """The token loss of depth-i outputs hidden (B, T, D), whose index t predicts x_{t+2+i}: over the
        positions where that token exists and is an assistant token, against the target's distribution at
        t + 1 + i (`objective`'s loss, heads/losses.py). Writes step{i}_top1 / _ce / _accept into `metrics`
        (top-1: the draft's best token, as a target id, equals the data's); None where no position counts.
        `weights` (B, T), when given, weigh each token's loss where it is the one predicted (heads/complement.py)."""
        b, t = input_ids.shape
        valid = torch.zeros(b, t, dtype=torch.bool, device=input_ids.device)
        valid[:, : t - 2 - i] = loss_mask[:, 2 + i :].bool()
        if not valid.any():
            return None
        logp = self.draft_logits(hidden[valid]).float().log_softmax(-1)  # (M, N)
        with torch.no_grad():
            p = target_logits[:, 1 + i :][valid[:, : t - 1 - i]].float().softmax(-1)
        w = None if weights is None else weights[:, 2 + i :][valid[:, : t - 2 - i]]  # (M,) the predicted tokens' weights
        term = soft_draft_loss(logp, p, objective, w)  # `objective`'s loss (heads/losses.py); CE by default
        with torch.no_grad():
            labels = input_ids[:, 2 + i :][valid[:, : t - 2 - i]]
            acc = (self.draft_ids[logp.argmax(-1)] == labels).float().mean().item()
        metrics[f"step{i}_top1"] = acc
        metrics[f"step{i}_ce"] = term.ce.item()
        metrics[f"step{i}_accept"] = term.accept.item()
        return term.loss

    # ---- drafting ----
    @property
    def scores_drafts(self) -> bool:
        """EAGLE-2 tree growth scores its nodes; parallel drafting does not."""
        return not self.parallel_tokens

    def drafter(self) -> FeatureDrafter | ParallelDrafter:
        """A fresh drafting state for one sequence: parallel drafting (one forward for K positions), or
        EAGLE-2 tree growth."""
        return ParallelDrafter(self) if self.parallel_tokens else FeatureDrafter(self)
