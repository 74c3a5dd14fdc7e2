"""The Medusa layouts, both ways: "vllm-medusa" (vLLM's Medusa draft model) and "medusa"
(FasterDecoding/Medusa's `medusa_lm_head.safetensors`, also read by TGI and TensorRT-LLM).

Each layout has a builder (our checkpoint -> the layout's config and tensors), the tensor names
its serving loader requires, and an importer (the layout's folder -> a MedusaHeads). They are
registered in heads/export.py's `LAYOUTS`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from headstart.heads.checkpoint import CONFIG_NAME, WEIGHTS_NAME
from headstart.heads.layout import Exported, ExportError
from headstart.heads.reading import (
    CheckpointError,
    check_shapes,
    checked_tensor,
    read_json,
    read_safetensors,
    read_torch,
)
from headstart.heads.results import architecture_options, restore_fields

# ---------------------------------------------------------------------------------------------
# vllm-medusa: vLLM's `Medusa` draft model (vllm/model_executor/models/medusa.py) with its
# `MedusaConfig` (vllm/transformers_utils/configs/medusa.py):
#   blocks.{h}.layers.{l}.weight / .bias   residual block l of head h (bias only read when
#                                           config.medusa_fc_bias is true; ours always has one)
#   lm_heads.{h}.weight                    head h's projection, (truncated_vocab_size, D)
#   lm_heads.0.weight                      the one projection all heads share when
#                                           config.original_lm_head is true
#   token_map                              draft index -> target token id (int64), read only when
#                                           truncated_vocab_size < vocab_size (never written here)
# vLLM 0.32 cannot load a truncated vocabulary: its load_weights sets token_map but never reports it
# loaded, and the engine refuses the checkpoint ("weights were not initialized from checkpoint:
# {'token_map'}"). So every head is written over the full vocabulary (truncated_vocab_size =
# vocab_size, no token_map), and a head with a draft vocabulary becomes the head that ranks every
# token: a head sharing the target's lm_head gets the target's whole lm_head (its rows of the draft
# tokens are the ones it ranked, exactly; the others now compete too), a head with its own
# projections gets its rows for the draft tokens and the target's rows for the others. What vLLM
# serves is then this full-vocabulary head, which importing the folder gives back (`headstart
# serve-check` predicts with it). A head sharing the target's lm_head is written once, as
# lm_heads.0.weight with original_lm_head=true (vLLM cannot point a Medusa draft at the target's).

VLLM_MEDUSA_CONFIG_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "vocab_size",
    "num_heads",
    "num_hidden_layers",
    "max_paths",
    "topk",
    "truncated_vocab_size",
    "medusa_fc_bias",
    "original_lm_head",
    "max_position_embeddings",
    "base_model_name_or_path",
    "torch_dtype",
    "headstart",
)


def _draft_ids(config: dict, state: dict) -> torch.Tensor | None:
    """The draft vocabulary (target ids), or None when the head ranks the whole vocabulary."""
    return state["draft_ids"] if config["head"].get("draft_vocab_size") else None


def _target_rows(target, draft_ids: torch.Tensor | None) -> torch.Tensor:
    w = target.lm_head.weight.detach()
    rows = w if draft_ids is None else w[draft_ids.to(w.device)]
    return rows.contiguous().cpu()


def _full_vocab_rows(rows: torch.Tensor, draft: torch.Tensor | None, target) -> torch.Tensor:
    """(V, D) projection of a head's own (N, D) rows: the target's rows outside the draft vocabulary."""
    if draft is None:
        return rows
    full = _target_rows(target, None).to(rows.dtype).clone()
    full[draft.to(torch.long)] = rows
    return full


def build_vllm_medusa(config: dict, state: dict, target) -> Exported:
    """The vllm-medusa files of our Medusa checkpoint, always over the full vocabulary (see above)."""
    head = config["head"]
    k, n_layers, shared = head["num_heads"], head["num_layers"], head["shared_lm_head"]
    draft = _draft_ids(config, state)
    dtype = state["blocks.0.0.linear.weight"].dtype
    tensors: dict[str, torch.Tensor] = {}
    for h in range(k):
        for layer in range(n_layers):
            tensors[f"blocks.{h}.layers.{layer}.weight"] = state[f"blocks.{h}.{layer}.linear.weight"]
            tensors[f"blocks.{h}.layers.{layer}.bias"] = state[f"blocks.{h}.{layer}.linear.bias"]
    if shared:
        tensors["lm_heads.0.weight"] = _target_rows(target, None).to(dtype)
    else:
        for h in range(k):
            tensors[f"lm_heads.{h}.weight"] = _full_vocab_rows(state[f"lm_heads.{h}.weight"], draft, target)
    info = config["target"] or {}
    out = {
        "architectures": ["MedusaModel"],
        "model_type": "medusa",
        "hidden_size": config["hidden_size"],
        "vocab_size": config["vocab_size"],
        "num_heads": k,
        "num_hidden_layers": n_layers,
        "max_paths": 64,
        "topk": 10,
        "truncated_vocab_size": config["vocab_size"],  # see above: vLLM 0.32 loads no token_map
        "medusa_fc_bias": True,
        "original_lm_head": bool(shared),
        "max_position_embeddings": info.get("max_position_embeddings"),
        "base_model_name_or_path": info.get("name_or_path"),
        "torch_dtype": str(tensors["blocks.0.layers.0.weight"].dtype).removeprefix("torch."),
        # Our own config, so that importing the folder back restores every option (tree, accuracy),
        # less the draft vocabulary, which the served head no longer has.
        "headstart": _without_draft_vocab(config),
    }
    return Exported(out, tensors)


def _without_draft_vocab(config: dict) -> dict:
    """Our config of the full-vocabulary head vLLM serves: no draft vocabulary, and no accuracy
    table when there was one (it was measured over the draft vocabulary)."""
    if not config["head"].get("draft_vocab_size"):
        return config
    head = {k: v for k, v in config["head"].items() if k != "accuracy"}
    return {**config, "head": {**head, "draft_vocab_size": None}}


def vllm_medusa_names(config: dict) -> list[str]:
    """The tensor names vLLM's Medusa loader reads for an exported config."""
    k, n_layers = config["num_heads"], config["num_hidden_layers"]
    names = [f"blocks.{h}.layers.{layer}.{p}" for h in range(k) for layer in range(n_layers) for p in ("weight", "bias")]
    return names + (["lm_heads.0.weight"] if config["original_lm_head"] else [f"lm_heads.{h}.weight" for h in range(k)])


def vllm_medusa_needs_target(config: dict) -> bool:
    """A shared lm_head's rows, or the target's rows outside a draft vocabulary, go into the files."""
    return bool(config["head"]["shared_lm_head"] or config["head"].get("draft_vocab_size"))


# ---------------------------------------------------------------------------------------------
# medusa: FasterDecoding/Medusa's own files (config.json with medusa_num_heads, medusa_num_layers,
# base_model_name_or_path; the state dict of its `medusa_head` ModuleList: `{h}.{l}.linear.weight/.bias`
# and the head's lm_head `{h}.{num_layers}.weight` over the full vocabulary). Its training script
# writes medusa_lm_head.safetensors (TGI reads that name) while its loaders (MedusaModel.from_pretrained)
# read only medusa_lm_head.pt with torch.load: both are written, the .pt with torch.save of the plain
# state dict of tensors (twice the disk; headstart itself reads a .pt only with weights_only=True).
# Its loader sets medusa_num_heads to 5 whatever the uploaded config.json says (they say 2), so the
# importer counts heads and layers from the tensor names, not from the config.

MEDUSA_WEIGHTS = ("medusa_lm_head.safetensors", "medusa_lm_head.pt")


def build_medusa(config: dict, state: dict, target) -> Exported:
    """The official Medusa files of our checkpoint (full vocabulary, one block per head only)."""
    head = config["head"]
    k, n_layers = head["num_heads"], head["num_layers"]
    if _draft_ids(config, state) is not None:
        raise ExportError(
            "the official Medusa layout has no draft vocabulary: its heads project onto the whole "
            "vocabulary. Export this head as 'vllm-medusa' (which keeps the draft vocabulary as "
            "token_map), or train one with head.draft_vocab_size=null."
        )
    if n_layers > 1:
        raise ExportError(
            "the official Medusa code builds a head's blocks as [ResBlock(D)] * num_layers, one block "
            "shared by all layers, so a head with num_layers > 1 cannot be expressed; use 'vllm-medusa'."
        )
    tensors: dict[str, torch.Tensor] = {}
    rows = _target_rows(target, None) if head["shared_lm_head"] else None
    for h in range(k):
        tensors[f"{h}.0.linear.weight"] = state[f"blocks.{h}.0.linear.weight"]
        tensors[f"{h}.0.linear.bias"] = state[f"blocks.{h}.0.linear.bias"]
        w = rows if rows is not None else state[f"lm_heads.{h}.weight"]
        # safetensors refuses tensors that share storage: each head gets its own copy.
        tensors[f"{h}.1.weight"] = w.to(tensors[f"{h}.0.linear.weight"].dtype).clone()
    info = config["target"] or {}
    out = {
        "medusa_num_heads": k,
        "medusa_num_layers": n_layers,
        "base_model_name_or_path": info.get("name_or_path"),
        "max_position_embeddings": info.get("max_position_embeddings"),
        "headstart": config,
    }
    return Exported(out, tensors, weights_name=MEDUSA_WEIGHTS[0], torch_copy=MEDUSA_WEIGHTS[1])


def medusa_names(config: dict) -> list[str]:
    """The tensor names of an official Medusa head file for an exported config."""
    k, n_layers = config["medusa_num_heads"], config["medusa_num_layers"]
    names = [f"{h}.{layer}.linear.{p}" for h in range(k) for layer in range(n_layers) for p in ("weight", "bias")]
    return names + [f"{h}.{n_layers}.weight" for h in range(k)]


def medusa_needs_target(config: dict) -> bool:
    """A head sharing the target's lm_head gets a copy of its rows in each head's projection."""
    return bool(config["head"]["shared_lm_head"])


# ---------------------------------------------------------------------------------------------
# import


def _medusa_heads(
    target, k: int, n_layers: int, blocks, lm_heads, draft_ids, target_info: dict, extra: dict | None = None, shared: bool | None = None
):
    """A MedusaHeads from per-head tensors: blocks[h][l] = (weight, bias); lm_heads[h] (n, D) or
    None (the target's own rows). Unless `shared` says otherwise, projections equal to the target's
    rows become a shared lm_head (nothing stored), others the heads' own copies."""
    from headstart.heads.medusa import MedusaHeads

    d, v = target.hidden_size, target.vocab_size
    rows = _target_rows(target, draft_ids)
    same = all(w is None or (w.shape == rows.shape and torch.equal(w.to(rows.dtype), rows)) for w in lm_heads)
    shared = same if shared is None else (shared and same)
    options = dict(extra or {})
    options.update(
        num_heads=k,
        num_layers=n_layers,
        shared_lm_head=shared,
        hidden_size=d,
        vocab_size=v,
        draft_vocab_size=None if draft_ids is None else int(draft_ids.numel()),
    )
    heads = MedusaHeads.from_config(options, target)
    state = {"draft_ids": draft_ids if draft_ids is not None else torch.arange(v)}
    for h in range(k):
        for layer in range(n_layers):
            weight, bias = blocks[h][layer]
            state[f"blocks.{h}.{layer}.linear.weight"] = weight
            state[f"blocks.{h}.{layer}.linear.bias"] = bias if bias is not None else torch.zeros(d, dtype=weight.dtype)
        if not shared:
            state[f"lm_heads.{h}.weight"] = lm_heads[h] if lm_heads[h] is not None else rows
    dtype = state["blocks.0.0.linear.weight"].dtype
    heads.to(dtype)
    heads.load_state_dict({k_: t.to(dtype) if t.is_floating_point() else t for k_, t in state.items()}, strict=True)
    heads.target_info = target_info
    return heads.to(target.device).eval().requires_grad_(False)


def import_vllm_medusa(folder: Path, target):
    """A MedusaHeads from a vllm-medusa folder (ours restores every option from its `headstart` block)."""
    keys = ("architectures", "hidden_size", "vocab_size", "num_heads", "num_hidden_layers")
    config = read_json(folder / CONFIG_NAME, keys)
    ours = config.get("headstart") or {}
    check_shapes(config["hidden_size"], config["vocab_size"], target, folder)
    state = read_safetensors(folder / WEIGHTS_NAME)
    k, n_layers, d = config["num_heads"], config["num_hidden_layers"], config["hidden_size"]
    v = config["vocab_size"]
    n = config.get("truncated_vocab_size") or v
    draft = None
    if n < v:
        draft = checked_tensor(state, "token_map", (n,), folder).to(torch.long)
    bias = config.get("medusa_fc_bias", False)
    blocks = [
        [
            (
                checked_tensor(state, f"blocks.{h}.layers.{layer}.weight", (d, d), folder),
                checked_tensor(state, f"blocks.{h}.layers.{layer}.bias", (d,), folder) if bias else None,
            )
            for layer in range(n_layers)
        ]
        for h in range(k)
    ]
    names = ["lm_heads.0.weight"] * k if config.get("original_lm_head") else [f"lm_heads.{h}.weight" for h in range(k)]
    lm_heads = []
    for name in names:
        w = state.get(name)
        if w is None:
            raise CheckpointError(f"{folder}: the tensor {name!r} is missing")
        if draft is not None and w.shape[0] == v:  # full-vocabulary rows: vLLM keeps the token_map rows
            w = w[draft]
        lm_heads.append(checked_tensor({name: w}, name, (n, d), folder))
    info = ours.get("target") or {"name_or_path": config.get("base_model_name_or_path"), "max_position_embeddings": config.get("max_position_embeddings")}
    saved = ours.get("head") or {}  # the head's options and fields as its config.json held them
    extra = {k_: v_ for k_, v_ in architecture_options(saved).items() if k_ not in ("num_heads", "num_layers", "shared_lm_head", "draft_vocab_size")}
    head = _medusa_heads(target, k, n_layers, blocks, lm_heads, draft, info, extra, saved.get("shared_lm_head"))
    restore_fields(head, saved, str(folder / CONFIG_NAME))
    return head


def import_medusa(folder: Path, target):
    """A MedusaHeads from FasterDecoding/Medusa's files (safetensors, or the .pt read with weights_only)."""
    config = read_json(folder / CONFIG_NAME)
    safetensors_path, pt_path = (folder / name for name in MEDUSA_WEIGHTS)
    if safetensors_path.is_file():
        state = read_safetensors(safetensors_path)
    elif pt_path.is_file():
        state = read_torch(pt_path)
    else:
        raise CheckpointError(f"{folder} has neither {MEDUSA_WEIGHTS[0]} nor {MEDUSA_WEIGHTS[1]}")
    prefix = "medusa_head."
    if state and all(name.startswith(prefix) for name in state):
        state = {name[len(prefix) :]: t for name, t in state.items()}
    where = safetensors_path if safetensors_path.is_file() else pt_path
    k, n_layers = _medusa_counts(state, config, where)
    d, v = target.hidden_size, target.vocab_size
    blocks = [
        [
            (
                checked_tensor(state, f"{h}.{layer}.linear.weight", (d, d), where),
                checked_tensor(state, f"{h}.{layer}.linear.bias", (d,), where),
            )
            for layer in range(n_layers)
        ]
        for h in range(k)
    ]
    # Medusa-1 heads carry their own lm_head as layer num_layers; the legacy layout had none.
    lm_heads = [checked_tensor(state, f"{h}.{n_layers}.weight", (v, d), where) if f"{h}.{n_layers}.weight" in state else None for h in range(k)]
    info = {"name_or_path": config.get("base_model_name_or_path"), "max_position_embeddings": config.get("max_position_embeddings")}
    return _medusa_heads(target, k, n_layers, blocks, lm_heads, None, info)


def _medusa_counts(state: dict, config: dict, where: Path) -> tuple[int, int]:
    """(heads, layers) of an official Medusa state dict, counted from its `{h}.{l}.linear.weight`
    names: FasterDecoding's uploaded configs say medusa_num_heads 2 while the files hold 5 heads."""
    blocks = [name.split(".")[:2] for name in state if name.endswith(".linear.weight")]
    pairs = {(int(h), int(layer)) for h, layer in blocks if h.isdigit() and layer.isdigit()}
    k = len({h for h, _ in pairs})
    n_layers = len({layer for h, layer in pairs if h == 0})
    if not k or pairs != {(h, layer) for h in range(k) for layer in range(n_layers)}:
        raise CheckpointError(
            f"{where}: expected Medusa blocks named '{{head}}.{{layer}}.linear.weight' for heads 0..K-1 and layers "
            f"0..L-1; found {sorted(pairs)[:6]}. It is not a FasterDecoding/Medusa head file."
        )
    said = (config.get("medusa_num_heads"), config.get("medusa_num_layers"))
    if said != (k, n_layers):
        warnings.warn(f"{where.parent / CONFIG_NAME} says medusa_num_heads={said[0]}, medusa_num_layers={said[1]}; "
                      f"the weights hold {k} heads of {n_layers} layers, which are imported", stacklevel=3)
    return k, n_layers

