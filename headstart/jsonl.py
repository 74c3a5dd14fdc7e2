"""JSONL reading and appending shared by distillation and training data (plain or .gz)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

from headstart.errors import HeadstartError


class DataError(HeadstartError):
    """A data file or row that cannot be used; the message names the file and line."""


def open_bytes(path: Path):
    """The file's bytes, gunzipped when its name ends in .gz."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def unreadable(path: Path, error: Exception, lineno: int | None = None) -> DataError:
    """The DataError of a file that is not what its name says: gzip data that is not gzip or ends
    early, bytes that are not UTF-8, a file the system cannot read; naming the line where there is one."""
    where = f"{path}:{lineno}" if lineno else str(path)
    if isinstance(error, UnicodeDecodeError):
        column = error.start - error.object.rfind(b"\n", 0, error.start)
        return DataError(f"{where}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at column {column}); "
                         f"save the file as UTF-8")
    if isinstance(error, EOFError):
        return DataError(f"{where}: the gzip data ends early: the file is truncated (an interrupted download or copy?); "
                         f"get it again")
    if isinstance(error, (gzip.BadGzipFile, zlib.error)):
        return DataError(f"{where}: not valid gzip data ({error}), though the name ends in .gz; gzip it again, or drop .gz "
                         f"from its name if it is plain text")
    return DataError(f"{where}: cannot be read ({type(error).__name__}: {error})")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict | DataError]]:
    """Yield (line number, row) for every non-empty line; a malformed line yields its DataError
    instead of raising, so a reader that skips bad rows (and counts them) can go on. A file that is
    not what its name says (bad gzip, not UTF-8) raises a DataError naming it and the line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    lineno = 0
    try:
        with open_bytes(path) as f:
            for lineno, raw in enumerate(f, start=1):
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                yield lineno, _row(path, lineno, line)
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        raise unreadable(path, e, lineno + (not isinstance(e, UnicodeDecodeError))) from None


def _row(path: Path, lineno: int, line: str) -> dict | DataError:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        return DataError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})")
    if not isinstance(row, dict):
        return DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
    return row


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
