"""The model to serve a Medusa-2 head with: the target with the head's LoRA adapter merged in.

A Medusa-2 head was trained with an adapter on its target (`headstart.adapter`), so its serving
engine must run the adapted target; `headstart export --merged-target DIR` writes it as a plain
model folder (no LoRA layers), beside the exported head.
"""

from __future__ import annotations

from pathlib import Path

from headstart.adapter import AdapterError, merge_adapter
from headstart.files import replace_refusal, staged_folder
from headstart.heads.checkpoint import load_heads, read_config
from headstart.heads.export import ExportError


def save_merged_target(head_folder: str | Path, target, out: str | Path, force: bool = False) -> Path:
    """Load a Medusa-2 head's adapter onto `target`, merge it, and save the merged model (with the
    tokenizer) to `out`, renamed into place: the model to serve with the exported head.

    `out` is replaced only when it is empty or an earlier merged target (its marker file lists all
    it holds), or with `force`; never when it holds the head, the target's own folder or a training
    run's output.
    """
    loaded_from = {target.name, getattr(target.model, "name_or_path", None) or target.name}
    keep = [Path(head_folder), *(Path(p) for p in loaded_from if Path(p).exists())]
    refusal = replace_refusal(out, force, keep)
    if refusal:
        raise ExportError(f"not saving the merged target to {out}: {refusal}")
    if not read_config(Path(head_folder)).get("adapter"):
        raise AdapterError(f"{head_folder} was trained without an adapter (Medusa-1): serve it with the target as it is")
    load_heads(head_folder, target, allow_other_target=True)
    merge_adapter(target)
    with staged_folder(out, written_by="headstart export --merged-target") as tmp:
        target.model.save_pretrained(tmp)
        if target.tokenizer is not None:
            target.tokenizer.save_pretrained(tmp)
    return Path(out)
