"""Start an EAGLE / EAGLE-3 draft layer from the target's own last decoder layer (`init_from_target`).

The draft layer predicts what the target's top layers compute, so a trained layer of the target is a
nearer start than random weights. The rule, parameter by parameter of the draft layer:

- the target-layer parameter of the same name (renames below), where the shapes agree: copied;
- EAGLE-3's q/k/v projections read 2D wide, concat(input_norm(embed(x)), hidden_norm(h)) (heads/eagle3.py):
  the target's (out, D) weight goes into the half that reads the features, [:, D:]; the half that reads
  the token embedding keeps its initialisation (the target's layer never reads an embedding there);
- norms are copied as the gain they apply: a Gemma-style norm scales by 1 + weight, a Llama-style one
  by weight (found by running each norm on ones), so a Gemma target's norm enters EAGLE-3's
  Llama-shaped layer as 1 + weight;
- anything else (no source of that name, or another shape) keeps its initialisation.

EAGLE's layer is the target architecture's own class, so every parameter is copied by name but the
input norm, which EAGLE removes. EAGLE-3's layer is Llama-shaped for every target (the shape SGLang and
vLLM serve): `hidden_norm` (the features' norm) starts from the target's `input_layernorm`, the pre-MLP
norm from `pre_feedforward_layernorm` where the layer has Gemma's sandwich norms (else
`post_attention_layernorm`), and the embedding's norm keeps its initialisation. Target parameters
with no place in a Llama layer (Qwen2's q/k/v biases, Qwen3's and Gemma's q/k norms, Gemma's post-norms)
are left out; the draft's activation stays SiLU, so for a Gemma target the MLP is a start, not a copy.

The source is the last decoder layer whose attention projections fit the draft layer's shapes (the last
layer itself on every architecture the tests cover); a target with none is refused. The copies are the
head's own parameters (no storage is shared with the target), and what was copied is recorded on the
head (`head.layer_copy`, a `TargetLayerCopy`), hence in its config.json (head.init_from_target).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from headstart.heads.options import HeadOptionsError
from headstart.target import gathered

#: head kind -> the attribute holding its draft decoder layer
DRAFT_LAYER = {"eagle": "layer", "eagle3": "midlayer"}

#: head kind -> {draft-layer parameter: the target-layer parameters it starts from, first present wins};
#: a parameter not listed starts from the target-layer parameter of the same name
RENAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "eagle": {},
    "eagle3": {
        "hidden_norm.weight": ("input_layernorm.weight",),
        "input_layernorm.weight": (),  # the token embedding's norm: the target has none before this layer
        "post_attention_layernorm.weight": ("pre_feedforward_layernorm.weight", "post_attention_layernorm.weight"),
    },
}


@dataclass(frozen=True)
class TargetLayerCopy:
    """Which target layer a head's draft layer started from, and how (`head.layer_copy`), with draft
    names as in the head's state dict; config.json saves it as head.init_from_target."""

    layer: int  # the target layer's index
    copied: dict[str, str]  # draft parameter -> the target parameter copied into it
    features_slice: dict[str, str]  # draft parameter whose features half [:, D:] got the target's weight
    kept: list[str]  # draft parameters left as initialised
    unused: list[str]  # target parameters the draft layer has no place for

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class LayerPlan:
    """How one target layer's parameters enter the draft layer (names relative to each layer)."""

    layer: int  # the target layer's index
    copied: dict[str, str]  # draft parameter -> target parameter of the same shape
    features_slice: dict[str, str]  # draft parameter whose features half [:, D:] gets the target's weight
    kept: list[str]  # draft parameters left as initialised
    unused: list[str]  # target parameters the draft layer has no place for

    def fits(self, attention: list[str]) -> bool:
        """Whether every attention projection gets the target's weight (else another layer is nearer)."""
        return bool(attention) and all(n in self.copied or n in self.features_slice for n in attention)

    def record(self, prefix: str) -> TargetLayerCopy:
        """What the head records, with draft names as in the head's state dict (`prefix`: the draft layer's)."""
        return TargetLayerCopy(
            layer=self.layer,
            copied={f"{prefix}.{k}": v for k, v in self.copied.items()},
            features_slice={f"{prefix}.{k}": v for k, v in self.features_slice.items()},
            kept=[f"{prefix}.{k}" for k in self.kept],
            unused=list(self.unused),
        )


def copy_target_layer(head: nn.Module, target) -> TargetLayerCopy:
    """Start `head`'s draft decoder layer from the target's last decoder layer (the rule in the module
    docstring); returns the record, also kept as head.layer_copy."""
    if head.kind not in DRAFT_LAYER:
        raise HeadOptionsError(
            f"init_from_target: a {head.kind} head has no decoder layer to start from the target's; it applies to "
            f"{' and '.join(DRAFT_LAYER)} heads. Leave head.init_from_target false for {head.kind} heads"
        )
    draft = getattr(head, DRAFT_LAYER[head.kind])
    plan = _nearest_plan(draft, target, RENAMES[head.kind])
    source = target.layers[plan.layer]
    with gathered(list(source.parameters())), torch.no_grad():  # ZeRO-3: whole weights inside the block
        for dest, src in plan.copied.items():
            _copy(draft, dest, source, src)
        for dest, src in plan.features_slice.items():
            weight = draft.get_parameter(dest)  # (out, 2D): [embedding half | features half]
            w = source.get_parameter(src)  # (out, D)
            weight[:, w.shape[1]:].copy_(w.to(weight.dtype))
    head.layer_copy = plan.record(DRAFT_LAYER[head.kind])
    return head.layer_copy


def _nearest_plan(draft: nn.Module, target, renames: dict[str, tuple[str, ...]]) -> LayerPlan:
    """The plan of the last target layer whose attention projections fit the draft layer's shapes."""
    attention = [n for n, _ in draft.named_parameters() if n.startswith("self_attn.") and n.endswith("proj.weight")]
    for i in reversed(range(len(target.layers))):
        plan = _plan(draft, target.layers[i], i, renames)
        if plan.fits(attention):
            return plan
    wanted = ", ".join(f"{n} {tuple(draft.get_parameter(n).shape)}" for n in attention) or "self_attn.*_proj weights"
    raise HeadOptionsError(
        f"init_from_target: no decoder layer of {target.name!r} has attention projections that fit the draft "
        f"layer (it needs {wanted}, or for EAGLE-3's 2D-wide q/k/v a (out, D) weight to put in its features half); "
        f"build the head without init_from_target"
    )


def _plan(draft: nn.Module, source: nn.Module, index: int, renames: dict[str, tuple[str, ...]]) -> LayerPlan:
    """Match each draft-layer parameter with the source layer's (by name, then by shape); shapes only."""
    shapes = {n: _shape(p) for n, p in source.named_parameters()}
    plan = LayerPlan(layer=index, copied={}, features_slice={}, kept=[], unused=[])
    for name, p in draft.named_parameters():
        src = next((s for s in renames.get(name, (name,)) if s in shapes), None)
        dest, have = tuple(p.shape), shapes.get(src)
        if have == dest:
            plan.copied[name] = src
        elif have is not None and len(dest) == 2 and len(have) == 2 and dest == (have[0], 2 * have[1]):
            plan.features_slice[name] = src
        else:
            plan.kept.append(name)
    used = set(plan.copied.values()) | set(plan.features_slice.values())
    plan.unused = [n for n in shapes if n not in used]
    return plan


def _copy(draft: nn.Module, dest: str, source: nn.Module, src: str) -> None:
    """Copy one parameter of the same shape; a norm's weight is converted to the draft norm's convention."""
    d, s = draft.get_parameter(dest), source.get_parameter(src)
    value = s.detach().to(d.dtype)
    if _is_norm_weight(draft, dest):
        src_offset, dest_offset = _norm_offset(_owner(source, src)), _norm_offset(_owner(draft, dest))
        if src_offset != dest_offset:
            value = value + (src_offset - dest_offset)
    d.copy_(value)


def _is_norm_weight(layer: nn.Module, name: str) -> bool:
    """A 1-D weight that is its module's only parameter: an RMSNorm's (a bias has a weight beside it)."""
    return layer.get_parameter(name).ndim == 1 and len(list(_owner(layer, name).parameters())) == 1


def _owner(layer: nn.Module, name: str) -> nn.Module:
    return layer.get_submodule(name.rpartition(".")[0])


def _norm_offset(norm: nn.Module) -> float:
    """0 for a norm that scales by its weight (Llama), 1 for one that scales by 1 + weight (Gemma):
    found by running it on ones, whose RMS is 1."""
    w = norm.weight.detach().float()
    gain = norm(torch.ones(1, w.shape[0], device=w.device)).float()[0]  # (D,) the gain it applies
    for offset in (0.0, 1.0):
        if torch.allclose(gain, w + offset, rtol=1e-3, atol=1e-3):
            return offset
    raise HeadOptionsError(
        f"init_from_target: the norm {type(norm).__name__} scales by neither its weight nor 1 + its weight, so its "
        f"weight cannot be copied into the draft layer's; build the head without init_from_target"
    )


def _shape(p: torch.Tensor) -> tuple[int, ...]:
    """A parameter's shape, also where ZeRO-3 keeps it beside an empty tensor."""
    return tuple(getattr(p, "ds_shape", p.shape))
