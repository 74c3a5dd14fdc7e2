"""`headstart promote`: serve a new head in place of the old one only when it drafts better on logged traffic.

    headstart promote RECIPE --head runs/h2/final --over served/head --prompts runs/served --margin 0.02

Both heads draft along the same texts: the last `--num-prompts` chats of the served log (serve/served_log.py's
rows, or any JSONL of `messages` rows ending with the assistant's answer; its token ids when the log kept them,
else the answer's text tokenized), each head's chain of k checked against the answer as served, teacher-forced,
in vLLM's counts (serve/prediction.py `along_text_acceptance`, what serve-check predicts vLLM's acceptance
with). The new head replaces the old folder only when its mean acceptance length is at least (1 + margin) times
the old one's, and its corpus table (swapped with it, what `--method corpus` and `hybrid` draft from) drafts
along the same texts no worse than the old folder's, less the margin. The swap loses nothing: the new folder is
copied beside the old one, the old folder is renamed to OLD.prev-<UTC time> (kept for rollback, never deleted),
then the copy is renamed to OLD; the --head folder itself is left as it was. A running `headstart serve` keeps
serving the old export until it is restarted.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from headstart.errors import HeadstartError
from headstart.jsonl import DataError, read_jsonl

#: the newest logged chats compared, by default (the rest are for training the new head)
NUM_PROMPTS = 200


class PromoteError(HeadstartError):
    """A promotion that cannot be done as asked."""


def logged_rows(source: str | Path, count: int = NUM_PROMPTS) -> list[dict]:
    """The newest `count` rows of a log folder's served-*.jsonl files (in their order), or of one JSONL file."""
    source = Path(source)
    files = sorted(source.glob("served-*.jsonl")) if source.is_dir() else [source]
    if not source.exists() or not files:
        raise PromoteError(f"--prompts {source}: no served-*.jsonl there; give a --log-served folder or a JSONL file of chats")
    rows = [row for f in files for _, row in read_jsonl(f)]
    return rows[-count:]


def texts_of(tokenizer, rows: list[dict]) -> tuple[list[list[int]], list[list[int]]]:
    """(prompts, texts): each chat's conversation before its last message, rendered by the chat template, and that
    last (assistant) message's tokens: the log's `answer_token_ids` when it kept them, else its text tokenized."""
    from headstart.chat import encode_chat

    prompts, texts = [], []
    for i, row in enumerate(rows):
        messages = row.get("messages") if isinstance(row, dict) else None
        if not isinstance(messages, list) or len(messages) < 2 or messages[-1].get("role") != "assistant":
            raise DataError(f"row {i} of the prompts: expected 'messages' ending with the assistant's answer")
        prompts.append(encode_chat(tokenizer, messages[:-1])[0].tolist())
        texts.append(row.get("answer_token_ids") or tokenizer.encode(messages[-1]["content"], add_special_tokens=False))
    return prompts, texts


def promote_refusal(new: Path, old: Path) -> str | None:
    """Why `new` cannot replace `old` (None when it can): either is no head folder, they are one folder, or the
    old folder's parent cannot be written (the swap renames there)."""
    from headstart.heads.checkpoint import CONFIG_NAME

    for flag, folder in (("--head", new), ("--over", old)):
        if not (folder / CONFIG_NAME).is_file():
            return f"{flag} {folder}: no {CONFIG_NAME}; give a head folder"
    if new.resolve() == old.resolve():
        return f"--head and --over are the same folder ({old})"
    if not os.access(old.resolve().parent, os.W_OK | os.X_OK):
        return f"--over {old}: its folder {old.resolve().parent} cannot be written (the old head is renamed there)"
    return None


def better(new_tau: float | None, old_tau: float | None, margin: float) -> bool:
    """Whether the new head's mean acceptance length beats the old one's by the relative margin."""
    if new_tau is None:
        return False
    return old_tau is None or new_tau >= old_tau * (1 + margin)


def table_holds(new_tau: float | None, old_tau: float | None, margin: float) -> bool:
    """Whether the new folder's corpus table drafts no worse than the old one's, less the relative margin: the
    folder swapped holds the table too, which `--method corpus` and `hybrid` serve. A missing table counts as
    drafting nothing; an old folder without one has nothing to lose."""
    if old_tau is None:
        return True
    return new_tau is not None and new_tau >= old_tau * (1 - margin)


def swap(new: Path, old: Path) -> Path:
    """Copy `new` beside `old`, rename `old` to OLD.prev-<UTC time> and the copy to `old`; returns where the old
    head went. A failed step puts the old folder back; nothing is deleted but the unfinished copy."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    prev = old.with_name(f"{old.name}.prev-{stamp}")
    n = 1
    while prev.exists():
        prev, n = old.with_name(f"{old.name}.prev-{stamp}-{n}"), n + 1
    staging = old.with_name(f".{old.name}.promote-{os.getpid()}")
    try:
        shutil.copytree(new, staging, symlinks=True)
        os.rename(old, prev)
        try:
            os.rename(staging, old)
        except OSError:
            os.rename(prev, old)
            raise
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return prev


def promote(target, new_path: str | Path, old_path: str | Path, prompts: str | Path, k: int = 3, margin: float = 0.02,
            num_prompts: int = NUM_PROMPTS, rows: list[dict] | None = None) -> dict:
    """Compare the two heads along the logged chats and swap the folders when the new one is better (module doc).
    Returns the report: each head's and table's counts, the margin, whether it was promoted, what kept it out where
    the head was better (`kept_by`: "table") and where the old head went.
    `rows`: the chats `logged_rows(prompts, num_prompts)` returned, where the caller has read them already."""
    from headstart.heads.checkpoint import load_heads

    new, old = Path(new_path), Path(old_path)
    refusal = promote_refusal(new, old)
    if refusal:
        raise PromoteError(refusal)
    rows = logged_rows(prompts, num_prompts) if rows is None else rows
    heads = {"new": load_heads(new, target=target), "old": load_heads(old, target=target)}  # both checked first
    counts, tables = compare(target, heads, rows, k)
    taus = [counts[name]["mean_acceptance_length"] for name in ("new", "old")]
    table_taus = [t["mean_acceptance_length"] if t else None for t in (tables["new"], tables["old"])]
    head_better = better(*taus, margin)
    kept_by = "table" if head_better and not table_holds(*table_taus, margin) else None  # the reason, for the report
    promoted = head_better and kept_by is None
    kept_at = swap(new, old) if promoted else None
    return {"new": str(new), "old": str(old), "prompts": str(prompts), "chats": len(rows), "k": k, "margin": margin,
            "acceptance": counts, "tables": tables, "promoted": promoted, "kept_by": kept_by,
            "old_kept_at": str(kept_at) if kept_at else None}


def compare(target, heads: dict, rows: list[dict], k: int) -> tuple[dict, dict]:
    """Each head's chain of k and each folder's corpus table drafting along the chats' answers (`texts_of`), in
    vLLM's counts: ({name: the head's counts}, {name: its table's counts, None where it has no table})."""
    from headstart.serve.prediction import along_text_acceptance

    prompts, texts = texts_of(target.tokenizer, rows)
    counts = {name: along_text_acceptance(target, head, prompts, texts, k) for name, head in heads.items()}
    tables = {name: table_acceptance(head.corpus, prompts, texts, k) if head.corpus is not None else None
              for name, head in heads.items()}
    return counts, tables


def table_acceptance(corpus, prompts: list[list[int]], texts: list[list[int]], k: int) -> dict:
    """The corpus proposer's counts along the texts with this table (vLLM's, as serve-check predicts them), and
    its mean acceptance length."""
    from headstart.serve.proposer import along_text_counts

    counts = along_text_counts(corpus, prompts, texts, k)
    counts["mean_acceptance_length"] = 1 + counts["accepted"] / counts["drafts"] if counts["drafts"] else None
    return counts


def format_promotion(report: dict) -> str:
    """The comparison table and the decision, for the terminal."""
    lines = [f"{report['chats']} logged chats from {report['prompts']}, a chain of k = {report['k']}, teacher-forced along the "
             "answers as served (vLLM's counts; τ counts the bonus token)", "",
             "| head | folder | drafts | accepted | τ (mean acceptance length) |", "|---|---|---|---|---|"]
    for name in ("new", "old"):
        c = report["acceptance"][name]
        tau = f"{c['mean_acceptance_length']:.3f}" if c["mean_acceptance_length"] else "-"
        lines.append(f"| {name} | {report[name]} | {c['drafts']} | {c['accepted']} | {tau} |")
    tables = report.get("tables") or {}
    if any(tables.values()):  # the folders' corpus tables, swapped with the heads
        lines += ["", "| corpus table (`--method corpus`) | drafts | accepted | τ |", "|---|---|---|---|"]
        for name in ("new", "old"):
            c = tables.get(name)
            tau = f"{c['mean_acceptance_length']:.3f}" if c and c["mean_acceptance_length"] else "-"
            lines.append(f"| {name} | {c['drafts'] if c else 'none'} | {c['accepted'] if c else '-'} | {tau} |")
    new, old = (report["acceptance"][n]["mean_acceptance_length"] for n in ("new", "old"))
    gain = f"{(new / old - 1) * 100:+.1f}%" if new and old else "n/a"
    if report.get("kept_by") == "table":
        lines.append(f"\nkept the old head: τ {gain}, but the new folder's corpus table drafts worse than the old one's by more "
                     f"than the margin of {report['margin']:.0%} (or it has none); nothing changed")
    elif report["promoted"]:
        lines.append(f"\npromoted: τ {gain} (margin {report['margin']:.0%}); {report['new']} copied into {report['old']}, "
                     f"the old head kept at {report['old_kept_at']} (restart `headstart serve` to serve the new one)")
    else:
        lines.append(f"\nkept the old head: τ {gain}, under the margin of {report['margin']:.0%}; nothing changed")
    return "\n".join(lines)
