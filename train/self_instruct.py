"""Self-instruct: the target writes new user requests in the style of the templated prompt set.

Each request is produced by showing the target a few random prompts of one category and asking
for one more of the same kind (sampled, so requests differ). Replies are cleaned to one request,
and kept only when new: not a duplicate of a seed, an earlier reply, or an excluded (held-out)
prompt. This widens the prompt distribution beyond the templates at no cost but compute.
"""

from __future__ import annotations

import random
import re

import torch
from tqdm.auto import tqdm

from headstart.chat import encode_chat
from headstart.target import Target
from headstart.train.distill import generate_ids

INSTRUCTION = (
    "Here are some requests that people sent to an AI assistant:\n{examples}\n"
    "Write one new request of the same kind, on a different topic. Reply with the request only."
)


def _normalise(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def clean_reply(text: str, min_words: int = 3, max_words: int = 120) -> str | None:
    """One request out of a model reply, or None when the reply is not usable."""
    text = text.strip().split("\n\n")[0].strip()
    text = re.sub(r"^(\d+[.)]|[-*]|request:)\s*", "", text, flags=re.IGNORECASE).strip().strip('"').strip()
    words = len(text.split())
    if not (min_words <= words <= max_words):
        return None
    return text


def self_instruct(
    target: Target,
    seeds: list[dict],
    n: int,
    exclude: list[str] = (),
    examples: int = 4,
    batch_size: int = 32,
    max_new_tokens: int = 80,
    temperature: float = 0.9,
    top_p: float = 0.95,
    seed: int = 0,
    progress: bool = True,
) -> list[dict]:
    """Up to `n` new prompts {id, category, prompt, source}, written by the target from `seeds`."""
    rng = random.Random(seed)
    by_cat: dict[str, list[str]] = {}
    for row in seeds:
        by_cat.setdefault(row.get("category") or "all", []).append(row["prompt"])
    seen = {_normalise(r["prompt"]) for r in seeds} | {_normalise(p) for p in exclude}
    tok = target.tokenizer
    out: list[dict] = []
    attempts, max_attempts = 0, 4 * n
    bar = tqdm(total=n, desc="self-instruct", unit="prompt", disable=not progress)
    torch.manual_seed(seed)
    while len(out) < n and attempts < max_attempts:
        cats = [rng.choice(sorted(by_cat)) for _ in range(batch_size)]
        prompts = []
        for cat in cats:
            shown = rng.sample(by_cat[cat], min(examples, len(by_cat[cat])))
            listing = "\n".join(f"{i + 1}. {p}" for i, p in enumerate(shown))
            msg = [{"role": "user", "content": INSTRUCTION.format(examples=listing)}]
            prompts.append(encode_chat(tok, msg)[0].tolist())
        new = generate_ids(target, prompts, max_new_tokens, do_sample=True, temperature=temperature, top_p=top_p)
        attempts += batch_size
        for cat, ids in zip(cats, new):
            prompt = clean_reply(tok.decode(ids, skip_special_tokens=True))
            if prompt is None or _normalise(prompt) in seen or len(out) >= n:
                continue
            seen.add(_normalise(prompt))
            out.append({"id": f"self-{cat}-{len(out):05d}", "category": cat, "prompt": prompt, "source": "self-instruct"})
            bar.update(1)
    bar.close()
    return out
