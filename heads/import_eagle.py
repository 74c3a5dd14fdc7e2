"""Importing EAGLE drafts: the "eagle3" and "speculators" layouts (ours, and official EAGLE-3
releases such as yuhuili/EAGLE3-*), and the official EAGLE-1 layout ("eagle", import only).

The layouts themselves (names, feature-layer ids per engine, the draft layer's config) are
described in heads/layout_eagle3.py; heads/export.py registers these importers in `LAYOUTS`.
An imported draft must be one headstart's layer can run unchanged: a draft layer that does not fit
the target's, normalisations our layer lacks, or tensors it has no place for are refused, never
dropped.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import torch

from headstart.decode.dynamic import DynamicTreeSpec
from headstart.heads.checkpoint import CONFIG_NAME, WEIGHTS_NAME
from headstart.heads.layout_eagle3 import draft_layer_config, from_sglang_ids, layer_fields
from headstart.heads.reading import (
    CheckpointError,
    check_shapes,
    checked_tensor,
    read_json,
    read_safetensors,
    read_torch,
)
from headstart.heads.results import architecture_options, dynamic_tree, restore_fields, set_default_tree
from headstart.heads.vocab import ids_from_d2t, t2d_from_ids

# ---------------------------------------------------------------------------------------------
# EAGLE-3: the eagle3 and speculators layouts


def _feature_layers(config: dict, ours: dict, target, folder: Path) -> list[int]:
    if (ours.get("head") or {}).get("feature_layers") is not None:
        layers = list(ours["head"]["feature_layers"])
    elif config.get("eagle_aux_hidden_state_layer_ids"):
        layers = [int(i) - 1 for i in config["eagle_aux_hidden_state_layer_ids"]]
    elif (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids"):
        layers = from_sglang_ids(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
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
    cfg = draft_layer_config(target)
    ours = layer_fields(cfg)
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
    own, targets = draft_rope(fields), dict(draft_layer_config(target).rope_parameters)
    if _same_rope(own, targets):
        return {}
    warnings.warn(
        f"{folder}: the draft's RoPE {own} differs from the target's {targets}; the head keeps its own "
        f"(it was trained with it, and vLLM and SGLang serve it with the draft config's RoPE)",
        stacklevel=3,
    )
    return {"rope_parameters": own}


#: the normalisations an EAGLE-3 draft's config may turn on, and what each does (the engines' names); headstart's
#: layer has all but fc_norm (heads/eagle3.py NORMS)
NORM_VARIANTS = {
    "fc_norm": "an RMSNorm on each of the three feature chunks before fc (SpecForge's EAGLE-3.1)",
    "norm_before_fc": "one RMSNorm over the 3D features before fc",
    "norm_output": "the normed output fed to the next draft step (vLLM's reading)",
    "norm_before_residual": "the normed features as the draft layer's residual",
}


def _norm_options(config: dict, fields: dict, folder: Path, residual_default: bool) -> dict:
    """The draft's normalisations as head options ({name: True} for each of heads/eagle3.py's NORMS it turns
    on); one our layer lacks (fc_norm) is refused: dropped, every draft would change."""
    from headstart.heads.eagle3 import NORMS

    nested = config.get("eagle_config") or {}
    found = {}
    for key in NORM_VARIANTS:
        default = residual_default if key == "norm_before_residual" else False
        value = nested.get(key, config.get(key, fields.get(key, default)))
        if value:
            found[key] = value
    lacking = {k: v for k, v in found.items() if k not in NORMS}
    if lacking:
        raise CheckpointError(
            f"{folder}: this EAGLE-3 draft uses {', '.join(f'{k}={v!r} ({NORM_VARIANTS[k]})' for k, v in lacking.items())}; "
            f"headstart's EAGLE-3 layer has no such normalisation, and importing it without would change every "
            f"draft. Serve this draft with vLLM or SGLang directly (they read these fields), or train a head "
            f"with headstart."
        )
    return {k: True for k in found}


def _import_eagle3_files(folder: Path, target, config: dict, fields: dict, prefix: str, info: dict, norms: dict):
    from headstart.heads.eagle3 import Eagle3Head
    from headstart.heads.parallel import parallel_options

    ours = config.get("headstart") or {}
    saved = ours.get("head") or {}  # our own block: the head's options and fields as its config.json held them
    check_shapes(config.get("target_hidden_size") or fields["hidden_size"], fields["vocab_size"], target, folder)
    _check_layer(fields, target, folder)
    weights, state = read_eagle_weights(folder)
    d, v = target.hidden_size, target.vocab_size
    n = int(config.get("draft_vocab_size") or v)
    d2t = state["d2t"].to(torch.long) if "d2t" in state else torch.zeros(n, dtype=torch.long)
    d2t = checked_tensor({"d2t": d2t}, "d2t", (n,), weights)
    draft_ids = ids_from_d2t(d2t)
    if n and (int(draft_ids.min()) < 0 or int(draft_ids.max()) >= v or not bool((draft_ids[1:] > draft_ids[:-1]).all())):
        raise CheckpointError(f"{weights}: d2t does not map the draft vocabulary onto increasing target ids in [0, {v})")
    t2d = t2d_from_ids(draft_ids, v)
    if "t2d" in state and not torch.equal(checked_tensor(state, "t2d", (v,), weights).to(torch.bool), t2d):
        raise CheckpointError(f"{weights}: t2d and d2t name different draft vocabularies")
    if "lm_head.weight" not in state and n == v:  # SGLang then takes the target's lm_head
        state["lm_head.weight"] = target.lm_head.weight.detach().cpu()
    options = {
        "hidden_size": d,
        "vocab_size": v,
        "draft_vocab_size": None if n == v else n,
        "feature_layers": _feature_layers(config, ours, target, folder),
        "model_type": target.config.model_type,
        **norms,
    }
    tree = dynamic_tree(saved.get("tree"))  # our own block's, else the default
    if not ours:  # our own block records the head's rope (rope_parameters) when it has its own
        options.update(_rope_option(fields, target, folder))
    if not ours and "mask_hidden" in state:  # P-EAGLE (heads/parallel.py): K is not in the layout; the default K
        options.update(parallel_options(v, True, None, _placeholder_token(config, folder)))
        tree = replace(tree, depth=min(tree.depth, options["parallel_tokens"]))
    options.update({k: val for k, val in architecture_options(saved).items() if k not in options})
    head = Eagle3Head(options, target)
    restore_fields(head, {**saved, "tree": tree.to_json()}, str(folder / CONFIG_NAME))
    expected = head.state_dict()
    loaded = {"d2t": d2t, "t2d": t2d}
    sources = {name: f"{prefix}.{name[len('midlayer.'):]}" if name.startswith("midlayer.") else name for name in expected}
    for name, source in sources.items():
        if name not in loaded:
            loaded[name] = checked_tensor(state, source, tuple(expected[name].shape), weights)
    # the target's embedding (shared), the rotary cache: not the head's. Anything else would be dropped.
    unused = sorted(k for k in set(state) - set(sources.values()) if k != "embed_tokens.weight" and not k.endswith("inv_freq"))
    if unused:
        raise CheckpointError(
            f"{weights}: holds tensors headstart's EAGLE-3 head has no place for: {unused[:6]}; importing it without "
            f"them would change its drafts (fc_norm.*: per-chunk normalisations before fc that headstart's layer lacks; "
            f"input_norm.* without norm_before_fc in config.json)"
        )
    dtype = loaded["fc.weight"].dtype
    head.to(dtype)
    head.load_state_dict({k: t.to(dtype) if t.is_floating_point() else t for k, t in loaded.items()}, strict=True)
    head.target_info = ours.get("target") or info
    return head.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)


def _placeholder_token(config: dict, folder: Path) -> int:
    """The placeholder token of a parallel-drafting EAGLE-3 draft, where vLLM looks for it."""
    for key in ("mask_token_id", "pard_token", "ptd_token_id"):
        if config.get(key) is not None:
            return int(config[key])
    raise CheckpointError(f"{folder}: the weights hold mask_hidden (parallel drafting) but config.json names no "
                          f"placeholder token (ptd_token_id or mask_token_id)")


def import_eagle3(folder: Path, target):
    """An Eagle3Head from an eagle3-layout folder (ours, SpecForge's, or an official EAGLE-3 release)."""
    config = read_json(folder / CONFIG_NAME, ("hidden_size", "num_attention_heads", "vocab_size"))
    norms = _norm_options(config, config, folder, residual_default=False)
    info = {"name_or_path": None, "max_position_embeddings": config.get("max_position_embeddings")}
    return _import_eagle3_files(folder, target, config, config, "midlayer", info, norms)


def import_speculators(folder: Path, target):
    """An Eagle3Head from a folder in vLLM's speculators format (speculators_model_type eagle3)."""
    config = read_json(folder / CONFIG_NAME, ("speculators_model_type", "transformer_layer_config"))
    if config["speculators_model_type"] != "eagle3":
        raise CheckpointError(
            f"{folder} holds a speculators {config['speculators_model_type']!r} model; headstart imports eagle3 ones"
        )
    fields = config["transformer_layer_config"]
    missing = [k for k in ("hidden_size", "num_attention_heads", "vocab_size") if k not in fields]
    if missing:
        raise CheckpointError(f"{folder / CONFIG_NAME}: transformer_layer_config lacks the keys {missing}")
    norms = _norm_options(config, fields, folder, residual_default=True)  # vLLM's speculators reader defaults it to true
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    info = {"name_or_path": verifier.get("name_or_path"), "max_position_embeddings": fields.get("max_position_embeddings")}
    return _import_eagle3_files(folder, target, config, fields, "layers.0", info, norms)


# ---------------------------------------------------------------------------------------------
# official EAGLE-1 (yuhuili/EAGLE-*): config.json (a LlamaConfig) and pytorch_model.bin or
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
    state = read_safetensors(where) if where.suffix == ".safetensors" else read_torch(where)
    return where, {k.removeprefix("model."): t for k, t in state.items()}


def eagle_layout(folder: Path, config: dict) -> str:
    """"eagle3" or "eagle" for a one-layer Llama config, from the weights: EAGLE-3 has midlayer.*,
    d2t / t2d, or an fc reading three target layers (D x 3D; EAGLE-1's reads two, D x 2D)."""
    _, state = read_eagle_weights(folder)
    fc = state.get("fc.weight")
    hidden = config.get("target_hidden_size") or config.get("hidden_size")
    three = fc is not None and hidden is not None and fc.ndim == 2 and fc.shape[1] == 3 * int(hidden)
    return "eagle3" if three or "d2t" in state or any(k.startswith("midlayer.") for k in state) else "eagle"


def import_eagle1(folder: Path, target):
    """An EagleHead from an official EAGLE-1 release; its layer must be the target's own layer class."""
    from headstart.heads.eagle import EagleHead

    config = read_json(folder / CONFIG_NAME, ("hidden_size", "vocab_size"))
    check_shapes(config["hidden_size"], config["vocab_size"], target, folder)
    if config.get("num_hidden_layers", 1) != 1:
        raise CheckpointError(f"{folder}: {config['num_hidden_layers']} draft layers; headstart's EAGLE head has one")
    where, state = read_eagle_weights(folder)
    if "fc.weight" in state and "fc.bias" not in state:  # EAGLE's fc may be built without a bias
        state["fc.bias"] = torch.zeros(state["fc.weight"].shape[0], dtype=state["fc.weight"].dtype)
    d, v = target.hidden_size, target.vocab_size
    options = {"hidden_size": d, "vocab_size": v, "draft_vocab_size": None, "model_type": target.config.model_type}
    head = EagleHead(options, target)
    set_default_tree(head, DynamicTreeSpec())
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
        loaded[name] = checked_tensor(state, source, tuple(ref.shape), where)
    dtype = loaded["fc.weight"].dtype
    head.to(dtype)
    head.load_state_dict({k: t.to(dtype) if t.is_floating_point() else t for k, t in loaded.items()}, strict=True)
    head.target_info = {"name_or_path": config.get("_name_or_path"), "max_position_embeddings": config.get("max_position_embeddings")}
    return head.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)
