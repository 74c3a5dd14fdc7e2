"""An advisory lock on what a run writes (a training run's output_dir, distillation's output, an
export's folder), held for the whole run, so that two runs never write into one output.

The lock is a file named after the output's absolute path in the user's cache
(`~/.cache/headstart/locks/`, under $XDG_CACHE_HOME when set), held with `flock` and naming its
holder (PID, host, start time, command). It lives there, not beside the output, so that a
command refused after taking it leaves the user's folders exactly as they were. The kernel drops
a `flock` when its process dies, however it dies, so a lock file left by a killed run is free:
the next run takes it over and says so. A second run while the first is alive is refused, naming
the first.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from headstart.errors import HeadstartError


class LockedError(HeadstartError):
    """Another live run holds the lock on an output."""


def lock_path(output: str | Path) -> Path:
    """The lock file of `output`: in the user's cache, named after the output's absolute path."""
    output = Path(output).expanduser().resolve()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(output).encode()).hexdigest()[:16]
    return cache / "headstart" / "locks" / f"{output.name or 'root'}-{digest}.lock"


def _holder(fd: int) -> dict:
    """Who the lock file at `fd` names (empty when it names no one)."""
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def describe(holder: dict) -> str:
    """'headstart train (PID 4242 on host, started 2025-01-01 12:00:00)'"""
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    command = holder.get("command") or "a headstart run"
    return f"{command} (PID {holder.get('pid', '?')} on {holder.get('host', '?')}, started {when})"


def _open_locked(path: Path, what: str, output: Path) -> int | None:
    """Open `path` and take its `flock`; refuse when another process holds it; None when this
    process holds it already (an outer block of the same run). Retries when the previous holder
    removed the file between our open and our lock (we would lock a dead inode)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            if holder.get("pid") == os.getpid():  # the file names its holder only while the holder holds it
                return None
            raise LockedError(
                f"{output} is being written by another run: {describe(holder)} holds {path}. Wait for it to end, "
                f"or choose another {what}"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextmanager
def output_lock(output: str | Path, what: str, command: str) -> Iterator[Path]:
    """Hold the lock on `output` for the block; `what` names the setting that chose it (in messages,
    e.g. 'train.output_dir'), `command` the run (e.g. 'headstart train'). Yields the lock file's path;
    removes it at the end. Nested blocks of one process on one output share the outer block's lock
    (the CLI takes it before loading the target, then `train` takes it again)."""
    output = Path(output)
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked(path, what, output)
    if fd is None:
        yield path
        return
    try:
        left = _holder(fd)
        if left:  # a holder that ends removes its file: this one's process died holding it
            print(f"{what}: took over the lock on {output} left by {describe(left)}, which is no longer running",
                  file=sys.stderr)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
              "command": command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        yield path
    finally:
        path.unlink(missing_ok=True)  # before the flock goes: the next run finds no stale holder
        os.close(fd)
