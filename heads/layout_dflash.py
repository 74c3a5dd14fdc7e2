"""The "dflash" layout: the folder vLLM loads with `"method": "dflash"` (`DFlashDraftModel`,
vllm/model_executor/models/qwen3_dflash.py), and importing it back.

config.json is a Qwen3 config of the N draft layers (model_type qwen3, the target's widths, heads,
head_dim, eps, RoPE and max_position_embeddings; SiLU; every layer full attention, non-causal in
vLLM since no layer is a sliding one) plus
  block_size                    the query slots per block (serve with num_speculative_tokens = block_size - 1)
  dflash_config                 {"target_layer_ids": ours (outputs of those layers; vLLM adds 1 to capture
                                 the stream entering the next layer, the same tensor), "mask_token_id"}
  target_hidden_size            the width of each target feature (fc reads len(target_layer_ids) of them)
  headstart                     our own config, for importing back
and model.safetensors holds, for i < N,
  layers.{i}.self_attn.{q,k,v,o}_proj.weight    layers.{i}.self_attn.{q,k}_norm.weight
  layers.{i}.mlp.{gate,up,down}_proj.weight     layers.{i}.{input,post_attention}_layernorm.weight
  fc.weight (D x F·D)   hidden_norm.weight   norm.weight
vLLM prefixes them with model., stacks q/k/v and gate/up, and shares the target's embed_tokens and
lm_head, which the file does not hold (the head's draft vocabulary is the whole vocabulary). No
mask_embedding.pt: the mask slots read the target's embedding of mask_token_id, as ours do.
"""

from __future__ import annotations

from pathlib import Path

from headstart.heads.checkpoint import CONFIG_NAME, WEIGHTS_NAME
from headstart.heads.layout import Exported, ExportError
from headstart.heads.layout_eagle3 import draft_layer_fields
from headstart.heads.reading import CheckpointError, check_shapes, checked_tensor, read_json, read_safetensors
from headstart.heads.results import architecture_options, restore_fields

DFLASH_ARCHITECTURE = "DFlashDraftModel"
#: one draft layer's tensors (relative to layers.{i}.)
LAYER_NAMES = (
    *(f"self_attn.{p}_proj.weight" for p in "qkvo"),
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    *(f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")),
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
)
OTHER_NAMES = ("fc.weight", "hidden_norm.weight", "norm.weight")
VLLM_DEFAULT_THETA = 1000000.0  # the RoPE base vLLM's DFlash layers take when the config names none
DFLASH_CONFIG_KEYS = (
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
    "max_position_embeddings",
    "vocab_size",
    "layer_types",
    "block_size",
    "dflash_config",
    "target_hidden_size",
    "torch_dtype",
    "headstart",
)


def dflash_names(config: dict) -> list[str]:
    """The tensor names vLLM's DFlash loader needs for an exported config (and nothing else)."""
    return [*OTHER_NAMES, *(f"layers.{i}.{n}" for i in range(int(config["num_hidden_layers"])) for n in LAYER_NAMES)]


def build_dflash(config: dict, state: dict, target) -> Exported:
    """The dflash layout of our DFlash checkpoint: the same tensor names, the config vLLM reads."""
    head = config["head"]
    d, n = config["hidden_size"], int(head["draft_layers"])
    layer = {**draft_layer_fields(config, target), "num_hidden_layers": n}  # the target's shapes and RoPE
    expected = {
        "fc.weight": (d, len(head["target_layer_ids"]) * d),
        "layers.0.self_attn.q_proj.weight": (layer["num_attention_heads"] * layer["head_dim"], d),
        "layers.0.self_attn.k_proj.weight": (layer["num_key_value_heads"] * layer["head_dim"], d),
        "layers.0.mlp.gate_proj.weight": (layer["intermediate_size"], d),
    }
    for name, shape in expected.items():
        if name not in state:
            raise ExportError(f"the head's weights lack {name!r}; it is not a complete DFlash head")
        if tuple(state[name].shape) != shape:
            raise ExportError(f"{name} has shape {tuple(state[name].shape)}; the target's layer config needs {shape}")
    exported = {
        "architectures": [DFLASH_ARCHITECTURE],
        "model_type": "qwen3",
        **layer,
        "layer_types": ["full_attention"] * n,
        "use_sliding_window": False,
        "block_size": int(head["block_size"]),
        "dflash_config": {"target_layer_ids": list(head["target_layer_ids"]), "mask_token_id": int(head["mask_token_id"])},
        "target_hidden_size": d,
        "torch_dtype": str(state["fc.weight"].dtype).removeprefix("torch."),
        "headstart": config,
    }
    return Exported(exported, {name: state[name] for name in dflash_names(exported) if name in state})


def dflash_needs_target(config: dict) -> bool:
    """Always: the draft layers' config (heads, head_dim, RoPE, eps) is the target's."""
    return True


def import_dflash(folder: Path, target):
    """A DFlashHead from a dflash-layout folder: ours (its `headstart` block), or another's whose layers have
    the target's shapes (options from dflash_config, num_hidden_layers and block_size; its own RoPE)."""
    from headstart.decode.dynamic import DynamicTreeSpec
    from headstart.heads.dflash import DEFAULT_BLOCK_SIZE, DFlashHead
    from headstart.heads.import_eagle import draft_rope

    config = read_json(folder / CONFIG_NAME, ("hidden_size", "vocab_size", "num_hidden_layers", "dflash_config"))
    check_shapes(config.get("target_hidden_size") or config["hidden_size"], config["vocab_size"], target, folder)
    saved = (config.get("headstart") or {}).get("head")  # our own block: options and fields as config.json held them
    if saved:
        options = architecture_options(saved)
    else:
        dflash = config["dflash_config"]
        if "target_layer_ids" not in dflash or "mask_token_id" not in dflash:
            raise CheckpointError(f"{folder / CONFIG_NAME}: dflash_config lacks target_layer_ids or mask_token_id")
        size = int(config.get("block_size") or DEFAULT_BLOCK_SIZE)
        options = {
            "draft_vocab_size": None,
            "target_layer_ids": list(dflash["target_layer_ids"]),
            "draft_layers": int(config["num_hidden_layers"]),
            "block_size": size,
            "mask_token_id": int(dflash["mask_token_id"]),
            "model_type": target.config.model_type,
            "rope_parameters": draft_rope({"rope_theta": VLLM_DEFAULT_THETA, **config}),  # what vLLM serves it with
        }
    options.update(hidden_size=target.hidden_size, vocab_size=target.vocab_size)
    head = DFlashHead(options, target)
    tree = DynamicTreeSpec(depth=min(DynamicTreeSpec().depth, head.block_size - 1)).to_json()
    restore_fields(head, saved or {"tree": tree}, str(folder / CONFIG_NAME))
    weights = folder / WEIGHTS_NAME
    state = read_safetensors(weights)
    expected = head.state_dict()
    unused = sorted(set(state) - set(expected))
    if unused:  # e.g. an own embed_tokens or lm_head: ours are the target's
        raise CheckpointError(f"{weights}: tensors {unused[:5]} have no place in headstart's DFlash head, which shares "
                              "the target's embedding and lm_head")
    head.load_state_dict({k: checked_tensor(state, k, tuple(v.shape), weights) for k, v in expected.items()})
    head.target_info = (config.get("headstart") or {}).get("target") or {
        "name_or_path": None, "max_position_embeddings": config.get("max_position_embeddings")}
    return head.to(target.device).eval()
