"""Self-distillation: the target answers a prompt set, so the heads learn the target's own habits.

Prompts are sorted by length within windows of `sort_window` prompts (file order between windows,
so a run stopped early holds a sample of every category) and cut into fixed batches; each batch is appended
to the output in one fsynced write. A killed run restarts, skips the batches already written and
produces exactly the rows an uninterrupted run would have written (batches never change shape).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from headstart.config import DistillConfig
from headstart.jsonl import DataError, append_rows, read_jsonl, repair_tail
from headstart.target import Target


def load_prompt_rows(path: str | Path) -> list[dict]:
    """Rows with an `id` and either `prompt` (a string) or `messages` ending with a user turn."""
    rows, seen = [], set()
    for lineno, row in read_jsonl(path):
        if "messages" not in row and not isinstance(row.get("prompt"), str):
            raise DataError(f"{path}:{lineno}: a prompt row needs 'prompt' (a string) or 'messages'")
        rid = str(row.get("id", f"line{lineno}"))
        if rid in seen:
            raise DataError(f"{path}:{lineno}: duplicate id {rid!r}")
        seen.add(rid)
        messages = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
        rows.append({"id": rid, "category": row.get("category"), "messages": messages})
    if not rows:
        raise DataError(f"{path}: no prompts in the file")
    return rows


def _prompt_messages(row: dict, system_prompt: str | None) -> list[dict]:
    msgs = [m for m in row["messages"] if m["role"] != "assistant" or m is not row["messages"][-1]]
    if system_prompt and msgs[0]["role"] != "system":
        msgs = [{"role": "system", "content": system_prompt}] + msgs
    return msgs


def generate_batch(target: Target, texts: list[str], max_new_tokens: int, **sampling) -> list[list[int]]:
    """Left-padded batched `generate` over rendered prompts; returns the new token ids per row."""
    tok = target.tokenizer
    tok.padding_side = "left"
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(target.device)
    with torch.no_grad():
        gen = target.model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=pad_id, top_k=None, **sampling)
    return gen[:, enc.input_ids.shape[1] :].tolist()


def distill(target: Target, cfg: DistillConfig, progress: bool = True) -> dict:
    """Answer the prompts of `cfg.prompts` with the target; append rows to `cfg.output`."""
    tok = target.tokenizer
    rows = load_prompt_rows(cfg.prompts)[cfg.offset :]
    if cfg.limit is not None:
        rows = rows[: cfg.limit]
    texts = [
        tok.apply_chat_template(_prompt_messages(r, cfg.system_prompt), tokenize=False, add_generation_prompt=True)
        for r in rows
    ]
    lengths = [len(tok(t, add_special_tokens=False).input_ids) for t in texts]
    limit = target.max_position_embeddings
    for r, n in zip(rows, lengths):
        if limit and n + cfg.max_new_tokens > limit:
            raise DataError(
                f"prompt {r['id']!r} has {n} tokens; with max_new_tokens={cfg.max_new_tokens} it exceeds "
                f"the target's context of {limit} tokens. Shorten it or lower distill.max_new_tokens."
            )
    batches = []
    for w in range(0, len(rows), cfg.sort_window):
        order = sorted(range(w, min(w + cfg.sort_window, len(rows))), key=lambda i: (lengths[i], i))
        batches += [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    repair_tail(out)
    done = {r["id"] for _, r in read_jsonl(out)} if out.exists() and out.stat().st_size else set()
    todo = [b for b in batches if not all(rows[i]["id"] in done for i in b)]
    stats = {"prompts": len(rows), "skipped_batches": len(batches) - len(todo), "new_rows": 0, "new_tokens": 0}

    eos = target.model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
    generator_seed = cfg.seed
    start = time.perf_counter()
    bar = tqdm(total=sum(len(b) for b in todo), desc="distill", unit="answer", disable=not progress)
    for b in todo:
        sampling = dict(do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p) if cfg.temperature > 0 else dict(do_sample=False)
        torch.manual_seed(generator_seed + b[0])
        new = generate_batch(target, [texts[i] for i in b], cfg.max_new_tokens, **sampling)
        out_rows = []
        for i, ids in zip(b, new):
            stop = next((j for j, t in enumerate(ids) if t in eos_ids), None)
            answer = ids if stop is None else ids[:stop]
            row = rows[i]
            out_rows.append(
                {
                    "id": row["id"],
                    "category": row["category"],
                    "messages": _prompt_messages(row, cfg.system_prompt)
                    + [{"role": "assistant", "content": tok.decode(answer, skip_special_tokens=True)}],
                    "finish": "length" if stop is None else "stop",
                    "answer_tokens": len(answer),
                }
            )
            stats["new_tokens"] += len(answer)
        append_rows(out, out_rows)
        stats["new_rows"] += len(out_rows)
        bar.update(len(b))
        bar.set_postfix(tok_s=f"{stats['new_tokens'] / (time.perf_counter() - start):.0f}")
    bar.close()
    stats["seconds"] = round(time.perf_counter() - start, 1)
    stats["tokens_per_s"] = round(stats["new_tokens"] / max(stats["seconds"], 1e-9), 1)
    stats["generation"] = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens}
    return stats
