"""Head checkpoints in the layouts that serving engines and other projects read, and back.

    export(heads, target, "out/vllm", layout="vllm-medusa")     # a folder vLLM loads as a draft
    heads = import_heads("FasterDecoding/medusa-vicuna-7b-v1.3", target)   # official Medusa files

A layout is one entry of `LAYOUTS`: the head kinds it fits, a pure function from our checkpoint
(config.json as a dict, the state dict) and the target to the layout's config and tensors, and
the tensor names its serving loader requires. Serving loaders skip unknown names silently and keep
missing ones at their initial values, so `export` checks the tensors against that list before
anything is written, then writes the whole folder beside its final name and renames it into place
(headstart/files.py). An existing folder is replaced only when an earlier export wrote it (its
marker file lists every file in it) or with `force`, and never when it holds the head being
exported or a training run's output.

Layouts here: "headstart" (our own checkpoint), "vllm-medusa" (vLLM's Medusa draft model) and
"medusa" (FasterDecoding/Medusa's `medusa_lm_head.safetensors`, also read by TGI and TensorRT-LLM).
The EAGLE layouts live in heads/export_eagle.py and register themselves here: "eagle3"
(SGLang/vLLM/TensorRT-LLM `LlamaForCausalLMEagle3`) and "speculators" (vLLM speculators), with
importers for both and for the official EAGLE-1 layout ("eagle").

Importing reads safetensors, or `.pt` files with `torch.load(weights_only=True)` only; nothing is
ever unpickled beyond tensors.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from headstart.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from headstart.errors import HeadstartError
from headstart.files import replace_refusal, sha256_file, staged_folder, write_json, write_safetensors
from headstart.heads.checkpoint import (
    CHECKSUMS,
    CONFIG_NAME,
    WEIGHTS_NAME,
    CheckpointError,
    check_options,
    check_target,
    head_config,
    head_state,
    read_config,
    read_weights,
    resolve_folder,
    verify_checksum,
)


class ExportError(HeadstartError):
    """A head that cannot be written in the layout asked for."""


@dataclass
class Exported:
    """A layout's files for one head: config.json's content and the tensors of one weights file
    (`torch_copy`: the same tensors also written with torch.save, for loaders that read only that)."""

    config: dict
    tensors: dict[str, torch.Tensor]
    weights_name: str = WEIGHTS_NAME
    torch_copy: str | None = None


@dataclass(frozen=True)
class Layout:
    """One export layout. `build(config, state, target)` maps our checkpoint to the layout;
    `required(exported config)` lists the tensor names the layout's loader needs (and nothing else);
    `needs_target(config)` says whether the target's weights (lm_head rows) go into the files."""

    kinds: tuple[str, ...]
    build: Callable[[dict, dict, object], Exported]
    required: Callable[[dict], list[str]]
    needs_target: Callable[[dict], bool] = lambda config: False
    config_keys: tuple[str, ...] = ()
    description: str = ""


# ---------------------------------------------------------------------------------------------
# headstart: our own checkpoint (config.json + model.safetensors), as save_pretrained writes it.


def _build_headstart(config: dict, state: dict, target) -> Exported:
    return Exported(dict(config), dict(state))


def _required_headstart(config: dict) -> list[str]:
    # The head class itself is the authority on its tensor names; load_heads checks them.
    return []


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


def _build_vllm_medusa(config: dict, state: dict, target) -> Exported:
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


def _build_medusa(config: dict, state: dict, target) -> Exported:
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
    k, n_layers = config["medusa_num_heads"], config["medusa_num_layers"]
    names = [f"{h}.{layer}.linear.{p}" for h in range(k) for layer in range(n_layers) for p in ("weight", "bias")]
    return names + [f"{h}.{n_layers}.weight" for h in range(k)]


LAYOUTS: dict[str, Layout] = {
    "headstart": Layout(
        kinds=(),  # every kind
        build=_build_headstart,
        required=_required_headstart,
        description="headstart's own checkpoint (config.json + model.safetensors)",
    ),
    "vllm-medusa": Layout(
        kinds=("medusa",),
        build=_build_vllm_medusa,
        required=vllm_medusa_names,
        # a shared lm_head's rows, or the target's rows outside a draft vocabulary
        needs_target=lambda config: bool(config["head"]["shared_lm_head"] or config["head"].get("draft_vocab_size")),
        config_keys=VLLM_MEDUSA_CONFIG_KEYS,
        description="vLLM's Medusa draft model (speculative_config method 'medusa')",
    ),
    "medusa": Layout(
        kinds=("medusa",),
        build=_build_medusa,
        required=medusa_names,
        needs_target=lambda config: bool(config["head"]["shared_lm_head"]),
        config_keys=("medusa_num_heads", "medusa_num_layers", "base_model_name_or_path"),
        description="FasterDecoding/Medusa's medusa_lm_head.safetensors (also TGI, TensorRT-LLM)",
    ),
    # "eagle3" and "speculators": heads/export_eagle.py (registered at the end of this module).
}


# ---------------------------------------------------------------------------------------------
# export


def _checkpoint(heads_or_folder, target) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config, state) of a head module or a headstart head folder."""
    if isinstance(heads_or_folder, torch.nn.Module):
        return head_config(heads_or_folder, target), head_state(heads_or_folder)
    folder = Path(heads_or_folder)
    config = read_config(folder)
    check_options(folder, config)
    return config, read_weights(folder, config)


def needs_target(heads_or_folder, layout: str) -> bool:
    """Whether exporting to `layout` copies target weights (lm_head rows), so needs the target."""
    if isinstance(heads_or_folder, torch.nn.Module):
        config = head_config(heads_or_folder)
    else:
        config = read_config(Path(heads_or_folder))
    return _layout(layout, config["kind"]).needs_target(config)


def _layout(name: str, kind: str) -> Layout:
    if name not in LAYOUTS:
        raise ExportError(f"unknown export layout {name!r}; known layouts: {', '.join(sorted(LAYOUTS))}")
    layout = LAYOUTS[name]
    if layout.kinds and kind not in layout.kinds:
        fits = [n for n, lay in LAYOUTS.items() if not lay.kinds or kind in lay.kinds]
        raise ExportError(
            f"the layout {name!r} holds {'/'.join(layout.kinds)} heads, not heads of kind {kind!r}. "
            f"Layouts for {kind!r} heads: {', '.join(fits)}."
        )
    return layout


def export(
    heads_or_folder,
    target,
    folder: str | Path,
    layout: str = "headstart",
    dtype: torch.dtype | None = None,
    merged_target: str | None = None,
    force: bool = False,
) -> Path:
    """Write a head (module or headstart folder) to `folder` in `layout`; returns the folder.

    `target` (a headstart Target) is checked against the head and supplies the lm_head rows that
    layouts without a shared-lm_head notion need; it may be None when `needs_target` is False.
    `dtype` casts floating tensors (e.g. torch.bfloat16 for serving). Nothing is written unless
    every required tensor and config key is present; the folder appears complete or not at all.

    An existing `folder` is replaced only when it is empty or an earlier export (its marker file
    lists all it holds), or with `force`; never when it holds the head being exported or a
    training run's output (checkpoint-*, train_summary.json, a head checkpoint), even with `force`.

    A Medusa-2 head (trained with a LoRA adapter on the target) verifies against the adapted
    target. In our layout its adapter files travel with it; serving layouts hold no adapter, so
    they are written only for a merged target (`merged_target`: the folder it was saved to, which
    the exported config then names as the head's target).
    """
    source = None if isinstance(heads_or_folder, torch.nn.Module) else Path(heads_or_folder)
    refusal = replace_refusal(folder, force, keep=[source] if source is not None else [])
    if refusal:
        raise ExportError(f"not exporting to {folder}: {refusal}")
    config, state = _checkpoint(heads_or_folder, target)
    lay = _layout(layout, config["kind"])
    copied = []  # files of the head folder that go into the export as they are
    if config.get("adapter"):
        if merged_target is not None:
            config = {k: v for k, v in config.items() if k != "adapter"}
            config["target"] = {**config["target"], "name_or_path": str(merged_target), "merged_adapter": True}
        elif layout != "headstart":
            raise ExportError(
                f"this Medusa-2 head verifies against its target with a LoRA adapter, which the {layout!r} layout "
                "cannot hold: merge the adapter into the target (headstart export --merged-target DIR) and serve the "
                "head with the merged model"
            )
        elif source is None:
            raise ExportError("export a Medusa-2 head from its saved folder (the adapter files travel with it)")
        else:
            verify_checksum(source, config, ADAPTER_WEIGHTS)
            copied = [source / ADAPTER_CONFIG, source / ADAPTER_WEIGHTS]
    if target is not None:  # shapes must agree; another target's name is the user's choice
        check_target(config, target, str(heads_or_folder), allow_other_target=True)
    elif lay.needs_target(config):
        why = (
            "its draft layer's config (heads, head_dim, rope, max_position_embeddings) is the target's"
            if config["kind"] == "eagle3"
            else "the layout must hold the rows of the target's lm_head that the head shares"
        )
        raise ExportError(
            f"the {layout!r} layout of this {config['kind']} head needs the target ({why}): pass the target "
            f"({(config.get('target') or {}).get('name_or_path')!r})."
        )
    # The checksums are the written files' own (our layout) or none (a serving layout's config).
    config = {k: v for k, v in config.items() if k != CHECKSUMS}
    out = lay.build(config, state, target)
    if dtype is not None:
        out.tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in out.tensors.items()}
        if "torch_dtype" in out.config:
            out.config["torch_dtype"] = str(dtype).removeprefix("torch.")
    _check_exported(out, lay, layout)
    with staged_folder(folder, written_by=f"headstart export --layout {layout}") as tmp:
        checksums = {out.weights_name: write_safetensors(tmp / out.weights_name, out.tensors, {"format": "pt", "layout": layout})}
        if out.torch_copy:
            torch.save({k: v.detach().contiguous().cpu() for k, v in out.tensors.items()}, tmp / out.torch_copy)
        for path in copied:
            shutil.copyfile(path, tmp / path.name)
        if copied:
            checksums[ADAPTER_WEIGHTS] = sha256_file(tmp / ADAPTER_WEIGHTS)
        if layout == "headstart":
            out.config[CHECKSUMS] = checksums
        write_json(tmp / CONFIG_NAME, out.config)
    return Path(folder)


def _check_exported(out: Exported, lay: Layout, layout: str) -> None:
    missing_keys = [k for k in lay.config_keys if k not in out.config]
    if missing_keys:
        raise ExportError(f"{layout}: the exported config lacks {missing_keys}; nothing was written")
    required = lay.required(out.config)
    if required:
        missing = sorted(set(required) - set(out.tensors))
        unexpected = sorted(set(out.tensors) - set(required))
        if missing or unexpected:
            raise ExportError(
                f"{layout}: the serving loader needs {missing[:5]} (missing) and would silently skip "
                f"{unexpected[:5]} (unexpected); nothing was written"
            )


# ---------------------------------------------------------------------------------------------
# import


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({e}); it is corrupt, truncated, or another "
            f"format under a .safetensors name"
        ) from None


def _read_torch(path: Path) -> dict[str, torch.Tensor]:
    """A `.pt` state dict, loaded with weights_only=True (tensors and plain containers only)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError, RuntimeError (zip), EOFError...: all mean "not loadable safely"
        raise CheckpointError(
            f"{path} cannot be loaded with torch.load(weights_only=True): {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}. headstart never unpickles arbitrary objects; "
            f"convert the file to safetensors where it was made, or check that it is complete."
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} holds {type(state).__name__}, not a state dict of tensors")
    return state


def _read_json(path: Path, required: tuple[str, ...]) -> dict:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    missing = [k for k in required if k not in config]
    if missing:
        raise CheckpointError(f"{path} lacks the keys {missing}; it is not a complete checkpoint of this layout")
    return config


def _tensor(state: dict, name: str, shape: tuple[int, ...], where: Path) -> torch.Tensor:
    if name not in state:
        raise CheckpointError(f"{where}: the tensor {name!r} is missing")
    t = state[name]
    if tuple(t.shape) != shape:
        raise CheckpointError(f"{where}: {name} has shape {tuple(t.shape)}, expected {shape}")
    return t


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


def _import_headstart(folder: Path, target):
    from headstart.heads.checkpoint import load_heads

    return load_heads(folder, target)


def _import_vllm_medusa(folder: Path, target):
    keys = ("architectures", "hidden_size", "vocab_size", "num_heads", "num_hidden_layers")
    config = _read_json(folder / CONFIG_NAME, keys)
    ours = config.get("headstart") or {}
    _check_shapes(config["hidden_size"], config["vocab_size"], target, folder)
    state = _read_safetensors(folder / WEIGHTS_NAME)
    k, n_layers, d = config["num_heads"], config["num_hidden_layers"], config["hidden_size"]
    v = config["vocab_size"]
    n = config.get("truncated_vocab_size") or v
    draft = None
    if n < v:
        draft = _tensor(state, "token_map", (n,), folder).to(torch.long)
    bias = config.get("medusa_fc_bias", False)
    blocks = [
        [
            (
                _tensor(state, f"blocks.{h}.layers.{layer}.weight", (d, d), folder),
                _tensor(state, f"blocks.{h}.layers.{layer}.bias", (d,), folder) if bias else None,
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
        lm_heads.append(_tensor({name: w}, name, (n, d), folder))
    info = ours.get("target") or {"name_or_path": config.get("base_model_name_or_path"), "max_position_embeddings": config.get("max_position_embeddings")}
    extra = {k_: v_ for k_, v_ in (ours.get("head") or {}).items() if k_ not in ("num_heads", "num_layers", "shared_lm_head", "draft_vocab_size")}
    shared = (ours.get("head") or {}).get("shared_lm_head")
    return _medusa_heads(target, k, n_layers, blocks, lm_heads, draft, info, extra, shared)


def _import_medusa(folder: Path, target):
    config = _read_json(folder / CONFIG_NAME, ())
    safetensors_path, pt_path = (folder / name for name in MEDUSA_WEIGHTS)
    if safetensors_path.is_file():
        state = _read_safetensors(safetensors_path)
    elif pt_path.is_file():
        state = _read_torch(pt_path)
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
                _tensor(state, f"{h}.{layer}.linear.weight", (d, d), where),
                _tensor(state, f"{h}.{layer}.linear.bias", (d,), where),
            )
            for layer in range(n_layers)
        ]
        for h in range(k)
    ]
    # Medusa-1 heads carry their own lm_head as layer num_layers; the legacy layout had none.
    lm_heads = [_tensor(state, f"{h}.{n_layers}.weight", (v, d), where) if f"{h}.{n_layers}.weight" in state else None for h in range(k)]
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


def _check_shapes(hidden: int, vocab: int, target, folder: Path) -> None:
    if hidden != target.hidden_size or vocab != target.vocab_size:
        raise CheckpointError(
            f"{folder} was made for hidden size {hidden} and {vocab} tokens; the target {target.name!r} "
            f"has {target.hidden_size} and {target.vocab_size}"
        )


#: layout name -> importer(folder, target) -> head. "eagle3", "speculators" and "eagle" (yuhuili/EAGLE's
#: pytorch_model.bin / model.safetensors) are registered by heads/export_eagle.py.
IMPORTERS: dict[str, Callable] = {
    "headstart": _import_headstart,
    "vllm-medusa": _import_vllm_medusa,
    "medusa": _import_medusa,
}


def detect_layout(folder: str | Path) -> str:
    """Which importable layout a folder holds, from its config.json and file names."""
    folder = Path(folder)
    config = _read_json(folder / CONFIG_NAME, ())
    if "format_version" in config and "kind" in config:
        return "headstart"
    architectures = config.get("architectures") or []
    if config.get("model_type") == "medusa" or "MedusaModel" in architectures:
        return "vllm-medusa"
    if "speculators_model_type" in config:
        return "speculators"
    if any("Eagle3" in a for a in architectures) or "eagle_config" in config:
        return "eagle3"
    if "medusa_num_heads" in config or any((folder / n).is_file() for n in MEDUSA_WEIGHTS):
        return "medusa"
    if config.get("num_hidden_layers") == 1 and any((folder / n).is_file() for n in (WEIGHTS_NAME, "pytorch_model.bin")):
        # A one-layer LlamaConfig: official EAGLE-1, or EAGLE-3 (EAGLE's traineagle3/config.json says
        # LlamaForCausalLM too): the weights tell them apart.
        from headstart.heads.export_eagle import eagle_layout

        return eagle_layout(folder, config)
    raise CheckpointError(
        f"{folder}: cannot tell which layout this is (config keys: {sorted(config)[:8]}); pass layout= "
        f"one of {sorted(IMPORTERS)}"
    )


def import_heads(path_or_repo_id: str | Path, target, layout: str = "auto", revision: str | None = None):
    """Load a head written in another layout (or ours) as a headstart head, checked against `target`.

    A Hub repo id is downloaded first (config.json and the weights files only).
    """
    folder = resolve_folder(path_or_repo_id, revision, [CONFIG_NAME, WEIGHTS_NAME, *MEDUSA_WEIGHTS, "pytorch_model.bin"])
    if layout == "auto":
        layout = detect_layout(folder)
    if layout not in IMPORTERS:
        raise CheckpointError(f"cannot import the layout {layout!r}; importable layouts: {', '.join(sorted(IMPORTERS))}")
    return IMPORTERS[layout](folder, target)


# The EAGLE layouts and importers use the helpers above and add themselves to LAYOUTS / IMPORTERS.
import headstart.heads.export_eagle  # noqa: E402, F401
