"""A training run's output folder: whether a run may write into it, and which checkpoint it resumes.

Every checkpoint's config.json records the fields of the recipe that change what training produces
(`training_fields`, with their fingerprint). A run resumes only from a checkpoint of its own
recipe, so that a resumed run ends as the uninterrupted one would (docs/architecture.md#principles). A
fresh run refuses a folder that holds an earlier run unless `train.overwrite_output_dir` asks to
start over, and then deletes only what training writes there. A checkpoint cut short by a kill
(a file missing, or a torn trainer_state.json) is skipped for the previous complete one, and said so.
Distillation records its settings the same way (`target_fields`, `differences`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from headstart.config import Recipe, RecipeError, recipe_to_dict
from headstart.heads.checkpoint import CONFIG_NAME, WEIGHTS_NAME, CheckpointError

TRAINER_STATE = "trainer_state.json"  # the HF Trainer's state: the last file of a checkpoint written
# train.* fields that leave the trained head unchanged: where it goes, how it is tracked, how many
# checkpoints are kept, how batches are loaded, the wall-clock budget (a resumed budgeted run
# keeps the step count planned when it started) and the corpus table saved beside the final head.
NOT_TRAINING_FIELDS = frozenset({
    "output_dir", "report_to", "resume_from_checkpoint", "overwrite_output_dir", "save_total_limit",
    "dataloader_workers", "max_minutes", "corpus_ngram", "corpus_ngram_tokens",
})
RUN_OUTPUTS = ("best", "final", "train_summary.json")  # what a run writes besides its checkpoint-N folders


class ResumeError(CheckpointError):
    """An output folder a run must not write into, or a checkpoint it must not resume from."""


def target_fields(target) -> dict:
    """The target as dotted fields: what a head records about it (name, shapes, the fingerprint of its
    weights) and the dtype it runs in."""
    fields = {}
    for key, value in target.describe().items():
        if isinstance(value, dict):
            fields.update({f"target.{key}.{k}": v for k, v in value.items()})
        else:
            fields[f"target.{key}"] = value
    fields["target.dtype"] = str(target.dtype).removeprefix("torch.")
    return fields


def differences(old: dict, new: dict) -> list[str]:
    """'key was X, is Y' for every dotted field whose value differs, in key order."""
    return [f"{k} was {_short(old.get(k))}, is {_short(new.get(k))}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)]


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def training_fields(recipe: Recipe, target) -> dict:
    """Dotted recipe fields that change what training produces, with the target trained on (as JSON
    reads them back, so that a stored copy compares equal)."""
    fields = target_fields(target)
    recorded = recipe_to_dict(recipe)  # the head kind's options and joint training's fields under their sections
    for section in ("head", "data", "train"):
        for name, value in recorded[section].items():
            if not (section == "train" and name in NOT_TRAINING_FIELDS):
                fields[f"{section}.{name}"] = value
    return json.loads(json.dumps(fields, default=str))


def run_record(recipe: Recipe, target) -> dict:
    """What every checkpoint of this run records about it: the training fields and their fingerprint."""
    fields = training_fields(recipe, target)
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    return {"fingerprint": digest, "fields": fields}


def checkpoint_folders(output_dir: str | Path) -> list[Path]:
    """The checkpoint-N folders of `output_dir`, newest (highest N) first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-", 1)[1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)


def checkpoint_problem(folder: Path) -> str | None:
    """Why `folder` cannot be resumed from (a file missing, or one cut short), or None if it can."""
    for name in (CONFIG_NAME, WEIGHTS_NAME, TRAINER_STATE):
        if not (folder / name).is_file():
            return f"{folder / name} is missing (the save was cut short)"
    for name in (CONFIG_NAME, TRAINER_STATE):
        try:
            json.loads((folder / name).read_text())
        except (ValueError, OSError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return f"{folder / name} is not valid JSON ({e}; the save was cut short)"
    return None


def last_complete_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint-N of `output_dir`, or None when it holds no checkpoint.

    Each newer checkpoint that a kill cut short is skipped with one line on stderr naming it; a
    folder holding only such checkpoints is a ResumeError naming the file at fault.
    """
    skipped = []
    for folder in checkpoint_folders(output_dir):
        problem = checkpoint_problem(folder)
        if problem is None:
            for name, why in skipped:
                print(f"train.resume_from_checkpoint=last: skipping {name}: {why}; resuming from {folder.name}",
                      file=sys.stderr)
            return str(folder)
        skipped.append((folder.name, problem))
    if skipped:
        raise ResumeError(
            f"train.resume_from_checkpoint=last: {output_dir} holds no complete checkpoint: "
            + "; ".join(why for _, why in skipped)
            + ". Resume from a complete checkpoint elsewhere, or start over with train.overwrite_output_dir=true"
        )
    return None


def earlier_run(output_dir: str | Path) -> list[str]:
    """What an earlier run left in `output_dir`: its checkpoint-N folders, best/, final/, train_summary.json."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    return [p.name for p in reversed(checkpoint_folders(out))] + [n for n in RUN_OUTPUTS if (out / n).exists()]


def check_same_run(folder: Path, record: dict) -> None:
    """Refuse to resume from a checkpoint that another recipe (or target) wrote, naming what differs."""
    stored = json.loads((folder / CONFIG_NAME).read_text()).get("run")
    if stored is not None and stored.get("fingerprint") == record["fingerprint"]:
        return
    fresh = ("start a fresh run instead: unset train.resume_from_checkpoint and set train.overwrite_output_dir=true "
             "(deletes the earlier run in train.output_dir) or choose another train.output_dir")
    if stored is None:
        raise ResumeError(f"{folder} records no recipe fingerprint (an older headstart wrote it), so it cannot be "
                          f"resumed as this recipe's run; {fresh}")
    diffs = differences(stored.get("fields", {}), record["fields"]) or ["the same fields, fingerprinted by another headstart version"]
    shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
    raise ResumeError(
        f"{folder} was written by another recipe ({shown}), so resuming it would not end as this recipe's run. "
        f"Resume with the recipe that wrote it, or {fresh}"
    )


def checkpoint_to_resume(recipe: Recipe, target) -> Path | None:
    """The checkpoint this run resumes from, or None for a fresh run; refuses what would lose work.

    A fresh run (no checkpoint to resume) into a folder holding an earlier run is refused unless
    train.overwrite_output_dir is set; a checkpoint of another recipe is always refused.
    """
    cfg = recipe.train
    if cfg.overwrite_output_dir and cfg.resume_from_checkpoint:
        raise RecipeError("train.overwrite_output_dir starts over and train.resume_from_checkpoint continues a run: set only one")
    if cfg.resume_from_checkpoint == "last":
        found = last_complete_checkpoint(cfg.output_dir)
        folder = Path(found) if found else None
    elif cfg.resume_from_checkpoint:
        folder = Path(cfg.resume_from_checkpoint)
        problem = checkpoint_problem(folder) if folder.is_dir() else "no such folder"
        if problem:
            raise ResumeError(f"train.resume_from_checkpoint: cannot resume from {folder}: {problem}. Name a "
                              f"complete checkpoint-N folder, or 'last' for the newest complete one in train.output_dir")
    else:
        folder = None
    if folder is not None:
        check_same_run(folder, run_record(recipe, target))
        return folder
    found_there = earlier_run(cfg.output_dir)
    if found_there and not cfg.overwrite_output_dir:
        none_to_resume = "no checkpoint to resume, but " if cfg.resume_from_checkpoint else ""
        raise ResumeError(
            f"train.output_dir {cfg.output_dir} holds {none_to_resume}an earlier training run ({', '.join(found_there)}). "
            f"To continue it, set train.resume_from_checkpoint=last; to start over, set train.overwrite_output_dir=true "
            f"(deletes those and nothing else); or choose another train.output_dir"
        )
    return None


def clear_earlier_run(output_dir: str | Path) -> None:
    """Start over (train.overwrite_output_dir): delete the earlier run's checkpoints, best/, final/ and
    summary, and nothing else in the folder; one line on stderr says what went."""
    out = Path(output_dir)
    names = earlier_run(out)
    for name in names:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if names:
        print(f"train.overwrite_output_dir: deleted the earlier run in {out}: {', '.join(names)}", file=sys.stderr)


def planned_steps(folder: Path) -> int:
    """The step count the checkpoint's run planned (a budgeted run keeps it when resumed)."""
    return int(json.loads((folder / TRAINER_STATE).read_text())["max_steps"])
