"""Head checkpoints: `config.json` + `model.safetensors`, the head's own weights only.

config.json records the kind, the head's options, the target it was trained for (its name, as
information, and its fingerprint: architecture, shapes and a hash of some embedding rows, which
loading compares), and the SHA-256 of each weights file, which loading verifies, so that a
corrupt or altered file is refused even when it still parses. Files are written beside their final
names and renamed into place, config.json last: an interrupted save never looks complete.
Nothing is ever unpickled.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from headstart.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, AdapterError, load_adapter, save_adapter
from headstart.decode.corpus import CorpusNgram
from headstart.files import is_head_config, sha256_file, write_json, write_safetensors
from headstart.heads.options import HeadOptionsError, check_head_config
from headstart.heads.reading import CheckpointError, read_json, read_safetensors
from headstart.heads.results import architecture_options, restore_fields, saved_fields

FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: config.json's key for {weights file name: SHA-256 hex digest}
CHECKSUMS = "sha256"

log = logging.getLogger(__name__)


def save_heads(head, folder: str | Path, target=None, extra: dict | None = None, state: dict | None = None) -> Path:
    """Write the head (never the target) to `folder` atomically; returns the folder.

    `state` overrides tensors of the head's own state dict (e.g. the consolidated weights of a
    head whose parameters DeepSpeed ZeRO-3 has partitioned across processes). A folder whose
    config.json is not a headstart head's (a model, an export in a serving layout) is refused:
    its files would be overwritten.
    """
    folder = Path(folder)
    _refuse_foreign_config(folder)
    config = head_config(head, target, extra)
    state = {**head_state(head), **{k: v.detach().contiguous().cpu() for k, v in (state or {}).items()}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_NAME).unlink(missing_ok=True)  # the folder is incomplete until the end
    # Each file is written beside its final name and renamed into place; config.json comes last,
    # so a folder with a config.json always has the weights that belong to it.
    checksums = {WEIGHTS_NAME: write_safetensors(folder / WEIGHTS_NAME, state, {"format": "pt", "kind": head.kind})}
    if target is not None and getattr(target, "adapter", None):
        # Medusa-2: the LoRA adapter the heads were trained with goes beside them (PEFT's files);
        # loading the head puts it back on the target, which then verifies as the adapted model.
        config["adapter"], checksums[ADAPTER_WEIGHTS] = save_adapter(target, folder)
        checksums[ADAPTER_CONFIG] = sha256_file(folder / ADAPTER_CONFIG)
    config[CHECKSUMS] = checksums
    write_json(folder / CONFIG_NAME, config)
    return folder


def save_corpus(folder: str | Path, examples, order: int, max_tokens: int, base: CorpusNgram | None = None) -> CorpusNgram:
    """Count training examples' answers into the corpus n-gram table (decode/corpus.py), added to `base`'s
    counts when given (a continued head's table), and save it beside a head in `folder` (for hybrid trees'
    corpus trees and vLLM's corpus proposer), its SHA-256 recorded in the head's config.json; returns the
    table."""
    table = CorpusNgram.of_examples(examples, order, max_tokens)
    if base is not None:
        table = base.merged(table)
    path = table.save(folder)
    config = read_config(Path(folder))
    config[CHECKSUMS] = {**config.get(CHECKSUMS, {}), path.name: sha256_file(path)}
    write_json(Path(folder) / CONFIG_NAME, config)
    return table


def _refuse_foreign_config(folder: Path) -> None:
    """Refuse to save a head over a config.json that is not a head's (a model's, a serving export's)."""
    path = folder / CONFIG_NAME
    if path.is_file() and not is_head_config(path):
        raise CheckpointError(
            f"{folder} holds a {CONFIG_NAME} that is not a headstart head's (a model or an export?); saving a head "
            f"there would overwrite it. Save the head to a new folder."
        )


def head_config(head, target=None, extra: dict | None = None) -> dict:
    """What config.json holds for `head` (exporters start from it too): its `head` section is the
    head's options and the fields set on it (heads/results.py: accuracy, tree, init_from_target)."""
    options = {k: v for k, v in head.options.items() if k not in ("hidden_size", "vocab_size")}
    config = {
        "format_version": FORMAT_VERSION,
        "kind": head.kind,
        "head": {**options, **saved_fields(head)},
        "hidden_size": head.options["hidden_size"],
        "vocab_size": head.options["vocab_size"],
        "target": target.describe() if target is not None else head.target_info,
    }
    if extra:
        config.update(extra)
    return config


def head_state(head) -> dict:
    """The head's own tensors, detached, contiguous, on the CPU (never the target's)."""
    return {k: v.detach().contiguous().cpu() for k, v in head.state_dict().items()}


def update_config(folder: str | Path, head: dict | None = None, **top: object) -> dict:
    """Merge keys into a saved head's config.json, atomically (the tree chosen for it goes through
    `heads.results.set_default_tree`, which calls this)."""
    folder = Path(folder)
    config = read_config(folder)
    config["head"].update(head or {})
    config.update(top)
    write_json(folder / CONFIG_NAME, config)
    return config


def read_config(folder: Path) -> dict:
    path = folder / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{folder} is not a headstart head: {CONFIG_NAME} is missing")
    config = read_json(path)
    missing = [k for k in ("format_version", "kind", "head", "hidden_size", "vocab_size", "target") if k not in config]
    if missing:
        foreign = "speculators_model_type" in config or "eagle_config" in config or "medusa_num_heads" in config
        hint = (" (it looks like another project's layout: headstart.heads.export.import_heads(folder, target) imports "
                "speculators, EAGLE, EAGLE-3 and Medusa folders)") if foreign else ""
        raise CheckpointError(f"{path} lacks the keys {missing}; it was not written by headstart{hint}")
    if config["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format_version {config['format_version']}; this headstart reads up to "
            f"{FORMAT_VERSION}. Upgrade headstart."
        )
    return config


def verify_checksum(folder: Path, config: dict, name: str) -> Path:
    """The path of the weights file `name`, after checking it exists and matches the SHA-256 that
    config.json recorded when it was saved (configs of older headstart versions record none)."""
    path = folder / name
    if not path.is_file():
        raise CheckpointError(f"{folder}: {name} is missing")
    expected = (config.get(CHECKSUMS) or {}).get(name)
    if expected is not None and sha256_file(path) != expected:
        raise CheckpointError(
            f"{path} does not match the SHA-256 that {CONFIG_NAME} recorded when it was saved: the file is corrupt "
            f"(a bad disk, an interrupted copy or download) or was changed since. Copy or download the head again."
        )
    return path


def verify_checksums(folder: Path, config: dict) -> None:
    """Check every file config.json records a SHA-256 for (weights, adapter, corpus table) is there
    and matches it."""
    for name in config.get(CHECKSUMS) or {}:
        verify_checksum(folder, config, name)


def read_weights(folder: Path, config: dict, name: str = WEIGHTS_NAME) -> dict:
    """The tensors of a head folder's weights file, verified against config.json's checksum."""
    return read_safetensors(verify_checksum(folder, config, name))


def check_options(folder: Path, config: dict) -> None:
    """Refuse a head folder whose options no head can be built from (a HeadOptionsError naming its config.json)."""
    try:
        check_head_config(config)
    except HeadOptionsError as e:
        raise HeadOptionsError(f"{folder / CONFIG_NAME}: {e}") from None


def check_target(config: dict, target, where: str, allow_other_target: bool = False) -> None:
    """Refuse a head whose recorded target differs from `target` in shape (always) or identity.

    Identity is the fingerprint config.json records (architecture, shapes, a hash of some embedding
    rows), not the name: one folder has many spellings and may move. Heads saved before fingerprints
    were recorded fall back to the name, where two spellings of one existing folder agree.
    """
    recorded = config.get("target") or {}
    problems = []
    if config["hidden_size"] != target.hidden_size:
        problems.append(f"hidden size {config['hidden_size']} (target has {target.hidden_size})")
    if config["vocab_size"] != target.vocab_size:
        problems.append(f"vocabulary of {config['vocab_size']} tokens (target has {target.vocab_size})")
    if problems:
        raise CheckpointError(
            f"the head at {where} was trained for {recorded.get('name_or_path')!r} and does not fit "
            f"the target {target.name!r}: it has {' and '.join(problems)}."
        )
    name = recorded.get("name_or_path")
    if recorded.get("fingerprint"):
        differences = fingerprint_differences(recorded["fingerprint"], target.describe()["fingerprint"])
        if not differences:
            if name != target.name:
                log.info("the head at %s names its target %r; the target %r has the same fingerprint", where, name, target.name)
            return
        reason = "; ".join(differences)
    elif not name or same_name(name, target.name):
        return
    else:
        reason = f"{CONFIG_NAME} records only the target's name (the head was saved by an older headstart)"
    if allow_other_target:
        log.info("loading the head at %s, trained for %r, on the target %r (%s)", where, name, target.name, reason)
        return
    raise CheckpointError(
        f"the head at {where} was trained for {name!r}, but the target is {target.name!r}: {reason}. Shapes agree, "
        f"but its proposals would be tuned to another model. Pass allow_other_target=True (--allow-other-target) "
        f"to load it anyway."
    )


_FINGERPRINT_FIELDS = {
    "architecture": "architecture",
    "hidden_size": "hidden size",
    "num_hidden_layers": "layers",
    "vocab_size": "vocabulary size",
}


def fingerprint_differences(recorded: dict, current: dict) -> list[str]:
    """How two target fingerprints differ, in words (empty when they agree). A field missing or
    None on either side (an embedding hash under ZeRO-3) is not compared."""
    out = []
    for key, words in _FINGERPRINT_FIELDS.items():
        a, b = recorded.get(key), current.get(key)
        if a is not None and b is not None and a != b:
            out.append(f"{words} {a!r} recorded, {b!r} in the target")
    a, b = recorded.get("embedding_sha256"), current.get("embedding_sha256")
    if a is not None and b is not None and a != b:
        out.append("its embedding weights differ from the recorded ones (another model, or another checkpoint of this one)")
    return out


def same_name(recorded: str, current: str) -> bool:
    """Whether two target names mean the same target: equal, or two spellings of one existing folder."""
    if recorded == current:
        return True
    a, b = Path(recorded).expanduser(), Path(current).expanduser()
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def resolve_folder(path_or_repo_id: str | Path, revision: str | None = None, patterns: list[str] | None = None) -> Path:
    """The local folder of a head: `path_or_repo_id` itself, or a Hub repo `owner/name` downloaded
    (only the files in `patterns`). A missing folder or an unreachable Hub is a CheckpointError."""
    folder = Path(path_or_repo_id).expanduser()
    if folder.is_dir():
        return folder
    text = str(path_or_repo_id)
    if folder.exists():
        raise CheckpointError(f"{text} is a file; a head is a folder (with {CONFIG_NAME} and {WEIGHTS_NAME})")
    if not _REPO_ID.fullmatch(text) or ".." in text:
        raise CheckpointError(
            f"the folder {text} does not exist; give the folder a head was saved to (it holds {CONFIG_NAME} and "
            f"{WEIGHTS_NAME}) or a Hugging Face Hub repo id (owner/name)"
        )
    return _download(text, revision, patterns or [CONFIG_NAME, WEIGHTS_NAME, ADAPTER_CONFIG, ADAPTER_WEIGHTS])


def hub_offline() -> bool:
    """Whether the Hugging Face Hub is in offline mode (HF_HUB_OFFLINE), read now: huggingface_hub
    reads the variable once, at import, and the environment may have changed since."""
    from huggingface_hub import constants

    return constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}


def _download(repo_id: str, revision: str | None, patterns: list[str]) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    missing = f"there is no folder {repo_id}, and as a Hugging Face Hub repo id"
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=patterns))
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if hub_offline() else "no connection"
        problem = f"it could not be fetched: the Hub could not be reached ({why}) and the repo is not in the local Hub cache"
        advice = "Check the path, or connect to the internet and try again"
    except RepositoryNotFoundError:
        problem = "no such repo exists on the Hub (or it is private or gated)"
        advice = "Check the path or the repo id, or log in (`hf auth login`) if the repo is private"
    except RevisionNotFoundError:
        problem = f"the repo has no revision {revision!r}"
        advice = "Check the revision"
    except (HfHubHTTPError, HFValidationError, OSError) as e:
        problem = f"it could not be fetched ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        advice = "Check the path or the repo id"
    raise CheckpointError(f"{missing} {problem}. {advice}.")


def load_heads(path_or_repo_id: str | Path, target, allow_other_target: bool = False, revision: str | None = None):
    """Load a head of any registered kind and check it against `target` (its shapes always; its
    identity unless `allow_other_target`) and its weights against their recorded checksums."""
    from headstart.heads import REGISTRY

    folder = resolve_folder(path_or_repo_id, revision)
    config = read_config(folder)
    kind = config["kind"]
    if kind not in REGISTRY:
        raise CheckpointError(f"{folder}: unknown head kind {kind!r}; this headstart knows {sorted(REGISTRY)}")
    check_options(folder, config)
    check_target(config, target, str(folder), allow_other_target)
    verify_checksums(folder, config)
    state = read_weights(folder, config)
    weights = folder / WEIGHTS_NAME
    options = dict(architecture_options(config["head"]), hidden_size=config["hidden_size"], vocab_size=config["vocab_size"])
    try:
        head = REGISTRY[kind].from_config(options, target)
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{folder}: the head's config does not fit the target: {e}") from None
    expected = set(head.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise CheckpointError(f"{weights}: missing weights {missing[:5]}, unexpected weights {unexpected[:5]}")
    for name, tensor in head.state_dict().items():
        if state[name].shape != tensor.shape:
            raise CheckpointError(f"{weights}: {name} has shape {tuple(state[name].shape)}, expected {tuple(tensor.shape)}")
    head.load_state_dict(state, strict=True)
    head.target_info = config["target"]
    restore_fields(head, config["head"], str(folder / CONFIG_NAME))
    head.corpus = CorpusNgram.load(folder, config["vocab_size"])  # the training answers' n-gram table, when training saved one
    if config.get("adapter"):  # Medusa-2: the target verifies as the adapted model from here on
        try:
            load_adapter(target, folder)
        except AdapterError as e:
            raise CheckpointError(str(e)) from None
    return head.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)
