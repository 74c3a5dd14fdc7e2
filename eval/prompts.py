"""Held-out prompt sets: the project's own categorised prompts (data/prompts/eval.jsonl)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from headstart.jsonl import DataError, read_jsonl


def load_eval_prompts(path: str | Path, n: int | None = None) -> list[dict]:
    """Rows {id, category, prompt}; with `n`, taken round-robin across categories (stable order)."""
    rows = []
    for lineno, row in read_jsonl(path):
        if not isinstance(row.get("prompt"), str):
            raise DataError(f"{path}:{lineno}: an eval row needs 'prompt' (a string)")
        rows.append({"id": str(row.get("id", lineno)), "category": row.get("category") or "all", "prompt": row["prompt"]})
    if not rows:
        raise DataError(f"{path}: no prompts")
    if n is None or n >= len(rows):
        return rows
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    picked, i = [], 0
    while len(picked) < n:
        for cat in sorted(by_cat):
            if i < len(by_cat[cat]) and len(picked) < n:
                picked.append(by_cat[cat][i])
        i += 1
    return picked
