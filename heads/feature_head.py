"""The base of the heads that read the target's features: EAGLE-1/2 (heads/eagle.py) and EAGLE-3
(heads/eagle3.py). What they share lives here, so that neither kind imports the other:

- the architecture check: a head's decoder layer is built from (or shaped for) the target's family,
  so a head trained on one family does not load onto another;
- the target's parts they borrow (`TargetParts`: its embedding, lm_head and logit softcapping),
  frozen and held outside the module registry, and the target's own logits over the draft vocabulary;
- the pieces a draft layer is built from: a one-layer copy of the target config, the architecture's
  rotary embedding, the causal mask of training;
- saving, the feature layers read, and EAGLE-2 dynamic-tree drafting (heads/drafting.py).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from headstart.decode.contract import DraftState, Proposal
from headstart.decode.dynamic import DynamicTreeSpec
from headstart.decode.tree import HeldOutAccuracy
from headstart.errors import HeadstartError
from headstart.heads.drafting import FeatureDrafter
from headstart.heads.init_from_target import TargetLayerCopy
from headstart.target import WeightRows, float_mask


class ArchitectureMismatch(HeadstartError):
    """A head whose decoder layer was built for another architecture than the target's."""


def check_architecture(options: dict, target, kind: str) -> None:
    """Refuse a head whose options record another model_type than the target's."""
    recorded = options.get("model_type")
    if recorded and recorded != target.config.model_type:
        raise ArchitectureMismatch(
            f"this {kind} head was trained on a {recorded!r} target; its decoder layer does not fit the "
            f"{target.config.model_type!r} target {target.name!r}. Train a head for this target."
        )


@dataclass(frozen=True)
class TargetParts:
    """The frozen target's parts a head borrows (Medusa uses its lm_head). A plain object, not a module: nn.Module
    registers no attribute of it, so these weights are never trained, moved by the head's `.to()` or
    saved with the head (a checkpoint holds the head only)."""

    embed_tokens: nn.Module  # token ids (B, n) -> (B, n, D)
    lm_head: nn.Linear  # (..., D) -> (..., V)
    softcap: Callable[[torch.Tensor], torch.Tensor]  # the target's final-logit softcapping

    @classmethod
    def of(cls, target) -> "TargetParts":
        return cls(target.embed_tokens, target.lm_head, target.softcap)


def causal_mask(t: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(1, 1, T, T) causal additive mask; right padding needs nothing more (pads come last)."""
    return float_mask(torch.ones(t, t, dtype=torch.bool, device=device).tril(), dtype)


def single_layer_config(config, layer_type: str = "full_attention"):
    """A copy of a target config for one full-attention decoder layer (no sliding window)."""
    cfg = copy.deepcopy(config)
    cfg.num_hidden_layers = 1
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = [layer_type]
    if hasattr(cfg, "sliding_window"):
        cfg.sliding_window = None
    if hasattr(cfg, "use_sliding_window"):
        cfg.use_sliding_window = False
    return cfg


def llama_draft_config(target_config, hidden_act: str = "silu", rope: dict | None = None):
    """The LlamaConfig of an EAGLE-3 draft layer for a target of any family (the served shape; DFlash's
    Qwen3 layers take its shapes and RoPE); `rope`: the draft's own rope_parameters (an imported
    draft's), default the target's."""
    from transformers import LlamaConfig

    c = target_config
    rope = rope or getattr(c, "rope_parameters", None) or {}
    if "full_attention" in rope:  # per-layer-type rope (Gemma3): the draft layer is full attention
        rope = rope["full_attention"]
    rope = dict(rope) if rope else {"rope_type": "default", "rope_theta": getattr(c, "rope_theta", 10000.0)}
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    cfg = LlamaConfig(
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=getattr(c, "num_key_value_heads", c.num_attention_heads),
        head_dim=head_dim,
        num_hidden_layers=1,
        rms_norm_eps=getattr(c, "rms_norm_eps", 1e-6),
        max_position_embeddings=c.max_position_embeddings,
        rope_parameters=rope,
        hidden_act=hidden_act,
        vocab_size=c.vocab_size,
        attention_bias=False,
        mlp_bias=False,
    )
    cfg._attn_implementation = getattr(c, "_attn_implementation", None) or "sdpa"
    return cfg


class Rotary(nn.Module):
    """The architecture's own rotary embedding, called the way its base model calls it."""

    def __init__(self, rotary_cls: type, config, layer_type: str = "full_attention"):
        super().__init__()
        self.rotary = rotary_cls(config)
        takes_type = "layer_type" in inspect.signature(self.rotary.forward).parameters
        self.layer_type = layer_type if takes_type else None

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.layer_type is None:
            return self.rotary(x, positions)
        return self.rotary(x, positions, self.layer_type)


class FeatureHead(nn.Module):
    """What EAGLE and EAGLE-3 heads share: built from (options, target) once the architecture check
    passed, the target's parts borrowed (`target_parts`), saved as config.json + model.safetensors,
    and drafting dynamic trees through a `FeatureDrafter` (`self._drafter`). Subclasses define `fc`
    (its weight gives the head's dtype and device), `draft_ids`, `input_features`, `step` and
    `draft_logits`."""

    dynamic = True
    needs_features = True
    scores_drafts = True  # FeatureDrafter's proposals carry each node's path probability (hybrid trees share a budget by it)
    feature_layers: tuple[int, ...] = ()  # the target layers read besides its last hidden state
    # The Linears over the target's hidden states: they stay in the head's dtype under `decode.draft_int8`,
    # for those states carry outlier channels one int8 scale per input crushes (docs/results.md#int8-draft-heads).
    feature_linears: tuple[str, ...] = ("fc",)
    # Set after the head is built (heads/results.py): the tree it decodes with unless told otherwise, and
    # which target layer init_from_target copied into its draft layer. `held_out` stays None: per-step
    # accuracy is in the training summary, and a dynamic tree is not built from it.
    held_out: HeldOutAccuracy | None = None
    default_tree: DynamicTreeSpec | None = None
    layer_copy: TargetLayerCopy | None = None

    def __init__(self, options: dict, target):
        super().__init__()
        check_architecture(options, target, self.kind)
        self.options = dict(options)
        self.target_info: dict = {}  # what config.json records about the target (set by build/load)
        self.target_parts = TargetParts.of(target)
        self._target_rows = WeightRows()  # the target lm_head's rows of the draft vocabulary

    @classmethod
    def layers_for(cls, target, **options) -> tuple[int, ...]:
        """The target layers a head built with `options` reads besides the last hidden state."""
        return cls.feature_layers

    @classmethod
    def from_config(cls, options: dict, target):
        """The shell a checkpoint's weights are loaded into."""
        return cls(options, target)

    def save_pretrained(self, folder, target=None, extra: dict | None = None):
        from headstart.heads.checkpoint import save_heads

        return save_heads(self, folder, target, extra)

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    def target_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., D) hidden states -> (..., N) the target's own logits over the draft vocabulary, softcapped."""
        lm_head = self.target_parts.lm_head
        if self.options.get("draft_vocab_size") is None:
            logits = lm_head(h.to(lm_head.weight.dtype))  # a module call: ZeRO-3 gathers around it
        else:
            w = self._target_rows(lm_head.weight, self.draft_ids)
            logits = F.linear(h.to(w.dtype), w)
        return self.target_parts.softcap(logits)

    def propose(self, state: DraftState, spec: DynamicTreeSpec) -> Proposal:
        """Grow an EAGLE-2 tree from the target's features committed since the last call."""
        return self._drafter.propose(state, spec)

    def drafter(self) -> FeatureDrafter:
        """A fresh drafting state (the head's own KV cache) for one sequence: the engine makes one per row."""
        return FeatureDrafter(self)
