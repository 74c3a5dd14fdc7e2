"""Conversations → token ids and an assistant-only loss mask, with the target's own chat template.

The mask is derived from the template itself, not by searching for a separator string: for each
assistant turn, the conversation rendered up to the turn (with the generation prompt) and up to
the end of the turn are both prefixes of the whole rendering; the tokens between them (by the
tokenizer's character offsets) are the assistant's. A template for which that does not hold is
reported, not guessed around.
"""

from __future__ import annotations

import hashlib
import random
import sys
from dataclasses import dataclass
from functools import cached_property

import torch

from headstart.chat import render_chat
from headstart.jsonl import DataError
from headstart.train.formats import read_conversations

MIN_LOSS_TOKENS = 3  # fewer assistant tokens leave nothing a head could be asked to predict


@dataclass
class Example:
    input_ids: list[int]
    loss_mask: list[int]
    source: str  # "file:line" (or "dataset[split][i]") for error messages
    truncated: bool = False
    dropped_tokens: int = 0  # tokens cut by max_length
    draft_weight: list[float] | None = None  # per-token loss weights (complementary training), None = all 1

    def row(self) -> dict:
        """What a dataset hands the collator for this example."""
        row = {"input_ids": self.input_ids, "loss_mask": self.loss_mask}
        if self.draft_weight is not None:
            row["draft_weight"] = self.draft_weight
        return row

    @cached_property
    def key(self) -> str:
        """A content key: the offline feature cache finds an example by its token ids, not its path."""
        return hashlib.sha1(torch.tensor(self.input_ids, dtype=torch.int32).numpy().tobytes()).hexdigest()[:20]


def tokenize_conversation(tokenizer, messages: list[dict], max_length: int, where: str = "conversation") -> Example:
    """Token ids of the whole conversation and a mask that is 1 on assistant tokens only.

    Each assistant turn is the text between two renderings that must both be prefixes of the whole
    rendering: the conversation before the turn (with the generation prompt) and the conversation
    up to the end of the turn. Tokens overlapping that span (by the tokenizer's character offsets)
    are the turn's. Comparing text, not tokens, keeps templates whose generation prompt ends in
    whitespace that merges with the answer's first token (Llama-3's "\n\n" on some tokenizers).
    Templates that rewrite earlier turns (reasoning models that drop the <think> part of earlier
    answers) break the prefix property and are reported, not guessed around.
    """
    from jinja2.exceptions import TemplateError

    try:
        full = render_chat(tokenizer, messages, add_generation_prompt=False)
        spans = []
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            start = render_chat(tokenizer, messages[:i], add_generation_prompt=True)
            end = render_chat(tokenizer, messages[: i + 1], add_generation_prompt=False)
            if not (full.startswith(start) and full.startswith(end) and len(start) <= len(end)):
                raise DataError(
                    f"{where}: the chat template does not render assistant turn {i} the same way alone as inside "
                    f"the whole conversation (the rendering up to the turn is not a prefix of the whole), so its "
                    f"tokens cannot be found reliably. Templates that rewrite or drop earlier turns do this "
                    f"(e.g. reasoning models that strip <think>...</think> from earlier answers). Train on one row "
                    f"per assistant turn (the earlier turns as the template renders them), or remove the rewritten "
                    f"part from earlier answers in the data."
                )
            spans.append((len(start), len(end)))
    except TemplateError as e:
        raise DataError(f"{where}: the chat template refused the conversation: {e}") from None
    try:
        enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:
        raise DataError(f"{type(tokenizer).__name__} gives no character offsets: the loss mask needs a fast tokenizer") from None
    ids = enc["input_ids"]
    mask = [int(any(a < e and b > s for s, e in spans)) for a, b in enc["offset_mapping"]]
    dropped = max(0, len(ids) - max_length)
    return Example(ids[:max_length], mask[:max_length], where, dropped > 0, dropped)


def build_examples(
    tokenizer,
    files: list[str],
    max_length: int,
    limit: int | None = None,
    *,
    split: str = "train",
    columns: dict[str, str] | None = None,
    on_error: str = "raise",
) -> tuple[list[Example], dict]:
    """Tokenise every conversation of `files` (any format of train/formats.py).

    Returns the examples and counts of everything that did not become a whole example: malformed
    rows skipped (on_error='skip'), conversations without an assistant turn, template failures,
    truncated conversations and their lost tokens, conversations with too few assistant tokens.
    Nothing is dropped without being counted here; the trainer writes these stats.
    """
    if not files:
        raise DataError("data.train_files is empty: name at least one file or dataset of conversations")
    convs, read = read_conversations(files, split=split, columns=columns, on_error=on_error)
    stats = read.as_dict()
    if limit is not None:
        stats["unused_beyond_limit"] = max(0, len(convs) - limit)
        convs = convs[:limit]
    if not convs:
        raise DataError(f"no conversations in {', '.join(files)}: the dataset is empty")
    stats.update(conversations=len(convs), no_assistant_turn=0, template_errors=0, truncated=0, truncated_tokens=0,
                 no_loss_tokens=0)
    examples = []

    def drop(error: DataError, counter: str) -> None:
        if on_error == "raise":
            raise error
        stats[counter] += 1
        if len(stats["skip_reasons"]) < 5:
            stats["skip_reasons"].append(str(error))

    for conv in convs:
        if not any(m["role"] == "assistant" for m in conv.messages):
            drop(DataError(f"{conv.where}: the conversation has no assistant turn to learn from"), "no_assistant_turn")
            continue
        try:
            ex = tokenize_conversation(tokenizer, conv.messages, max_length, conv.where)
        except DataError as e:
            drop(e, "template_errors")
            continue
        stats["truncated"] += ex.truncated
        stats["truncated_tokens"] += ex.dropped_tokens
        if sum(ex.loss_mask) < MIN_LOSS_TOKENS:
            stats["no_loss_tokens"] += 1
            continue
        examples.append(ex)
    stats["examples"] = len(examples)
    stats["tokens"] = sum(len(e.input_ids) for e in examples)
    stats["loss_tokens"] = sum(sum(e.loss_mask) for e in examples)
    if not examples:
        raise DataError(f"no usable conversation in {', '.join(files)} (all too short after truncation): {stats}")
    return examples, stats


def split(examples: list[Example], eval_size: int, seed: int) -> tuple[list[Example], list[Example]]:
    """A seeded held-out split; eval gets min(eval_size, 10%) of the examples (a cap said on stderr)."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_eval = min(eval_size, len(examples) // 10)
    if n_eval < eval_size:
        print(f"data.eval_size={eval_size}: holding out {n_eval} of the {len(examples)} examples instead, as at most "
              f"a tenth of them is held out (training keeps the rest)", file=sys.stderr)
    return [examples[i] for i in order[n_eval:]], [examples[i] for i in order[:n_eval]]


def training_examples(tokenizer, data) -> tuple[list[Example], list[Example], dict]:
    """(trained, held out, reading stats): the recipe's `data` section's conversations as the trainer
    reads them (`build_examples`) and splits them (`split`, data.eval_size held out with data.seed).
    Peer trainers get the same examples from here (train/peer_data.py)."""
    examples, stats = build_examples(tokenizer, data.train_files, data.max_length, data.limit,
                                     split=data.split, columns=data.columns, on_error=data.on_error)
    trained, heldout = split(examples, data.eval_size, data.seed)
    return trained, heldout, stats


class ExampleDataset(torch.utils.data.Dataset):
    def __init__(self, examples: list[Example]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def lengths(self) -> list[int]:
        """Tokens per example, for length-grouped batches (no row is read to get them)."""
        return [len(e.input_ids) for e in self.examples]

    def __getitem__(self, i: int) -> dict:
        return self.examples[i].row()


def collate(rows: list[dict], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad a batch: input_ids, attention_mask and loss_mask, all (B, T); draft_weight (B, T,
    float, 0 on padding) when the rows carry per-token loss weights.

    Rows read from an offline feature cache also carry `cached_*` tensors (T, D); they are padded
    with zeros to (B, T, D), and `batch_features` returns them instead of running the target.
    """
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    loss = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.as_tensor(r["input_ids"])
        attn[i, :n] = 1
        loss[i, :n] = torch.as_tensor(r["loss_mask"])
    batch = {"input_ids": ids, "attention_mask": attn, "loss_mask": loss}
    if "draft_weight" in rows[0]:
        weight = torch.zeros((len(rows), width), dtype=torch.float32)
        for i, r in enumerate(rows):
            weight[i, : len(r["draft_weight"])] = torch.as_tensor(r["draft_weight"], dtype=torch.float32)
        batch["draft_weight"] = weight
    for key in (k for k in rows[0] if k.startswith("cached_")):
        first = rows[0][key]
        padded = first.new_zeros((len(rows), width, first.shape[-1]))  # (B, T, D)
        for i, r in enumerate(rows):
            padded[i, : r[key].shape[0]] = r[key]
        batch[key] = padded
    return batch
