"""Self-distillation: the target answers a prompt set, so the heads learn the target's own habits.

Every user turn of a conversation is answered by the target, turn by turn: turn k is generated
with the target's own earlier answers in context (the dataset's assistant turns are dropped), so
multi-turn data teaches the heads what the target itself writes. Prompts are sorted by length
within windows of `sort_window` (file order between windows, so a run stopped early holds a
sample of every category) and cut into fixed batches; a batch runs all its turns (each turn one
batched `generate` over the rows that have it, shortest first) and is appended to the output in
one fsynced write. A killed run restarts, skips the batches already written and produces exactly
the rows an uninterrupted run would have written (batches never change shape, seeds depend only
on the batch and turn). The settings that decide the rows (the target, the prompts and their
order, the generation settings) are kept beside the output (`out.distill.json` beside
`out.jsonl`), and a resume with other settings is refused: it would append rows of another kind.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from headstart.chat import encode_chat
from headstart.config import DistillConfig
from headstart.files import write_json
from headstart.jsonl import DataError, append_rows, read_jsonl, repair_tail
from headstart.lock import output_lock
from headstart.target import Target
from headstart.train.formats import Conversation, read_conversations
from headstart.train.resume import differences, target_fields

# (prompt token ids per row, max_new_tokens, temperature, top_p, seed) -> new token ids per row
Generate = Callable[[list[list[int]], int, float, float, int], list[list[int]]]


def load_prompt_rows(cfg: DistillConfig) -> tuple[list[Conversation], dict]:
    """The prompts of `cfg.prompts` (any format of train/formats.py) with unique ids and a user turn."""
    convs, read = read_conversations(cfg.prompts, cfg.split, cfg.columns, cfg.on_error, noun="prompt")
    rows, seen = [], set()
    for c in convs:
        problem = None
        if c.id in seen:
            problem = f"{c.where}: duplicate id {c.id!r}"
        elif not any(m["role"] == "user" for m in c.messages):
            problem = f"{c.where}: the row has no user turn to answer"
        if problem:
            if cfg.on_error == "raise":
                raise DataError(problem)
            read.skip(DataError(problem))
            continue
        seen.add(c.id)
        rows.append(c)
    if not rows:
        raise DataError(f"{cfg.prompts}: no prompts in it")
    return rows, read.as_dict()


def user_turns(conv: Conversation, system_prompt: str | None) -> tuple[list[dict], list[dict]]:
    """(messages before the first user turn, the user turns); the dataset's answers are dropped."""
    msgs = [m for m in conv.messages if m["role"] != "assistant"]
    if system_prompt and msgs[0]["role"] != "system":
        msgs = [{"role": "system", "content": system_prompt}] + msgs
    first = next(i for i, m in enumerate(msgs) if m["role"] == "user")
    return msgs[:first], msgs[first:]


def generate_ids(target: Target, prompts: list[list[int]], max_new_tokens: int, **sampling) -> list[list[int]]:
    """Left-padded batched HF `generate` over prompt token ids; returns the new token ids per row."""
    tok = target.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        attn[i, width - len(p) :] = 1
    with torch.no_grad():
        gen = target.model.generate(
            input_ids=ids.to(target.device), attention_mask=attn.to(target.device),
            max_new_tokens=max_new_tokens, pad_token_id=pad_id, top_k=None, **sampling,
        )
    return gen[:, width:].tolist()


def hf_backend(target: Target) -> Generate:
    def run(prompts, max_new_tokens, temperature, top_p, seed):
        torch.manual_seed(seed)
        sampling = dict(do_sample=True, temperature=temperature, top_p=top_p) if temperature > 0 else dict(do_sample=False)
        return generate_ids(target, prompts, max_new_tokens, **sampling)

    return run


def backend_name(name: str) -> str:
    """hf or vllm; auto is vLLM where it is usable (a CUDA GPU and the serving environment, `make vllm`), else HF generate."""
    if name == "auto":
        from headstart.serve.distill_backend import vllm_usable

        return "vllm" if vllm_usable() else "hf"
    if name not in ("hf", "vllm"):
        raise DataError(f"distill.backend must be hf, vllm or auto, got {name!r}")
    return name


def choose_backend(target: Target, name: str) -> Generate:
    """The generation function of backend `name` (hf, vllm or auto)."""
    if backend_name(name) == "hf":
        return hf_backend(target)
    from headstart.serve.distill_backend import vllm_backend

    return vllm_backend(target)


def shard_paths(output: Path, shard_size: int) -> list[Path]:
    """The output files that exist: `output` itself, or its shards output-00000.jsonl, ..."""
    if shard_size <= 0:
        return [output] if output.exists() else []
    return sorted(output.parent.glob(f"{output.stem}-[0-9][0-9][0-9][0-9][0-9]{output.suffix}"))


def settings_path(output: Path) -> Path:
    """The JSON beside the output that records the settings its rows were made with."""
    return output.with_name(f"{output.stem}.distill.json")


def distill_settings(target: Target, cfg: DistillConfig) -> dict:
    """What decides the rows: the target, the prompts and their order, the generation settings
    (every distill field but the output's name; the backend as `auto` resolves here)."""
    settings = target_fields(target)
    settings.update({f"distill.{k}": v for k, v in asdict(cfg).items() if k != "output"})
    settings["distill.backend"] = backend_name(cfg.backend)
    return json.loads(json.dumps(settings, default=str))  # as the stored copy reads back


def check_settings(output: Path, settings: dict) -> None:
    """Refuse to add rows to an output written with other settings; record them for a new output.

    Both layouts (one file, shards) count as rows already there, so a changed shard_size is caught too.
    """
    path = settings_path(output)
    written = [p for p in shard_paths(output, 0) + shard_paths(output, 1) if p.stat().st_size > 0]
    if not written:
        write_json(path, {"settings": settings})
        return
    if not path.is_file():
        raise DataError(
            f"{output} holds rows but {path.name} is not beside it, so the settings they were made with are unknown "
            f"and rows of another kind could be appended. Write to a new distill.output, or move the old rows away"
        )
    try:
        stored = json.loads(path.read_text())["settings"]
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a distill settings file ({e}); move it and {output} away, or write to a new distill.output") from None
    diffs = differences(stored, settings)
    if diffs:
        raise DataError(
            f"{output} was written with other settings ({'; '.join(diffs)}; recorded in {path.name}): resuming "
            f"would append rows of another kind. Resume with the settings it was written with, or write to a new "
            f"distill.output"
        )


class ShardWriter:
    """Appends whole batches to `output`, or to shards of about `shard_size` rows."""

    def __init__(self, output: Path, shard_size: int):
        self.output, self.shard_size = output, shard_size
        self.paths = shard_paths(output, shard_size)
        if self.paths:
            repair_tail(self.paths[-1])  # a killed writer may have left a partial last line
        self.rows_in_last = sum(1 for _ in read_jsonl(self.paths[-1])) if self.paths else 0

    def done_ids(self) -> set[str]:
        return {str(r["id"]) for p in self.paths for _, r in read_jsonl(p)}

    def drop_tail(self, ids: set[str]) -> None:
        """Remove the rows of an unfinished batch (a write cut short) from the end of the last file."""
        last = self.paths[-1]
        lines = last.read_text(encoding="utf-8").splitlines(keepends=True)
        keep = len(lines)
        while keep and str(json.loads(lines[keep - 1])["id"]) in ids:
            keep -= 1
        if len(lines) - keep != len(ids):
            raise DataError(
                f"{self.output}: its rows are not whole batches of this run's plan; it was written with other "
                f"settings (distill.prompts, offset, limit, batch_size, sort_window). Resume with the same settings "
                f"or write to a new distill.output"
            )
        tmp = last.with_name(last.name + ".tmp")
        tmp.write_text("".join(lines[:keep]), encoding="utf-8")
        os.replace(tmp, last)
        self.rows_in_last = keep

    def append(self, rows: list[dict]) -> None:
        if self.shard_size <= 0:
            path = self.output
        else:
            if not self.paths or self.rows_in_last >= self.shard_size:
                n = len(self.paths)
                self.paths.append(self.output.parent / f"{self.output.stem}-{n:05d}{self.output.suffix}")
                self.rows_in_last = 0
            path = self.paths[-1]
        append_rows(path, rows)
        self.rows_in_last += len(rows)


def _plan_batches(lengths: list[int], batch_size: int, sort_window: int) -> list[list[int]]:
    batches = []
    for w in range(0, len(lengths), sort_window):
        order = sorted(range(w, min(w + sort_window, len(lengths))), key=lambda i: (lengths[i], i))
        batches += [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return batches


def answer_batch(
    target: Target, cfg: DistillConfig, generate: Generate, rows: list[Conversation], plans: list[tuple],
    first: list[list[int]], seed: int, stats: dict,
) -> list[dict]:
    """Answer every user turn of one batch of rows, turn by turn; returns the output rows.

    plans[j] = (messages before the first user turn, user turns) of rows[j]; first[j] = its
    rendered first prompt. Turn k of every row that has it is one batched `generate` call.
    """
    tok, limit = target.tokenizer, target.max_position_embeddings
    eos = target.model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
    convs = [list(head) for head, _ in plans]  # the conversation so far, per row
    finishes: list[list[str]] = [[] for _ in rows]
    answer_tokens = [0] * len(rows)
    for k in range(max(len(turns) for _, turns in plans)):
        contexts = {}
        for j, (_, turns) in enumerate(plans):
            if k >= len(turns) or (k > 0 and finishes[j][-1] == "context"):
                continue
            ids = first[j] if k == 0 else encode_chat(tok, convs[j] + [turns[k]])[0].tolist()
            if limit and len(ids) + cfg.max_new_tokens > limit:
                # The target's own answers filled its context: keep the turns so far, and count.
                stats["turns_cut_by_context"] += len(turns) - k
                finishes[j].append("context")
                continue
            contexts[j] = ids
        if not contexts:
            break
        order = sorted(contexts, key=lambda j: (len(contexts[j]), j))  # shortest first: less padding
        new = generate([contexts[j] for j in order], cfg.max_new_tokens, cfg.temperature, cfg.top_p, seed + 1_000_003 * k)
        for j, ids in zip(order, new):
            stop = next((n for n, t in enumerate(ids) if t in eos_ids), None)
            answer = ids if stop is None else ids[:stop]
            convs[j] += [plans[j][1][k], {"role": "assistant", "content": tok.decode(answer, skip_special_tokens=True)}]
            finishes[j].append("length" if stop is None else "stop")
            answer_tokens[j] += len(answer)
            stats["new_tokens"] += len(answer)
            stats["new_turns"] += 1
    return [
        {
            "id": r.id,
            "category": r.category,
            "source": r.where,
            "messages": convs[j],
            "finish": finishes[j][-1],  # stop, length, or context (a later turn did not fit)
            "turn_finish": finishes[j],
            "answer_tokens": answer_tokens[j],
        }
        for j, r in enumerate(rows)
    ]


def distill(
    target: Target,
    cfg: DistillConfig,
    progress: bool = True,
    generate: Generate | None = None,
    max_batches: int | None = None,
) -> dict:
    """Answer every user turn of `cfg.prompts` with the target; append rows to `cfg.output`.

    `generate` replaces the backend chosen by `cfg.backend`; `max_batches` stops after that many
    new batches (a run cut short on purpose; the next call resumes it). The run holds the lock on
    `cfg.output` throughout (headstart/lock.py): a second run into it is refused.
    """
    with output_lock(cfg.output, "distill.output", "headstart distill"):
        return _distill(target, cfg, progress, generate, max_batches)


def _distill(target: Target, cfg: DistillConfig, progress: bool, generate: Generate | None, max_batches: int | None) -> dict:
    tok = target.tokenizer
    rows, read_stats = load_prompt_rows(cfg)
    rows = rows[cfg.offset :]
    if cfg.limit is not None:
        rows = rows[: cfg.limit]
    plans = [user_turns(r, cfg.system_prompt) for r in rows]
    first = [encode_chat(tok, head + turns[:1])[0].tolist() for head, turns in plans]
    lengths = [len(f) + sum(len(tok(m["content"], add_special_tokens=False).input_ids) for m in turns[1:])
               for f, (_, turns) in zip(first, plans)]
    limit = target.max_position_embeddings
    for r, ids in zip(rows, first):
        if limit and len(ids) + cfg.max_new_tokens > limit:
            raise DataError(
                f"prompt {r.id!r} ({r.where}) has {len(ids)} tokens; with max_new_tokens={cfg.max_new_tokens} it "
                f"exceeds the target's context of {limit} tokens. Shorten it or lower distill.max_new_tokens."
            )
    batches = _plan_batches(lengths, cfg.batch_size, cfg.sort_window)
    generate = generate or choose_backend(target, cfg.backend)  # vLLM loads here: a failure leaves the output untouched

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    check_settings(out, distill_settings(target, cfg))  # before anything in the output is touched
    writer = ShardWriter(out, cfg.shard_size)
    done = writer.done_ids()
    complete = {rows[i].id for b in batches if all(rows[i].id in done for i in b) for i in b}
    partial = (done & {r.id for r in rows}) - complete
    if partial:  # a batch whose write was cut after some of its rows: written again, whole
        writer.drop_tail(partial)
        done -= partial
    todo = [b for b in batches if not all(rows[i].id in done for i in b)]
    if max_batches is not None:
        todo = todo[:max_batches]
    stats = {"prompts": len(rows), "skipped_batches": len(batches) - len(todo), "new_rows": 0, "new_turns": 0,
             "new_tokens": 0, "turns_cut_by_context": 0, "read": read_stats}

    start = time.perf_counter()
    bar = tqdm(total=sum(len(b) for b in todo), desc="distill", unit="conv", disable=not progress)
    for b in todo:
        out_rows = answer_batch(target, cfg, generate, [rows[i] for i in b], [plans[i] for i in b],
                                [first[i] for i in b], cfg.seed + b[0], stats)
        writer.append(out_rows)
        stats["new_rows"] += len(out_rows)
        bar.update(len(b))
        bar.set_postfix(tok_s=f"{stats['new_tokens'] / (time.perf_counter() - start):.0f}")
    bar.close()
    stats["seconds"] = round(time.perf_counter() - start, 1)
    stats["tokens_per_s"] = round(stats["new_tokens"] / max(stats["seconds"], 1e-9), 1)
    stats["generation"] = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens,
                           "backend": cfg.backend}
    stats["output"] = [str(p) for p in writer.paths] if cfg.shard_size > 0 else str(out)
    return stats
