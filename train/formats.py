"""Conversation formats → one shape: a list of {role, content} messages (system, user, assistant).

Sources (`data.train_files`, `distill.prompts`): JSONL (`.jsonl`, `.jsonl.gz`), JSON holding a
list of rows (`.json`, `.json.gz`, as ShareGPT dumps are), glob patterns of those (sharded
outputs), a folder written by `datasets.save_to_disk`, and any other local folder or Hub dataset
name, read with `datasets.load_dataset(name, split=split)`. Row shapes, tried in this order:

    messages:      [{role, content}]          OpenAI style; UltraChat-200k; headstart's own output
    conversations: [{from, value}]            ShareGPT (from: human, gpt, system)
    data:          [str, str, ...]            UltraChat (alternating, starting with the user)
    prompt:        str                        one user prompt (distillation prompt sets)

plus an optional top-level `system` string and an `id`. A recipe's `columns` renames a dataset's
own column names to these (`{dialog: conversations, uid: id}`). Every row is named by where it
came from (`file:line`, `file[index]`, `dataset[split][index]`) in error messages; with
`on_error: skip` a malformed row is skipped and counted instead of raising.
"""

from __future__ import annotations

import glob
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from headstart.jsonl import DataError, iter_jsonl, open_bytes, unreadable

ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
}
FILE_BUILDERS = {".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}  # read by `datasets`
MAX_REASONS = 5  # skipped rows whose reason is kept in the stats


@dataclass
class Conversation:
    id: str
    where: str  # "file:line", "file[i]" or "dataset[split][i]", for error messages
    messages: list[dict]
    category: str | None = None


@dataclass
class ReadStats:
    rows: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def skip(self, error: DataError) -> None:
        self.skipped += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(str(error))

    def as_dict(self) -> dict:
        return {"rows_read": self.rows, "rows_skipped_malformed": self.skipped, "skip_reasons": self.reasons}


def check_messages(messages, where: str) -> list[dict]:
    """Validate a list of {role, content} messages; raise DataError naming `where`."""
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{where}: 'messages' must be a non-empty list of {{role, content}}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise DataError(f"{where}: message {i} must be {{'role': one of {ROLES}, 'content': str}}, got {m!r}")
    return messages


def _text(content):
    """OpenAI content: a string, or a list of parts of which the text parts are joined."""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def to_messages(row: dict, where: str, noun: str = "conversation") -> list[dict]:
    """One row of any supported shape → checked {role, content} messages."""
    if row.get("messages") is not None:
        raw = row["messages"]
        if not isinstance(raw, list):
            raise DataError(f"{where}: 'messages' must be a list of {{role, content}}, got {type(raw).__name__}")
        messages = [
            {"role": m.get("role"), "content": _text(m.get("content"))} if isinstance(m, dict) else m for m in raw
        ]
    elif row.get("conversations") is not None:
        raw = row["conversations"]
        if not isinstance(raw, list):
            raise DataError(f"{where}: 'conversations' must be a list of {{from, value}}, got {type(raw).__name__}")
        messages = []
        for i, m in enumerate(raw):
            role = SHAREGPT_ROLES.get(m.get("from")) if isinstance(m, dict) else None
            if role is None or not isinstance(m.get("value"), str):
                raise DataError(
                    f"{where}: turn {i} must be {{'from': one of {sorted(SHAREGPT_ROLES)}, 'value': str}}, got {m!r}"
                )
            messages.append({"role": role, "content": m["value"]})
    elif row.get("data") is not None:
        raw = row["data"]
        if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
            raise DataError(f"{where}: 'data' must be a list of strings (user, assistant, user, ...)")
        messages = [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(raw)]
    elif isinstance(row.get("prompt"), str):
        messages = [{"role": "user", "content": row["prompt"]}]
    else:
        shapes = ["'messages' (a list of {role, content})", "'conversations' (ShareGPT {from, value})",
                  "'data' (UltraChat strings)", "'prompt' (a string)"]
        if noun == "prompt":
            shapes = shapes[-1:] + shapes[:-1]
        raise DataError(
            f"{where}: a {noun} row needs {', '.join(shapes[:-1])} or {shapes[-1]}; it has {sorted(row)}. "
            f"Map other column names with the recipe's 'columns'."
        )
    system = row.get("system")
    if isinstance(system, str) and system and (not messages or messages[0].get("role") != "system"):
        messages = [{"role": "system", "content": system}] + messages
    return check_messages(messages, where)


def expand_sources(sources: list[str] | str) -> list[str]:
    """Glob patterns become the sorted files they match; other entries pass through."""
    out = []
    for s in [sources] if isinstance(sources, str) else sources:
        if any(c in s for c in "*?["):
            found = sorted(glob.glob(s))
            if not found:
                raise DataError(f"{s}: the pattern matches no file")
            out += found
        else:
            out.append(s)
    return out


def _iter_hf(source: str, split: str, builder: str | None = None) -> Iterator[tuple[str, str, dict]]:
    import datasets

    path = Path(source)
    saved = path.is_dir() and any((path / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json"))
    try:
        if saved:
            ds = datasets.load_from_disk(source)
        elif builder:  # one local parquet / csv / arrow file
            ds, split = datasets.load_dataset(builder, data_files=source, split="train"), "train"
        else:
            ds = datasets.load_dataset(source, split=split)
    except Exception as e:  # datasets raises many kinds; the user needs the source and the reason
        raise DataError(f"{source}: cannot load it as a Hugging Face dataset (split {split!r}): {e}") from None
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise DataError(f"{source}: no split {split!r}; it has {sorted(ds)}")
        ds = ds[split]
    for i, row in enumerate(ds):
        yield f"{source}[{split}][{i}]", f"row{i}", row


def _iter_json(path: Path) -> Iterator[tuple[str, str, dict | DataError]]:
    try:
        with open_bytes(path) as f:
            text = f.read().decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        line = e.object.count(b"\n", 0, e.start) + 1 if isinstance(e, UnicodeDecodeError) else None
        raise unreadable(path, e, line) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: a .json source must hold a list of rows (use .jsonl for one row per line)")
    for i, row in enumerate(data):
        where = f"{path}[{i}]"
        yield where, f"item{i}", row if isinstance(row, dict) else DataError(f"{where}: expected a JSON object")


def iter_rows(source: str, split: str = "train") -> Iterator[tuple[str, str, dict | DataError]]:
    """(where, default id, row or the DataError of a malformed row) for every row of one source."""
    path = Path(source)
    name = path.name.removesuffix(".gz")
    if path.is_file() and name.endswith(".jsonl"):
        for lineno, row in iter_jsonl(path):
            yield f"{source}:{lineno}", f"line{lineno}", row
    elif path.is_file() and name.endswith(".json"):
        yield from _iter_json(path)
    elif path.is_file() and path.suffix in FILE_BUILDERS:
        yield from _iter_hf(source, split, builder=FILE_BUILDERS[path.suffix])
    elif path.is_dir() or (not name.endswith((".jsonl", ".json", *FILE_BUILDERS)) and not path.exists()):
        yield from _iter_hf(source, split)
    elif not path.exists():
        raise DataError(f"{source}: no such file")
    else:
        raise DataError(f"{source}: unknown file type; use .jsonl, .jsonl.gz, .json or a dataset folder")


def read_conversations(
    sources: list[str] | str,
    split: str = "train",
    columns: dict[str, str] | None = None,
    on_error: str = "raise",
    noun: str = "conversation",
) -> tuple[list[Conversation], ReadStats]:
    """Every row of `sources` as a Conversation; malformed rows raise, or are skipped and counted."""
    if on_error not in ("raise", "skip"):
        raise DataError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    stats, out = ReadStats(), []
    for source in expand_sources(sources):
        for where, default_id, row in iter_rows(source, split):
            stats.rows += 1
            try:
                if isinstance(row, DataError):
                    raise row
                if columns:
                    row = {columns.get(k, k): v for k, v in row.items()}
                messages = to_messages(row, where, noun)
                rid = row.get("id", row.get("prompt_id", default_id))
                category = row.get("category")
                out.append(Conversation(str(rid), where, messages, category if isinstance(category, str) else None))
            except DataError as e:
                if on_error == "raise":
                    raise
                stats.skip(e)
    return out, stats
