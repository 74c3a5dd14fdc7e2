"""Served text as training data (serve/served_log.py): the middleware logs each answered chat (whole or streamed)
as a `messages` row that `headstart train` reads, in rotating files of mode 0600 that stop at the size cap and
are never deleted or rewritten; `headstart train ... head.init_from=H data.train_files=[DIR/*.jsonl]` continues a
head on them. The middleware in vLLM's own server: tests/end_to_end/test_vllm.py (test_served_answers_teach_the_table)."""

from __future__ import annotations

import asyncio
import json
import stat

import pytest
import torch

from headstart.cli import main
from headstart.decode.corpus import CorpusNgram
from headstart.heads.checkpoint import load_heads
from headstart.serve.served_log import LOG_ENV, LogServed, ServedLog, served_row
from headstart.target import Target
from headstart.train.formats import read_conversations
from tests.helpers import write_small_recipe

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "count from 3"}]}]


def chat_app(answer_for):
    """A real ASGI app answering POST /v1/chat/completions as vLLM's server does: JSON, or server-sent events
    when the request streams (`answer_for(messages)` gives the answer's words)."""

    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        words = answer_for(request.get("messages") or [{"content": request["prompt"]}])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if request.get("stream"):
            for i, word in enumerate(words):
                last = i == len(words) - 1
                chunk = {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": word}, "token_ids": [i],
                                                          "finish_reason": "stop" if last else None}]}
                await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
        else:
            answer = {"id": "chatcmpl-2", "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(words)},
                                                       "finish_reason": "length"}]}
            await send({"type": "http.response.body", "body": json.dumps(answer).encode(), "more_body": False})

    return app


def post(app, body: dict, path: str = "/v1/chat/completions") -> list[dict]:
    """One POST through the ASGI app, its request body in two parts; the messages it sent."""
    raw = json.dumps(body).encode()
    parts = [{"type": "http.request", "body": raw[:10], "more_body": True}, {"type": "http.request", "body": raw[10:], "more_body": False}]
    sent = []

    async def receive():
        return parts.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "http", "method": "POST", "path": path}, receive, send))
    return sent


def counting(messages) -> list[str]:
    start = int(messages[-1]["content"][0]["text"].split()[-1]) if isinstance(messages[-1]["content"], list) \
        else int(messages[-1]["content"].split()[-1])
    return [f"{start + j} " for j in range(8)]


def test_each_answered_chat_is_logged_as_a_training_row_whole_or_streamed(tmp_path, monkeypatch):
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "log"))
    app = LogServed(chat_app(counting))
    for stream in (False, True):  # the client gets what the server sent, unchanged
        body = {"model": "m", "messages": CHAT, "stream": stream}
        assert post(app, body) == post(chat_app(counting), body)
    post(app, {"model": "m", "prompt": "count from 3"}, path="/v1/completions")  # not a chat: not logged
    [log] = (tmp_path / "log").iterdir()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    answer = "".join(f"{3 + j} " for j in range(8))
    expected = [CHAT[0], {"role": "user", "content": "count from 3"}, {"role": "assistant", "content": answer}]
    assert [r["messages"] for r in rows] == [expected, expected]
    assert rows[0]["finish_reason"] == "length" and "answer_token_ids" not in rows[0]
    assert rows[1]["answer_token_ids"] == list(range(8)) and rows[1]["id"] == "chatcmpl-1"
    conversations, _ = read_conversations([str(tmp_path / "log" / "*.jsonl")])  # as `headstart train` reads them
    assert [c.messages for c in conversations] == [expected, expected]


def test_chats_training_cannot_read_and_failed_answers_are_not_logged():
    answer = json.dumps({"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}).encode()
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    assert served_row(json.dumps({"messages": image}).encode(), answer) is None
    assert served_row(json.dumps({"messages": [{"role": "tool", "content": "x"}]}).encode(), answer) is None
    assert served_row(b"not json", answer) is None and served_row(json.dumps({"messages": CHAT}).encode(), b"{}") is None
    assert served_row(json.dumps({"messages": CHAT}).encode(), answer)["messages"][-1] == {"role": "assistant", "content": "hi"}


def test_files_rotate_with_mode_0600_and_logging_stops_at_the_cap_deleting_nothing(tmp_path, capsys):
    row = {"messages": [{"role": "user", "content": "x" * 60}, {"role": "assistant", "content": "y" * 60}]}
    size = len(json.dumps(row)) + 1
    log = ServedLog(tmp_path / "log", cap_bytes=size * 7, file_bytes=size * 3)
    assert all(log.append(row) for _ in range(7))
    files = log.files()
    assert [f.name for f in files] == ["served-00001.jsonl", "served-00002.jsonl", "served-00003.jsonl"]
    assert [len(f.read_text().splitlines()) for f in files] == [3, 3, 1]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert stat.S_IMODE((tmp_path / "log").stat().st_mode) == 0o700
    before = {f: f.read_bytes() for f in files}
    assert not log.append(row) and not log.append(row)  # the cap: nothing written, one warning
    assert capsys.readouterr().err.count("no more are logged") == 1
    assert {f: f.read_bytes() for f in log.files()} == before
    again = ServedLog(tmp_path / "log", cap_bytes=size * 9, file_bytes=size * 3)  # a restart with a larger cap appends
    assert again.append(row) and [len(f.read_text().splitlines()) for f in again.files()] == [3, 3, 2]


@pytest.mark.usefixtures("no_progress_bars")
def test_headstart_train_continues_a_head_on_the_served_log(tmp_path, smol_folder, monkeypatch):
    """A head trained on a corpus, then continued (head.init_from) on the chats a server logged: the run starts
    from the first head's weights and moves them, and its corpus table is the first head's with the served
    answers counted in (a promoted head must not serve a table of the served chats alone)."""
    recipe_file = str(write_small_recipe(tmp_path, smol_folder))
    assert main(["train", recipe_file, f"train.output_dir={tmp_path / 'first'}"]) == 0
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "served"))
    app = LogServed(chat_app(counting))
    for start in range(12):
        post(app, {"model": "m", "messages": [{"role": "user", "content": f"count from {start}"}], "stream": start % 2 == 0})
    assert main(["train", recipe_file, f"train.output_dir={tmp_path / 'second'}", f"head.init_from={tmp_path / 'first' / 'final'}",
                 f"data.train_files=[{tmp_path / 'served'}/*.jsonl]"]) == 0
    target = Target.from_pretrained(smol_folder, dtype=torch.float32)
    first, second = (load_heads(tmp_path / run / "final", target).state_dict() for run in ("first", "second"))
    assert first.keys() == second.keys() and any(not torch.equal(first[k], second[k]) for k in first)
    summary = json.loads((tmp_path / "second" / "final" / "config.json").read_text())
    recorded = json.dumps(summary)  # the continued head records where it started and what it was trained on
    assert str(tmp_path / "first" / "final") in recorded and str(tmp_path / "served") in recorded
    tables = [CorpusNgram.load(tmp_path / run / "final") for run in ("first", "second")]
    for old, grown in zip(*(t.tables for t in tables)):
        occurred = [dict(zip(map(tuple, t[0].tolist()), t[1].tolist())) for t in (old, grown)]
        assert all(occurred[1].get(c, 0) >= n for c, n in occurred[0].items())  # every count kept
    assert len(tables[1]) > len(tables[0]) and tables[1].tables[0][1].sum() > tables[0].tables[0][1].sum()  # answers added
