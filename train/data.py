"""Conversations → token ids and an assistant-only loss mask, with the target's own chat template.

The mask is derived from the template itself, not by searching for a separator string: for each
assistant turn, the conversation rendered up to the turn (with the generation prompt) and up to
the end of the turn are both token prefixes of the whole rendering; the tokens between them are
the assistant's. A template for which that does not hold is reported, not guessed around.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from headstart.jsonl import DataError, read_jsonl

ROLES = ("system", "user", "assistant")


@dataclass
class Example:
    input_ids: list[int]
    loss_mask: list[int]
    source: str  # "file:line" for error messages
    truncated: bool = False


def check_messages(messages, where: str) -> list[dict]:
    """Validate a list of {role, content} messages; raise DataError naming `where`."""
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{where}: 'messages' must be a non-empty list of {{role, content}}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise DataError(f"{where}: message {i} must be {{'role': one of {ROLES}, 'content': str}}, got {m!r}")
    if not any(m["role"] == "assistant" for m in messages):
        raise DataError(f"{where}: the conversation has no assistant turn to learn from")
    return messages


def _render(tokenizer, messages: list[dict], add_generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    return tokenizer(text, add_special_tokens=False).input_ids


def tokenize_conversation(tokenizer, messages: list[dict], max_length: int, where: str = "conversation") -> Example:
    """Token ids of the whole conversation and a mask that is 1 on assistant tokens only."""
    full = _render(tokenizer, messages, add_generation_prompt=False)
    mask = [0] * len(full)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start = _render(tokenizer, messages[:i], add_generation_prompt=True)
        end = _render(tokenizer, messages[: i + 1], add_generation_prompt=False)
        if full[: len(start)] != start or full[: len(end)] != end:
            raise DataError(
                f"{where}: the chat template does not render turn {i} as a token prefix of the whole "
                f"conversation, so the assistant tokens cannot be found reliably"
            )
        for j in range(len(start), len(end)):
            mask[j] = 1
    truncated = len(full) > max_length
    return Example(full[:max_length], mask[:max_length], where, truncated)


def load_conversations(path: str | Path) -> list[tuple[str, list[dict]]]:
    """(where, messages) for every row of a JSONL conversation file (.jsonl or .jsonl.gz)."""
    out = []
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        if "messages" not in row:
            raise DataError(f"{where}: a conversation row needs 'messages' (a list of {{role, content}})")
        out.append((where, check_messages(row["messages"], where)))
    return out


def build_examples(tokenizer, files: list[str], max_length: int, limit: int | None = None) -> tuple[list[Example], dict]:
    """Tokenise every conversation of `files`; returns examples and counts (truncated, no-loss)."""
    if not files:
        raise DataError("data.train_files is empty: name at least one JSONL file of conversations")
    convs = [c for f in files for c in load_conversations(f)]
    if limit is not None:
        convs = convs[:limit]
    if not convs:
        raise DataError(f"no conversations in {', '.join(files)}: the dataset is empty")
    examples, stats = [], {"conversations": len(convs), "truncated": 0, "no_loss_tokens": 0}
    for where, messages in convs:
        ex = tokenize_conversation(tokenizer, messages, max_length, where)
        stats["truncated"] += ex.truncated
        if sum(ex.loss_mask) < 3:  # nothing a head could be asked to predict
            stats["no_loss_tokens"] += 1
            continue
        examples.append(ex)
    stats["examples"] = len(examples)
    stats["loss_tokens"] = sum(sum(e.loss_mask) for e in examples)
    if not examples:
        raise DataError(f"no usable conversation in {', '.join(files)} (all too short after truncation)")
    return examples, stats


def split(examples: list[Example], eval_size: int, seed: int) -> tuple[list[Example], list[Example]]:
    """A seeded held-out split; eval gets min(eval_size, 10%) of the examples."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_eval = min(eval_size, len(examples) // 10)
    return [examples[i] for i in order[n_eval:]], [examples[i] for i in order[:n_eval]]


class ExampleDataset(torch.utils.data.Dataset):
    def __init__(self, examples: list[Example]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict:
        e = self.examples[i]
        return {"input_ids": e.input_ids, "loss_mask": e.loss_mask}


def collate(rows: list[dict], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad a batch: input_ids, attention_mask and loss_mask, all (B, T)."""
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    loss = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        attn[i, :n] = 1
        loss[i, :n] = torch.tensor(r["loss_mask"])
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": loss}
