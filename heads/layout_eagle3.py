"""The EAGLE-3 serving layouts, "eagle3" and "speculators": their names, config.json and tensors.

Importing them back (and the official EAGLE-1 layout) is heads/import_eagle.py; both are
registered in heads/export.py's `LAYOUTS`. A variant of the layout changes `eagle3_config` (its
config.json) and `eagle3_tensors` (its weights), the two functions every builder here is made of.

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

A head with parallel drafting (P-EAGLE, heads/parallel.py) adds `mask_hidden` (3D,) to the eagle3
layout's weights and `ptd_token_id` (the placeholder token vLLM reads) and `parallel_drafting: true`
to its config.json; vLLM serves it with `"parallel_drafting": true` and num_speculative_tokens <= K
in the speculative config. SGLang has no parallel drafting; the speculators layout refuses such a head.

Our draft layer keeps the un-normed features as the residual (hidden_norm is applied to the
attention input only): `norm_before_residual: false`. vLLM's speculators reader defaults it to
*true* when absent, so it is always written. A head with any of heads/eagle3.py's `NORMS` on (one
imported from vLLM's speculators trainer) writes them true, and `input_norm.weight` (3D) with
`norm_before_fc`; vLLM reads all three from either layout's config.json (SGLang's reading of them was
not checked).
"""

from __future__ import annotations

import torch

from headstart.heads.layout import Exported, ExportError

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
INPUT_NORM_NAMES = ("input_norm.weight",)  # written only for a head with norm_before_fc
VOCAB_MAP_NAMES = ("d2t", "t2d")  # written only for a draft vocabulary smaller than the target's
PARALLEL_NAMES = ("mask_hidden",)  # written only for a head with parallel drafting

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
    "norm_before_fc",
    "norm_output",
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


def eagle3_names(prefix: str, draft_vocab: bool = True, parallel: bool = False, input_norm: bool = False) -> list[str]:
    """The tensor names an EAGLE-3 loader needs, the draft layer under `prefix` (midlayer / layers.0).

    d2t / t2d only with a draft vocabulary smaller than the target's: vLLM creates its
    `draft_id_to_target_id` only when draft_vocab_size != vocab_size and refuses a d2t otherwise.
    mask_hidden only with parallel drafting: vLLM refuses it missing then, and skips it otherwise.
    input_norm.weight only with norm_before_fc: vLLM skips it otherwise."""
    others = OTHER_NAMES if draft_vocab else tuple(n for n in OTHER_NAMES if n not in VOCAB_MAP_NAMES)
    return [*others, *(PARALLEL_NAMES if parallel else ()), *(INPUT_NORM_NAMES if input_norm else ()),
            *(f"{prefix}.{n}" for n in LAYER_NAMES)]


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


def from_sglang_ids(ids: list[int]) -> list[int]:
    """Our ids from SGLang's eagle_config: a first id of 1 (or 0: capture index 0 would be the
    embeddings) means output-of-layer ids, anything else capture indices (see the module doc)."""
    return [int(i) for i in ids] if int(ids[0]) <= 1 else [int(i) - 1 for i in ids]


# ---------------------------------------------------------------------------------------------
# export


def draft_layer_config(target, rope: dict | None = None):
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


def layer_fields(cfg) -> dict:
    """The fields of the draft layer's Llama config that the engines read, from its LlamaConfig."""
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


def draft_layer_fields(config: dict, target) -> dict:
    """`layer_fields` of our head's draft layer (the target's shapes, the head's own RoPE when it
    has one), refused when the target passed is not the one the head records."""
    fields = layer_fields(draft_layer_config(target, config["head"].get("rope_parameters")))
    recorded = (config.get("target") or {}).get("max_position_embeddings")
    if recorded and recorded != fields["max_position_embeddings"]:
        raise ExportError(
            f"the head records a target with max_position_embeddings={recorded}, the target passed has "
            f"{fields['max_position_embeddings']}: serving with a wrong value ruins acceptance. Pass the head's target."
        )
    return fields


def eagle3_tensors(config: dict, state: dict, layer: dict, prefix: str) -> dict[str, torch.Tensor]:
    """The layout's tensors from our EAGLE-3 state dict, the draft layer under `prefix` (midlayer /
    layers.0), checked against the draft layer's config `layer` (`draft_layer_fields`)."""
    d, v = config["hidden_size"], config["vocab_size"]
    n = config["head"].get("draft_vocab_size") or v
    heads, kv_heads, head_dim = layer["num_attention_heads"], layer["num_key_value_heads"], layer["head_dim"]
    # The layer's shapes come from the target's config: check them against the weights.
    expected = {
        "fc.weight": (d, 3 * d),
        "lm_head.weight": (n, d),
        "d2t": (n,),
        "t2d": (v,),
        "midlayer.self_attn.q_proj.weight": (heads * head_dim, 2 * d),
        "midlayer.self_attn.k_proj.weight": (kv_heads * head_dim, 2 * d),
        "midlayer.mlp.gate_proj.weight": (layer["intermediate_size"], d),
    }
    for name, shape in expected.items():
        if name not in state:
            raise ExportError(f"the head's weights lack {name!r}; it is not a complete EAGLE-3 head")
        if tuple(state[name].shape) != shape:
            raise ExportError(f"{name} has shape {tuple(state[name].shape)}; the target's layer config needs {shape}")
    tensors = {name: state[name] for name in OTHER_NAMES if name in state and name not in VOCAB_MAP_NAMES}
    if config["head"].get("parallel_drafting"):  # P-EAGLE: the placeholder slots' feature, fc's input width
        tensors["mask_hidden"] = state["mask_hidden"]
    if config["head"].get("norm_before_fc"):  # the RMSNorm over the 3D features before fc
        tensors["input_norm.weight"] = state["input_norm.weight"]
    if n < v:  # vLLM has no draft_id_to_target_id to load a d2t into when n == v (its loader fails)
        tensors["d2t"] = state["d2t"].to(torch.int64)
        tensors["t2d"] = state["t2d"].to(torch.bool)
    for name in LAYER_NAMES:
        if f"midlayer.{name}" in state:
            tensors[f"{prefix}.{name}"] = state[f"midlayer.{name}"]
    return tensors


def _draft_fields(config: dict, tensors: dict[str, torch.Tensor]) -> dict:
    """The fields both layouts put beside the layer's: draft vocabulary, the target's width, dtype."""
    return {
        "draft_vocab_size": config["head"].get("draft_vocab_size") or config["vocab_size"],
        "target_hidden_size": config["hidden_size"],
        "torch_dtype": str(tensors["fc.weight"].dtype).removeprefix("torch."),
    }


def _norms(config: dict) -> dict:
    """The draft layer's normalisation fields as vLLM reads them (heads/eagle3.py NORMS), from our head's options."""
    head = config["head"]
    return {name: bool(head.get(name, False)) for name in ("norm_before_residual", "norm_before_fc", "norm_output")}


def eagle3_config(config: dict, layer: dict, tensors: dict[str, torch.Tensor]) -> dict:
    """config.json of the eagle3 layout: the draft layer's Llama config, the feature layers for
    both engines (see the module doc), and our own config under `headstart`."""
    layers = config["head"]["feature_layers"]
    return {
        "architectures": [EAGLE3_ARCHITECTURE],
        "model_type": "llama",
        **layer,
        **_draft_fields(config, tensors),
        **_norms(config),
        "eagle_aux_hidden_state_layer_ids": vllm_aux_ids(layers),  # vLLM: capture indices
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": sglang_aux_ids(layers), "use_aux_hidden_state": True},
        **({"parallel_drafting": True, "ptd_token_id": config["head"]["ptd_token_id"]} if _parallel(config) else {}),
        "headstart": config,
    }


def _parallel(config: dict) -> bool:
    """Whether our head (its config.json) drafts in parallel (P-EAGLE)."""
    return bool(config["head"].get("parallel_drafting"))


def speculators_config(config: dict, layer: dict, tensors: dict[str, torch.Tensor], target) -> dict:
    """config.json of the speculators layout: the layer's config nested, the greedy proposal
    method of the head's tree depth, the verifier (the target), and our own config."""
    info = config.get("target") or {}
    depth = int((config["head"].get("tree") or {}).get("depth") or 3)
    draft = _draft_fields(config, tensors)
    return {
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
        "transformer_layer_config": {"model_type": "llama", **layer},
        "draft_vocab_size": draft["draft_vocab_size"],
        "target_hidden_size": draft["target_hidden_size"],
        **_norms(config),  # always written: vLLM's speculators reader defaults norm_before_residual to true
        "fc_norm": False,
        "eagle_aux_hidden_state_layer_ids": vllm_aux_ids(config["head"]["feature_layers"]),
        "tie_word_embeddings": False,
        "torch_dtype": draft["torch_dtype"],
        "headstart": config,
    }


def build_eagle3(config: dict, state: dict, target) -> Exported:
    """The eagle3 layout of our EAGLE-3 checkpoint (the draft layer under midlayer.*)."""
    layer = draft_layer_fields(config, target)
    tensors = eagle3_tensors(config, state, layer, "midlayer")
    return Exported(eagle3_config(config, layer, tensors), tensors)


def build_speculators(config: dict, state: dict, target) -> Exported:
    """The speculators layout of our EAGLE-3 checkpoint (the draft layer under layers.0.*)."""
    if _parallel(config):
        raise ExportError("a head with parallel drafting is served from the eagle3 layout (vLLM: \"parallel_drafting\": "
                          "true); export it with --layout eagle3")
    layer = draft_layer_fields(config, target)
    tensors = eagle3_tensors(config, state, layer, "layers.0")
    return Exported(speculators_config(config, layer, tensors, target), tensors)


def eagle3_required(config: dict) -> list[str]:
    """The tensor names an eagle3-layout loader needs for an exported config."""
    return eagle3_names("midlayer", _has_draft_vocab(config), bool(config.get("parallel_drafting")), bool(config.get("norm_before_fc")))


def speculators_required(config: dict) -> list[str]:
    """The tensor names vLLM's speculators loader needs for an exported config."""
    return eagle3_names("layers.0", _has_draft_vocab(config), input_norm=bool(config.get("norm_before_fc")))


def eagle3_needs_target(config: dict) -> bool:
    """Always: the draft layer's config (heads, head_dim, rope, eps) is the target's."""
    return True
