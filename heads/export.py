"""Head checkpoints in the layouts that serving engines and other projects read, and back.

    export(heads, target, "out/vllm", layout="vllm-medusa")     # a folder vLLM loads as a draft
    heads = import_heads("FasterDecoding/medusa-vicuna-7b-v1.3", target)   # official Medusa files

A layout is one entry of `LAYOUTS` (heads/layout.py's `Layout`): the head kinds it fits, a pure
function from our checkpoint (config.json as a dict, the state dict) and the target to the
layout's config and tensors, the tensor names its serving loader requires, and its importer.
Serving loaders skip unknown names silently and keep missing ones at their initial values, so
`export` checks the tensors against that list before anything is written, then writes the whole
folder beside its final name and renames it into place (headstart/files.py). An existing folder is
replaced only when an earlier export wrote it (its marker file lists every file in it) or with
`force`, and never when it holds the head being exported or a training run's output.

Layouts (one module per family; this module lists them all, in `LAYOUTS` and `IMPORTERS`):
- "headstart": our own checkpoint (here);
- "vllm-medusa" (vLLM's Medusa draft model) and "medusa" (FasterDecoding/Medusa's
  `medusa_lm_head.safetensors`, also read by TGI and TensorRT-LLM): heads/layout_medusa.py;
- "eagle3" (SGLang/vLLM/TensorRT-LLM `LlamaForCausalLMEagle3`) and "speculators" (vLLM
  speculators): heads/layout_eagle3.py, imported by heads/import_eagle.py, which also imports the
  official EAGLE-1 layout ("eagle", import only);
- "dflash" (vLLM's DFlash draft, `DFlashDraftModel`): heads/layout_dflash.py.

Importing reads through heads/reading.py: safetensors, or `.pt` files with
`torch.load(weights_only=True)` only; nothing is ever unpickled beyond tensors.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from headstart.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from headstart.files import replace_refusal, sha256_file, space_for, staged_folder, write_json, write_safetensors
from headstart.heads import import_eagle, layout_dflash, layout_eagle3, layout_medusa
from headstart.heads.checkpoint import (
    CHECKSUMS,
    CONFIG_NAME,
    WEIGHTS_NAME,
    check_options,
    check_target,
    head_config,
    head_state,
    load_heads,
    read_config,
    read_weights,
    resolve_folder,
    verify_checksum,
)
from headstart.heads.layout import Exported, ExportError, Layout
from headstart.heads.reading import CheckpointError, read_json
from headstart.lock import output_lock

__all__ = ["LAYOUTS", "IMPORTERS", "Exported", "ExportError", "Layout", "detect_layout", "export", "import_heads", "needs_target"]


def _build_headstart(config: dict, state: dict, target) -> Exported:
    """Our own checkpoint (config.json + model.safetensors), as save_pretrained writes it."""
    return Exported(dict(config), dict(state))


def _required_headstart(config: dict) -> list[str]:
    # The head class itself is the authority on its tensor names; load_heads checks them.
    return []


def _import_headstart(folder: Path, target):
    """Our own folder: loaded, and checked against the target, as `load_heads` does."""
    return load_heads(folder, target)


#: every layout headstart writes: name -> its builder, required names, importer and needs
LAYOUTS: dict[str, Layout] = {
    "headstart": Layout(
        kinds=(),  # every kind
        build=_build_headstart,
        required=_required_headstart,
        load=_import_headstart,
        description="headstart's own checkpoint (config.json + model.safetensors)",
    ),
    "vllm-medusa": Layout(
        kinds=("medusa",),
        build=layout_medusa.build_vllm_medusa,
        required=layout_medusa.vllm_medusa_names,
        load=layout_medusa.import_vllm_medusa,
        needs_target=layout_medusa.vllm_medusa_needs_target,
        config_keys=layout_medusa.VLLM_MEDUSA_CONFIG_KEYS,
        description="vLLM's Medusa draft model (speculative_config method 'medusa')",
    ),
    "medusa": Layout(
        kinds=("medusa",),
        build=layout_medusa.build_medusa,
        required=layout_medusa.medusa_names,
        load=layout_medusa.import_medusa,
        needs_target=layout_medusa.medusa_needs_target,
        config_keys=("medusa_num_heads", "medusa_num_layers", "base_model_name_or_path"),
        description="FasterDecoding/Medusa's medusa_lm_head.safetensors (also TGI, TensorRT-LLM)",
    ),
    "eagle3": Layout(
        kinds=("eagle3",),
        build=layout_eagle3.build_eagle3,
        required=layout_eagle3.eagle3_required,
        load=import_eagle.import_eagle3,
        needs_target=layout_eagle3.eagle3_needs_target,
        config_keys=layout_eagle3.EAGLE3_CONFIG_KEYS,
        description="SGLang / vLLM / TensorRT-LLM EAGLE-3 draft (LlamaForCausalLMEagle3)",
    ),
    "speculators": Layout(
        kinds=("eagle3",),
        build=layout_eagle3.build_speculators,
        required=layout_eagle3.speculators_required,
        load=import_eagle.import_speculators,
        needs_target=layout_eagle3.eagle3_needs_target,
        config_keys=layout_eagle3.SPECULATORS_CONFIG_KEYS,
        description="vLLM speculators EAGLE-3 (speculators_model_type eagle3)",
    ),
    "dflash": Layout(
        kinds=("dflash",),
        build=layout_dflash.build_dflash,
        required=layout_dflash.dflash_names,
        load=layout_dflash.import_dflash,
        needs_target=layout_dflash.dflash_needs_target,
        config_keys=layout_dflash.DFLASH_CONFIG_KEYS,
        description="vLLM's DFlash draft (DFlashDraftModel, speculative_config method 'dflash')",
    ),
}

#: every layout headstart reads: name -> importer(folder, target) -> head. Those it writes, and the
#: official EAGLE-1 layout (yuhuili/EAGLE's pytorch_model.bin / model.safetensors), read only.
IMPORTERS: dict[str, Callable[[Path, object], torch.nn.Module]] = {
    **{name: layout.load for name, layout in LAYOUTS.items()},
    "eagle": import_eagle.import_eagle1,
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

    The export holds the lock on `folder` throughout (headstart/lock.py): a second one into it is refused.
    """
    with output_lock(folder, "--out", "headstart export"):
        return _export(heads_or_folder, target, Path(folder), layout, dtype, merged_target, force)


def _export(heads_or_folder, target, folder: Path, layout: str, dtype: torch.dtype | None, merged_target: str | None,
            force: bool) -> Path:
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
            if config["kind"] in ("eagle3", "dflash")
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
    needed = sum(v.numel() * v.element_size() for v in out.tensors.values()) * (2 if out.torch_copy else 1) + (1 << 16)
    with space_for(folder.parent, needed, f"the {layout} layout of the head ({folder.name})"), \
            staged_folder(folder, written_by=f"headstart export --layout {layout}") as tmp:
        checksums = {out.weights_name: write_safetensors(tmp / out.weights_name, out.tensors, {"format": "pt", "layout": layout})}
        if out.torch_copy:
            torch.save({k: v.detach().contiguous().cpu() for k, v in out.tensors.items()}, tmp / out.torch_copy)
        for path in copied:
            shutil.copyfile(path, tmp / path.name)
        if copied:
            checksums.update({p.name: sha256_file(tmp / p.name) for p in copied})
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

# ---------------------------------------------------------------------------------------------
# import


def detect_layout(folder: str | Path) -> str:
    """Which importable layout a folder holds, from its config.json and file names."""
    folder = Path(folder)
    config = read_json(folder / CONFIG_NAME)
    if "format_version" in config and "kind" in config:
        return "headstart"
    architectures = config.get("architectures") or []
    if config.get("model_type") == "medusa" or "MedusaModel" in architectures:
        return "vllm-medusa"
    if "speculators_model_type" in config:
        return "speculators"
    if "dflash_config" in config:
        return "dflash"
    if any("Eagle3" in a for a in architectures) or "eagle_config" in config:
        return "eagle3"
    if "medusa_num_heads" in config or any((folder / n).is_file() for n in layout_medusa.MEDUSA_WEIGHTS):
        return "medusa"
    if config.get("num_hidden_layers") == 1 and any((folder / n).is_file() for n in (WEIGHTS_NAME, "pytorch_model.bin")):
        # A one-layer LlamaConfig: official EAGLE-1, or EAGLE-3 (EAGLE's traineagle3/config.json says
        # LlamaForCausalLM too): the weights tell them apart.
        return import_eagle.eagle_layout(folder, config)
    raise CheckpointError(
        f"{folder}: cannot tell which layout this is (config keys: {sorted(config)[:8]}); pass layout= "
        f"one of {sorted(IMPORTERS)}"
    )


def import_heads(path_or_repo_id: str | Path, target, layout: str = "auto", revision: str | None = None):
    """Load a head written in another layout (or ours) as a headstart head, checked against `target`.

    A Hub repo id is downloaded first (config.json and the weights files only).
    """
    folder = resolve_folder(path_or_repo_id, revision, [CONFIG_NAME, WEIGHTS_NAME, *layout_medusa.MEDUSA_WEIGHTS, "pytorch_model.bin"])
    if layout == "auto":
        layout = detect_layout(folder)
    if layout not in IMPORTERS:
        raise CheckpointError(f"cannot import the layout {layout!r}; importable layouts: {', '.join(sorted(IMPORTERS))}")
    return IMPORTERS[layout](folder, target)


