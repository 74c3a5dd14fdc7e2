"""EAGLE serving layouts ("eagle3", "speculators") and importers (EAGLE-3, official EAGLE-1).

Registered into `headstart.heads.export.LAYOUTS` / `IMPORTERS` when that module is imported.

eagle3 — the folder SGLang (`--speculative-algorithm EAGLE3`), vLLM (`"method": "eagle3"`) and
TensorRT-LLM load as `LlamaForCausalLMEagle3`: a Llama config for the one draft layer plus
  fc.weight (D x 3D)                          midlayer.self_attn.{q,k,v}_proj.weight (2D input)
  midlayer.self_attn.o_proj.weight            midlayer.mlp.{gate,up,down}_proj.weight
  midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight
  norm.weight   lm_head.weight (N x D)        d2t (N, int64)   t2d (V, bool)   (d2t, t2d: only when N < V)
The embedding is the target's and is not written (both engines share the target's when the file
has none). vLLM renames midlayer.* to layers.0.* and d2t to draft_id_to_target_id, skips t2d;
SGLang reads d2t as its hot-token map and skips t2d.

speculators — vLLM's speculators format (`speculators_model_type: eagle3`): the same tensors with
the draft layer under layers.0.*, and a config that nests the layer's LlamaConfig under
`transformer_layer_config` and the proposal settings under `speculators_config`.

Which target layers feed the head. Our `feature_layers` are decoder layers whose *output* is read.
Both engines capture `hidden_states + residual` just *before* running layer i, i.e. the output of
layer i - 1, so an engine index is ours + 1:
- vLLM reads the top-level `eagle_aux_hidden_state_layer_ids` as those capture indices: ours + 1.
- SGLang reads `eagle_config.eagle_aux_hidden_state_layer_ids` and adds 1 itself
  (`set_eagle3_layers_to_capture`); since sglang PR #25454 it adds 1 only when the first id is 1
  and takes other lists as capture indices. We write ours when ours[0] <= 1 (right for every SGLang
  when ours[0] == 1, e.g. the recipes' [1, 15, 28]) and ours + 1 otherwise (right for SGLang after
  #25454). ours[0] == 0 is written as is (right for SGLang before #25454; after it SGLang would
  capture the embeddings for that entry, so train with feature_layers[0] >= 1 for SGLang; vLLM
  is unaffected).
vLLM captures each listed layer once, in increasing order (it sorts the set): heads are built
with distinct, increasing feature_layers (heads/options.py), which is what it feeds fc.
Import reads them back in the order: our own `headstart` block, vLLM's top-level ids - 1,
SGLang's eagle_config (the post-#25454 rule), the engines' default (2, n // 2, n - 3) - 1.

Our draft layer keeps the un-normed features as the residual (hidden_norm is applied to the
attention input only): `norm_before_residual: false`. vLLM's speculators reader defaults it to
*true* when absent, so it is always written.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from headstart.heads.checkpoint import CONFIG_NAME, WEIGHTS_NAME, CheckpointError
from headstart.heads.export import (
    IMPORTERS,
    LAYOUTS,
    Exported,
    ExportError,
    Layout,
    _check_shapes,
    _read_json,
    _read_safetensors,
    _read_torch,
    _tensor,
)

EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"
#: the midlayer's tensors (relative to midlayer. / layers.0.)
LAYER_NAMES = (
    *(f"self_attn.{p}_proj.weight" for p in "qkvo"),
    *(f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")),
    "input_layernorm.weight",
    "hidden_norm.weight",
    "post_attention_layernorm.weight",
)
OTHER_NAMES = ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d")
VOCAB_MAP_NAMES = ("d2t", "t2d")  # written only for a draft vocabulary smaller than the target's

EAGLE3_CONFIG_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "max_position_embeddings",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "norm_before_residual",
    "eagle_aux_hidden_state_layer_ids",
    "eagle_config",
    "torch_dtype",
    "headstart",
)
SPECULATORS_CONFIG_KEYS = (
    "architectures",
    "speculators_model_type",
    "speculators_config",
    "transformer_layer_config",
    "draft_vocab_size",
    "target_hidden_size",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    "eagle_aux_hidden_state_layer_ids",
    "tie_word_embeddings",
    "torch_dtype",
    "headstart",
)


def eagle3_names(prefix: str, draft_vocab: bool = True) -> list[str]:
    """The tensor names an EAGLE-3 loader needs, the draft layer under `prefix` (midlayer / layers.0).

    d2t / t2d only with a draft vocabulary smaller than the target's: vLLM creates its
    `draft_id_to_target_id` only when draft_vocab_size != vocab_size and refuses a d2t otherwise."""
    others = OTHER_NAMES if draft_vocab else tuple(n for n in OTHER_NAMES if n not in VOCAB_MAP_NAMES)
    return [*others, *(f"{prefix}.{n}" for n in LAYER_NAMES)]


def _has_draft_vocab(config: dict) -> bool:
    """Whether an exported config (eagle3 or speculators) names a draft vocabulary smaller than the target's."""
    vocab = (config.get("transformer_layer_config") or config)["vocab_size"]
    return int(config["draft_vocab_size"]) < int(vocab)


def vllm_aux_ids(feature_layers: list[int]) -> list[int]:
    """vLLM's capture indices (the stream entering layer i) of our output-of-layer ids."""
    return [int(i) + 1 for i in feature_layers]


def sglang_aux_ids(feature_layers: list[int]) -> list[int]:
    """What SGLang's eagle_config must hold so that it captures our layers (see the module doc)."""
    ours = [int(i) for i in feature_layers]
    return ours if ours[0] <= 1 else [i + 1 for i in ours]


def _from_sglang_ids(ids: list[int]) -> list[int]:
    """Our ids from SGLang's eagle_config: a first id of 1 (or 0: capture index 0 would be the
    embeddings) means output-of-layer ids, anything else capture indices (see the module doc)."""
    return [int(i) for i in ids] if int(ids[0]) <= 1 else [int(i) - 1 for i in ids]


# ---------------------------------------------------------------------------------------------
# export


def _draft_layer_config(target, rope: dict | None = None):
    """The draft layer's LlamaConfig: the target's shapes, and `rope` (the head's own
    rope_parameters, kept by an imported head) or else the target's."""
    from headstart.heads.eagle3 import llama_draft_config

    return llama_draft_config(target.config, rope=rope)


def _rope_fields(cfg) -> tuple[float, dict | None]:
    """(rope_theta, rope_scaling) in the pre-v5 transformers form that the engines' configs read."""
    rope = dict(getattr(cfg, "rope_parameters", None) or {})
    theta = float(rope.pop("rope_theta", getattr(cfg, "rope_theta", 10000.0)))
    scaling = None if rope.get("rope_type", "default") == "default" else rope
    return theta, scaling


def _layer_fields(cfg) -> dict:
    theta, scaling = _rope_fields(cfg)
    return {
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": 1,  # both engines build num_hidden_layers draft layers
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": cfg.hidden_act,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": theta,
        "rope_scaling": scaling,
        "max_position_embeddings": cfg.max_position_embeddings,  # the target's: serving needs it
        "vocab_size": cfg.vocab_size,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
    }


def _eagle3_tensors(config: dict, state: dict, target, prefix: str) -> tuple[dict, dict[str, torch.Tensor]]:
    head = config["head"]
    cfg = _draft_layer_config(target, head.get("rope_parameters"))
    d, v = config["hidden_size"], config["vocab_size"]
    n = head.get("draft_vocab_size") or v
    fields = _layer_fields(cfg)
    recorded = (config.get("target") or {}).get("max_position_embeddings")
    if recorded and recorded != fields["max_position_embeddings"]:
        raise ExportError(
            f"the head records a target with max_position_embeddings={recorded}, the target passed has "
            f"{fields['max_position_embeddings']}: serving with a wrong value ruins acceptance. Pass the head's target."
        )
    # The layer's shapes come from the target's config: check them against the weights.
    expected = {
        "fc.weight": (d, 3 * d),
        "lm_head.weight": (n, d),
        "d2t": (n,),
        "t2d": (v,),
        "midlayer.self_attn.q_proj.weight": (cfg.num_attention_heads * cfg.head_dim, 2 * d),
        "midlayer.self_attn.k_proj.weight": (cfg.num_key_value_heads * cfg.head_dim, 2 * d),
        "midlayer.mlp.gate_proj.weight": (cfg.intermediate_size, d),
    }
    for name, shape in expected.items():
        if name not in state:
            raise ExportError(f"the head's weights lack {name!r}; it is not a complete EAGLE-3 head")
        if tuple(state[name].shape) != shape:
            raise ExportError(f"{name} has shape {tuple(state[name].shape)}; the target's layer config needs {shape}")
    tensors = {name: state[name] for name in OTHER_NAMES if name in state and name not in VOCAB_MAP_NAMES}
    if n < v:  # vLLM has no draft_id_to_target_id to load a d2t into when n == v (its loader fails)
        tensors["d2t"] = state["d2t"].to(torch.int64)
        tensors["t2d"] = state["t2d"].to(torch.bool)
    for name in LAYER_NAMES:
        if f"midlayer.{name}" in state:
            tensors[f"{prefix}.{name}"] = state[f"midlayer.{name}"]
    fields.update(
        draft_vocab_size=n,
        target_hidden_size=d,
        torch_dtype=str(tensors["fc.weight"].dtype).removeprefix("torch."),
    )
    return fields, tensors


def _build_eagle3(config: dict, state: dict, target) -> Exported:
    fields, tensors = _eagle3_tensors(config, state, target, "midlayer")
    layers = config["head"]["feature_layers"]
    out = {"architectures": [EAGLE3_ARCHITECTURE], "model_type": "llama", **fields}
    out.update(
        norm_before_residual=False,
        eagle_aux_hidden_state_layer_ids=vllm_aux_ids(layers),  # vLLM: capture indices
        eagle_config={"eagle_aux_hidden_state_layer_ids": sglang_aux_ids(layers), "use_aux_hidden_state": True},
        headstart=config,
    )
    return Exported(out, tensors)


def _build_speculators(config: dict, state: dict, target) -> Exported:
    fields, tensors = _eagle3_tensors(config, state, target, "layers.0")
    info = config.get("target") or {}
    layer = {"model_type": "llama"}
    layer.update({k: v for k, v in fields.items() if k not in ("draft_vocab_size", "target_hidden_size", "torch_dtype")})
    depth = int((config["head"].get("tree") or {}).get("depth") or 3)
    out = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": depth, "verifier_accept_k": 1, "accept_tolerance": 0.0}
            ],
            "default_proposal_method": "greedy",
            "verifier": {
                "name_or_path": info.get("name_or_path") or target.name,
                "architectures": list(getattr(target.config, "architectures", None) or [type(target.model).__name__]),
            },
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": fields["draft_vocab_size"],
        "target_hidden_size": fields["target_hidden_size"],
        "norm_before_residual": False,  # vLLM's speculators reader defaults it to true
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        "eagle_aux_hidden_state_layer_ids": vllm_aux_ids(config["head"]["feature_layers"]),
        "tie_word_embeddings": False,
        "torch_dtype": fields["torch_dtype"],
        "headstart": config,
    }
    return Exported(out, tensors)


LAYOUTS["eagle3"] = Layout(
    kinds=("eagle3",),
    build=_build_eagle3,
    required=lambda config: eagle3_names("midlayer", _has_draft_vocab(config)),
    # The draft layer's config (heads, head_dim, rope, eps) is the target's: its config is needed.
    needs_target=lambda config: True,
    config_keys=EAGLE3_CONFIG_KEYS,
    description="SGLang / vLLM / TensorRT-LLM EAGLE-3 draft (LlamaForCausalLMEagle3)",
)
LAYOUTS["speculators"] = Layout(
    kinds=("eagle3",),
    build=_build_speculators,
    required=lambda config: eagle3_names("layers.0", _has_draft_vocab(config)),
    needs_target=lambda config: True,
    config_keys=SPECULATORS_CONFIG_KEYS,
    description="vLLM speculators EAGLE-3 (speculators_model_type eagle3)",
)


# ---------------------------------------------------------------------------------------------
# import: EAGLE-3


def _feature_layers(config: dict, ours: dict, target, folder: Path) -> list[int]:
    if (ours.get("head") or {}).get("feature_layers") is not None:
        layers = list(ours["head"]["feature_layers"])
    elif config.get("eagle_aux_hidden_state_layer_ids"):
        layers = [int(i) - 1 for i in config["eagle_aux_hidden_state_layer_ids"]]
    elif (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids"):
        layers = _from_sglang_ids(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
    else:  # the engines' default capture (2, n // 2, n - 3), as output-of-layer ids
        n = target.num_layers
        layers = [1, n // 2 - 1, n - 4]
    if len(layers) != 3 or not all(0 <= i < target.num_layers for i in layers):
        raise CheckpointError(
            f"{folder}: the head reads target layers {layers} (output-of-layer ids); the target "
            f"{target.name!r} has {target.num_layers} layers and EAGLE-3 needs three of them"
        )
    return layers


def _check_layer(fields: dict, target, folder: Path) -> None:
    """The file's draft-layer config against the one our head builds from the target's config."""
    cfg = _draft_layer_config(target)
    ours = _layer_fields(cfg)
    head_dim = fields.get("head_dim") or fields["hidden_size"] // fields["num_attention_heads"]
    shape = {
        "hidden_size": fields["hidden_size"],
        "intermediate_size": fields.get("intermediate_size"),
        "num_attention_heads": fields["num_attention_heads"],
        "num_key_value_heads": fields.get("num_key_value_heads", fields["num_attention_heads"]),
        "head_dim": head_dim,
        "hidden_act": fields.get("hidden_act", "silu"),
        "num_hidden_layers": fields.get("num_hidden_layers", 1),
    }
    bad = {k: (v, ours[k]) for k, v in shape.items() if v != ours[k]}
    if bad:
        raise CheckpointError(
            f"{folder}: the draft layer does not fit the one headstart builds for {target.name!r} "
            f"(file, expected): {bad}"
        )
    soft = {k: (fields.get(k), ours[k]) for k in ("rms_norm_eps", "max_position_embeddings")}
    differ = {k: pair for k, pair in soft.items() if k in fields and pair[0] != pair[1]}
    if differ:
        warnings.warn(
            f"{folder}: the draft config differs from the target's in {differ} (file, target); "
            f"the imported head uses the target's values",
            stacklevel=3,
        )


def draft_rope(fields: dict) -> dict:
    """The draft layer's own RoPE as transformers' rope_parameters. A config without rope_theta
    means base 10000: the official EAGLE-3 code (cnets.py) and SpecForge build their rotary
    embedding with that default, so their Llama-3.1 drafts were trained, and are served, with it."""
    if fields.get("rope_parameters"):
        return dict(fields["rope_parameters"])
    rope = {"rope_type": "default", "rope_theta": float(fields.get("rope_theta") or 10000.0)}
    scaling = dict(fields.get("rope_scaling") or {})
    if scaling:
        kind = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
        scaling.pop("type", None)
        rope.update(scaling, rope_type=kind)
    return rope


def _same_rope(a: dict, b: dict) -> bool:
    def norm(r: dict) -> dict:
        return {k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for k, v in r.items()}

    return norm(a) == norm(b)


def _rope_option(fields: dict, target, folder: Path) -> dict:
    """{"rope_parameters": the draft's own} when it differs from the target's (with a warning), else {}."""
    own, targets = draft_rope(fields), dict(_draft_layer_config(target).rope_parameters)
    if _same_rope(own, targets):
        return {}
    warnings.warn(
        f"{folder}: the draft's RoPE {own} differs from the target's {targets}; the head keeps its own "
        f"(it was trained with it, and vLLM and SGLang serve it with the draft config's RoPE)",
        stacklevel=3,
    )
    return {"rope_parameters": own}


#: normalisations headstart's EAGLE-3 layer does not have, and what each does (the engines' names)
NORM_VARIANTS = {
    "fc_norm": "an RMSNorm on each of the three feature chunks before fc (SpecForge's EAGLE-3.1)",
    "norm_before_fc": "one RMSNorm over the 3D features before fc",
    "norm_output": "the normed output fed to the next draft step (vLLM's reading)",
    "norm_before_residual": "the normed features as the draft layer's residual",
}


def _refuse_norm_variants(config: dict, fields: dict, folder: Path, residual_default: bool) -> None:
    """Refuse a draft whose config turns on a normalisation our layer lacks: dropped, every draft changes."""
    nested = config.get("eagle_config") or {}
    found = {}
    for key in NORM_VARIANTS:
        default = residual_default if key == "norm_before_residual" else False
        value = nested.get(key, config.get(key, fields.get(key, default)))
        if value:
            found[key] = value
    if found:
        raise CheckpointError(
            f"{folder}: this EAGLE-3 draft uses {', '.join(f'{k}={v!r} ({NORM_VARIANTS[k]})' for k, v in found.items())}; "
            f"headstart's EAGLE-3 layer has no such normalisation, and importing it without would change every "
            f"draft. Serve this draft with vLLM or SGLang directly (they read these fields), or train a head "
            f"with headstart."
        )


def _import_eagle3_files(folder: Path, target, config: dict, fields: dict, prefix: str, info: dict):
    from headstart.decode.tree import DynamicTreeSpec
    from headstart.heads.eagle3 import Eagle3Head

    ours = config.get("headstart") or {}
    _check_shapes(config.get("target_hidden_size") or fields["hidden_size"], fields["vocab_size"], target, folder)
    _check_layer(fields, target, folder)
    weights, state = read_eagle_weights(folder)
    d, v = target.hidden_size, target.vocab_size
    n = int(config.get("draft_vocab_size") or v)
    d2t = state["d2t"].to(torch.long) if "d2t" in state else torch.zeros(n, dtype=torch.long)
    d2t = _tensor({"d2t": d2t}, "d2t", (n,), weights)
    draft_ids = torch.arange(n) + d2t
    if n and (int(draft_ids.min()) < 0 or int(draft_ids.max()) >= v or not bool((draft_ids[1:] > draft_ids[:-1]).all())):
        raise CheckpointError(f"{weights}: d2t does not map the draft vocabulary onto increasing target ids in [0, {v})")
    t2d = torch.zeros(v, dtype=torch.bool)
    t2d[draft_ids] = True
    if "t2d" in state and not torch.equal(_tensor(state, "t2d", (v,), weights).to(torch.bool), t2d):
        raise CheckpointError(f"{weights}: t2d and d2t name different draft vocabularies")
    if "lm_head.weight" not in state and n == v:  # SGLang then takes the target's lm_head
        state["lm_head.weight"] = target.lm_head.weight.detach().cpu()
    options = {
        "hidden_size": d,
        "vocab_size": v,
        "draft_vocab_size": None if n == v else n,
        "feature_layers": _feature_layers(config, ours, target, folder),
        "model_type": target.config.model_type,
        "tree": dict((ours.get("head") or {}).get("tree") or vars(DynamicTreeSpec())),
    }
    if not ours:  # our own block records the head's rope (rope_parameters) when it has its own
        options.update(_rope_option(fields, target, folder))
    extra = {k: val for k, val in (ours.get("head") or {}).items() if k not in options}
    options.update(extra)
    head = Eagle3Head(options, target)
    expected = head.state_dict()
    loaded = {"d2t": d2t, "t2d": t2d}
    sources = {name: f"{prefix}.{name[len('midlayer.'):]}" if name.startswith("midlayer.") else name for name in expected}
    for name, source in sources.items():
        if name not in loaded:
            loaded[name] = _tensor(state, source, tuple(expected[name].shape), weights)
    # the target's embedding (shared), the rotary cache: not the head's. Anything else would be dropped.
    unused = sorted(k for k in set(state) - set(sources.values()) if k != "embed_tokens.weight" and not k.endswith("inv_freq"))
    if unused:
        raise CheckpointError(
            f"{weights}: holds tensors headstart's EAGLE-3 head has no place for: {unused[:6]}; importing it without "
            f"them would change its drafts (fc_norm.* / input_norm.*: normalisations before fc that headstart's layer lacks)"
        )
    dtype = loaded["fc.weight"].dtype
    head.to(dtype)
    head.load_state_dict({k: t.to(dtype) if t.is_floating_point() else t for k, t in loaded.items()}, strict=True)
    head.target_info = ours.get("target") or info
    return head.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)


def _import_eagle3(folder: Path, target):
    config = _read_json(folder / CONFIG_NAME, ("hidden_size", "num_attention_heads", "vocab_size"))
    _refuse_norm_variants(config, config, folder, residual_default=False)
    info = {"name_or_path": None, "max_position_embeddings": config.get("max_position_embeddings")}
    return _import_eagle3_files(folder, target, config, config, "midlayer", info)


def _import_speculators(folder: Path, target):
    config = _read_json(folder / CONFIG_NAME, ("speculators_model_type", "transformer_layer_config"))
    if config["speculators_model_type"] != "eagle3":
        raise CheckpointError(
            f"{folder} holds a speculators {config['speculators_model_type']!r} model; headstart imports eagle3 ones"
        )
    fields = config["transformer_layer_config"]
    missing = [k for k in ("hidden_size", "num_attention_heads", "vocab_size") if k not in fields]
    if missing:
        raise CheckpointError(f"{folder / CONFIG_NAME}: transformer_layer_config lacks the keys {missing}")
    _refuse_norm_variants(config, fields, folder, residual_default=True)  # vLLM's speculators reader defaults it to true
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    info = {"name_or_path": verifier.get("name_or_path"), "max_position_embeddings": fields.get("max_position_embeddings")}
    return _import_eagle3_files(folder, target, config, fields, "layers.0", info)


# ---------------------------------------------------------------------------------------------
# import: official EAGLE-1 (yuhuili/EAGLE-*): config.json (a LlamaConfig) and pytorch_model.bin or
# model.safetensors with fc.weight, fc.bias, layers.0.* (no input_layernorm), embed_tokens.weight.
# Official EAGLE-3 releases (yuhuili/EAGLE3-*) ship pytorch_model.bin too, and EAGLE's own
# traineagle3/config.json says architectures ["LlamaForCausalLM"]: the weights tell the two apart.

EAGLE_WEIGHTS = (WEIGHTS_NAME, "pytorch_model.bin")


def read_eagle_weights(folder: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """(file, tensors) of an EAGLE / EAGLE-3 draft: model.safetensors, else pytorch_model.bin (what the
    official ea_model.py reads first), loaded with torch.load(weights_only=True) only."""
    paths = [folder / name for name in EAGLE_WEIGHTS if (folder / name).is_file()]
    if not paths:
        raise CheckpointError(f"{folder} has neither {EAGLE_WEIGHTS[0]} nor {EAGLE_WEIGHTS[1]}")
    where = paths[0]
    state = _read_safetensors(where) if where.suffix == ".safetensors" else _read_torch(where)
    return where, {k.removeprefix("model."): t for k, t in state.items()}


def eagle_layout(folder: Path, config: dict) -> str:
    """"eagle3" or "eagle" for a one-layer Llama config, from the weights: EAGLE-3 has midlayer.*,
    d2t / t2d, or an fc reading three target layers (D x 3D; EAGLE-1's reads two, D x 2D)."""
    _, state = read_eagle_weights(folder)
    fc = state.get("fc.weight")
    hidden = config.get("target_hidden_size") or config.get("hidden_size")
    three = fc is not None and hidden is not None and fc.ndim == 2 and fc.shape[1] == 3 * int(hidden)
    return "eagle3" if three or "d2t" in state or any(k.startswith("midlayer.") for k in state) else "eagle"


def _import_eagle(folder: Path, target):
    from headstart.heads.eagle import EagleHead

    config = _read_json(folder / CONFIG_NAME, ("hidden_size", "vocab_size"))
    _check_shapes(config["hidden_size"], config["vocab_size"], target, folder)
    if config.get("num_hidden_layers", 1) != 1:
        raise CheckpointError(f"{folder}: {config['num_hidden_layers']} draft layers; headstart's EAGLE head has one")
    where, state = read_eagle_weights(folder)
    if "fc.weight" in state and "fc.bias" not in state:  # EAGLE's fc may be built without a bias
        state["fc.bias"] = torch.zeros(state["fc.weight"].shape[0], dtype=state["fc.weight"].dtype)
    from headstart.decode.tree import DynamicTreeSpec

    d, v = target.hidden_size, target.vocab_size
    options = {"hidden_size": d, "vocab_size": v, "draft_vocab_size": None,
               "model_type": target.config.model_type, "tree": dict(vars(DynamicTreeSpec()))}
    head = EagleHead(options, target)
    expected = {k: t for k, t in head.state_dict().items() if k != "draft_ids"}
    layer_names = {f"layers.0.{k[len('layer.'):]}" for k in expected if k.startswith("layer.")}
    found = {k for k in state if k.startswith("layers.0.") and not k.endswith("rotary_emb.inv_freq")}
    missing, unexpected = sorted(layer_names - found), sorted(found - layer_names)
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: its decoder layer does not fit the {target.config.model_type!r} target's own layer "
            f"class ({type(target.layers[0]).__name__}): missing {missing[:5]}, unexpected {unexpected[:5]}. "
            f"EAGLE-1 releases are Llama layers; a head for another architecture must name the target's own tensors."
        )
    loaded = {"draft_ids": torch.arange(v)}
    for name, ref in expected.items():
        source = f"layers.0.{name[len('layer.'):]}" if name.startswith("layer.") else name
        loaded[name] = _tensor(state, source, tuple(ref.shape), where)
    dtype = loaded["fc.weight"].dtype
    head.to(dtype)
    head.load_state_dict({k: t.to(dtype) if t.is_floating_point() else t for k, t in loaded.items()}, strict=True)
    head.target_info = {"name_or_path": config.get("_name_or_path"), "max_position_embeddings": config.get("max_position_embeddings")}
    return head.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)


IMPORTERS["eagle3"] = _import_eagle3
IMPORTERS["speculators"] = _import_speculators
IMPORTERS["eagle"] = _import_eagle
