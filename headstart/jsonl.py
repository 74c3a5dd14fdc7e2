"""JSONL reading and appending shared by distillation and training data (plain or .gz)."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from headstart.errors import HeadstartError


class DataError(HeadstartError):
    """A data file or row that cannot be used; the message names the file and line."""


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict | DataError]]:
    """Yield (line number, row) for every non-empty line; a malformed line yields its DataError
    instead of raising, so a reader that skips bad rows (and counts them) can go on."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                yield lineno, DataError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})")
                continue
            if not isinstance(row, dict):
                yield lineno, DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                continue
            yield lineno, row


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, row) for every non-empty line; a malformed line raises DataError."""
    for lineno, row in iter_jsonl(path):
        if isinstance(row, DataError):
            raise row
        yield lineno, row


def repair_tail(path: Path) -> int:
    """Cut a partial last line left by a killed writer; return how many bytes were removed."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        keep = data.rfind(b"\n") + 1
        if keep == len(data):
            return 0
        f.truncate(keep)
        return len(data) - keep


def append_rows(path: Path, rows: list[dict]) -> None:
    """Append rows in one write and fsync it, so a batch is either wholly on disk or not at all."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
