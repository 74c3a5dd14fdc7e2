"""Writing files and folders so that nothing the user owns is lost (docs/architecture.md#principles).

- A file is written under a temporary name beside its final one and renamed into place, so a reader
  sees the old file or the new one, never half of one (`write_text`, `write_json`, `write_safetensors`).
- A folder is written whole in a temporary folder beside its final name and renamed into place
  (`staged_folder`); an existing folder is swapped out only once the new one is complete.
- Before a folder is replaced, `replace_refusal` says why that would destroy something the user
  owns. Folders that headstart writes whole (exports, merged targets) carry a marker file
  (`MARKER`) that names their files, so that an earlier one can be replaced without `force`.
- Files and folders get the modes the user's umask gives, as `open` and `mkdir` make them, not the
  0600/0700 of `tempfile.mkstemp`/`mkdtemp`: an export is meant to be shared and served.

Checkpoint folders (config.json, model.safetensors, train_summary.json, checkpoint-*) are never
replaced, even with `force`: they are what training produced.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file

from headstart.errors import HeadstartError

#: written into every folder that headstart writes whole; JSON: {"written_by": ..., "files": [...]}
MARKER = ".headstart-export.json"
HEAD_CONFIG = "config.json"
TRAIN_SUMMARY = "train_summary.json"
_CHUNK = 1 << 20
_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(HeadstartError):
    """A write ran out of space; what it wrote was removed."""


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _temporary_name(path: Path, suffix: str = ".tmp") -> Path:
    """A fresh hidden name beside `path` (same folder, so the final rename never crosses disks)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}")


@contextmanager
def _renamed_into_place(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` if the block succeeds, else remove it."""
    tmp = _temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path`, renamed into place."""
    path = Path(path)
    with _renamed_into_place(path) as tmp:
        tmp.write_text(text)
    return path


def write_json(path: str | Path, data: object) -> Path:
    """Write `data` as indented JSON to `path`, renamed into place."""
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def write_safetensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> str:
    """Write tensors (detached, contiguous, on the CPU) as safetensors, renamed into place; returns
    the file's SHA-256, which config.json records so that loading can detect a corrupt file."""
    path = Path(path)
    state = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    with _renamed_into_place(path) as tmp:
        tmp.touch()  # the mode `open` gives under the umask ...
        mode = stat.S_IMODE(tmp.stat().st_mode)
        save_file(state, tmp, metadata=metadata)
        os.chmod(tmp, mode)  # ... which safetensors does not keep: it writes its own file with 0600
        digest = sha256_file(tmp)
    return digest


@contextmanager
def staged_folder(folder: str | Path, written_by: str | None = None) -> Iterator[Path]:
    """Yield an empty temporary folder beside `folder`; when the block succeeds it becomes `folder`.

    An existing `folder` is moved aside, the new one renamed into place, then the old one deleted
    (put back if the rename failed): the folder is complete or absent, never half written. With
    `written_by`, the marker file naming the folder's files is added last, so that a later write
    knows the folder is headstart's own. Check `replace_refusal` first: this replaces what is there.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(folder)
    tmp = _temporary_name(folder)
    tmp.mkdir()
    old = None
    try:
        yield tmp
        _follow_umask(tmp)
        if written_by is not None:
            files = sorted(p.name for p in tmp.iterdir())
            write_json(tmp / MARKER, {"written_by": written_by, "files": files})
        if folder.exists() or folder.is_symlink():
            old = _temporary_name(folder, ".old")
            os.replace(folder, old)
        os.replace(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            if folder.exists():
                _remove(old)
            else:  # the new folder never landed: put the old one back
                os.replace(old, folder)


def remove_dead_staging(folder: Path) -> None:
    """Settle what writes of `folder` by processes that died (kill -9) left beside it, saying so on
    stderr: a staging folder (`.NAME.PID-HEX.tmp`) is removed; an old folder moved aside
    (`.NAME.PID-HEX.old`) is put back when the new one never landed, else removed as its write meant."""
    for path in folder.parent.glob(f".{glob.escape(folder.name)}.*"):
        found = re.fullmatch(r"\.(.+)\.(\d+)-[0-9a-f]{8}\.(tmp|old)", path.name)
        if found is None or found[1] != folder.name or process_alive(int(found[2])) or path.is_symlink() or not path.is_dir():
            continue
        if found[3] == "old" and not (folder.exists() or folder.is_symlink()):
            os.replace(path, folder)
            print(f"put back {folder}, which a write by process {found[2]} (no longer running) had moved aside", file=sys.stderr)
        else:
            shutil.rmtree(path)
            print(f"removed {path}, left by a write of {folder} by process {found[2]}, which is no longer running",
                  file=sys.stderr)


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (ours counts; one of another user, too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _follow_umask(folder: Path) -> None:
    """Give everything under `folder` the modes the umask gives (folder's own, made by mkdir): some
    writers (safetensors, hence transformers' save_pretrained) make their files 0600 whatever it is."""
    dir_mode = stat.S_IMODE(folder.stat().st_mode)
    for root, dirs, files in os.walk(folder):
        for names, mode in ((dirs, dir_mode), (files, dir_mode & 0o666)):
            for path in (Path(root) / name for name in names):
                if not path.is_symlink():  # a link's mode is its target's: never touch what lies outside
                    os.chmod(path, mode)


def _remove(path: Path) -> None:
    """Delete a folder, or only the link when it is a symbolic link (never what it points to)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def written_by_headstart(folder: Path) -> bool:
    """Whether `folder` is a folder headstart wrote whole (its marker lists every file in it)."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        listed = set(marker["files"]) | {MARKER}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return {p.name for p in folder.iterdir()} <= listed


def replace_refusal(folder: str | Path, force: bool = False, keep: Sequence[str | Path] = ()) -> str | None:
    """Why writing a folder at `folder` (replacing what is there) would destroy what the user owns,
    or None when it may be written.

    Always refused, `force` or not: a folder that holds one of `keep` (e.g. the head being
    exported), the current directory or the home directory, a file, and a folder holding a training run's output (a
    `checkpoint-*` folder, train_summary.json, or a head checkpoint's config.json). Refused unless
    `force`: any other non-empty folder that headstart did not write whole.
    """
    folder = Path(folder)
    if not (folder.exists() or folder.is_symlink()):
        return None
    if not folder.is_dir():
        return f"{folder} is a file, not a folder; remove it or choose another folder"
    real = folder.resolve()
    for path in [*keep, Path.cwd(), Path.home()]:
        inner = Path(path).resolve()
        if inner == real or real in inner.parents:
            return f"{folder} holds {path}, which would be deleted with it; choose a new or empty folder"
    if not any(folder.iterdir()) or written_by_headstart(folder):
        return None
    found = training_output(folder)
    if found is not None:
        return (
            f"{folder} holds the output of a training run ({found}), which headstart never replaces, even with "
            f"force; choose a new or empty folder"
        )
    if force:
        return None
    names = sorted(p.name for p in folder.iterdir())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"{folder} is not empty ({shown}) and headstart did not write it (no {MARKER} listing its files); "
        f"choose a new or empty folder, or pass force=True (--force) to replace it and everything in it"
    )


def training_output(folder: Path) -> Path | None:
    """The first thing under `folder` that training wrote: a checkpoint-* folder, train_summary.json,
    or a head checkpoint's config.json (not an export's); None if there is none."""
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs.sort()  # a stable answer (and message), whatever order the disk lists them in
        for d in dirs:
            if d.startswith("checkpoint-"):
                return here / d
        if TRAIN_SUMMARY in files:
            return here / TRAIN_SUMMARY
        if HEAD_CONFIG in files and is_head_config(here / HEAD_CONFIG) and not written_by_headstart(here):
            return here / HEAD_CONFIG
    return None


def is_head_config(path: Path) -> bool:
    """Whether `path` is a headstart head checkpoint's config.json."""
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "format_version" in config and "kind" in config


def disk_full(error: BaseException, folder: Path, needed: int) -> bool:
    """Whether `error`, raised while writing about `needed` bytes into `folder`, is a full disk: an
    ENOSPC or EDQUOT OSError, a writer's error naming one (safetensors' SafetensorError), or any
    error of a writer that hides the cause (torch.save's RuntimeError) while less than `needed` is free."""
    if isinstance(error, OSError) and error.errno in _FULL:
        return True
    if any(os.strerror(code) in str(error) for code in _FULL):
        return True
    return isinstance(error, RuntimeError) and free_bytes(folder) < needed


def free_bytes(folder: Path) -> int:
    """The bytes free on the disk that holds `folder` (or its nearest existing parent)."""
    folder = Path(folder).absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def size_text(n: float) -> str:
    """1536 -> '1.5 KiB'"""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


@contextmanager
def space_for(folder: str | Path, needed: int, what: str, cleanup: Path | None = None) -> Iterator[None]:
    """Turn a full disk while the block writes `what` (about `needed` bytes) into `folder` into one
    DiskFullError naming the folder and the space, after removing `cleanup` (what the block was
    writing, which would otherwise be left half written). Other errors pass through unchanged."""
    folder = Path(folder)
    try:
        yield
    except Exception as e:
        if not disk_full(e, folder, needed):
            raise
        if cleanup is not None and (cleanup.exists() or cleanup.is_symlink()):
            _remove(cleanup)
        raise DiskFullError(
            f"no space left on the disk of {folder} while writing {what}: it needs about {size_text(needed)}, "
            f"{size_text(free_bytes(folder))} is free; nothing half written was left. Free some space, or write elsewhere"
        ) from None
