"""Served text as training data (`headstart serve --log-served DIR`): each finished chat, as `headstart train` reads it.

vLLM's OpenAI-compatible server takes ASGI middleware by import path (`--middleware`); `LogServed` is one. It
sees each POST to /v1/chat/completions and its answer (whole, or streamed as server-sent events), and appends
one row per answered chat to DIR: the request's messages followed by the target's answer as an assistant
message, the `messages` rows of train/formats.py, so that

    headstart train RECIPE head.init_from=HEAD 'data.train_files=[DIR/*.jsonl]'

continues a head on what was served. The answer's token ids and the prompt's are kept too when the client
asked for them (vLLM's `return_token_ids`). Only chats whose messages are all system, user or assistant text
are logged (what training reads); completions (raw prompts, no conversation) and failed requests are not; of
several choices (n > 1), the first.

Files: DIR/served-00001.jsonl, served-00002.jsonl, ...: a file is closed for a new one past FILE_BYTES, and
logging stops (one warning on stderr) once DIR's served-*.jsonl files hold the size cap (HEADSTART_LOG_SERVED_MB,
DEFAULT_MB): nothing logged is ever deleted or rewritten (move files away to log more). Each row is appended
whole with one write; files are created with mode 0600 (they hold what users wrote) and DIR, when created, 0700.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

#: the log folder (set by `headstart serve --log-served` in vLLM's environment)
LOG_ENV = "HEADSTART_LOG_SERVED"
#: the size cap over the folder's served-*.jsonl files, in MiB (HEADSTART_LOG_SERVED_MB)
CAP_ENV, DEFAULT_MB = "HEADSTART_LOG_SERVED_MB", 1024
#: a file is closed for the next past this many bytes
FILE_BYTES = 64 << 20
#: vLLM's --middleware value
MIDDLEWARE = "headstart.serve.served_log.LogServed"
CHAT_PATH = "/v1/chat/completions"
ROLES = ("system", "user", "assistant")


class ServedLog:
    """Rows appended to rotating JSONL files in `folder` (see the module doc), `cap_bytes` over them at most."""

    def __init__(self, folder: str | Path, cap_bytes: int = DEFAULT_MB << 20, file_bytes: int = FILE_BYTES):
        self.folder, self.cap_bytes, self.file_bytes = Path(folder), cap_bytes, file_bytes
        self.full = False

    def files(self) -> list[Path]:
        return sorted(self.folder.glob("served-*.jsonl"))

    def append(self, row: dict) -> bool:
        """Append one row (one line); False when the cap is reached (nothing written)."""
        line = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        files = self.files()
        if sum(f.stat().st_size for f in files) + len(line) > self.cap_bytes:
            if not self.full:
                print(f"headstart: {self.folder} holds {self.cap_bytes >> 20} MiB of served chats (the cap): no more are logged; "
                      "move its files away to log more", file=sys.stderr, flush=True)
            self.full = True
            return False
        path = files[-1] if files else None
        if path is None or path.stat().st_size + len(line) > self.file_bytes:
            number = int(path.stem.split("-")[1]) + 1 if path else 1
            path = self.folder / f"served-{number:05d}.jsonl"
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return True


def text_of(content) -> str | None:
    """A message's text: a string, or OpenAI's list of text parts joined; None for anything else (images, audio)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return None


def answer_of(response: bytes) -> dict | None:
    """The first choice's answer in a chat completion's response body (JSON, or server-sent events when streamed):
    {"content", "token_ids", "prompt_token_ids", "finish_reason", "id"}; None when it holds none."""
    text = response.decode("utf-8", errors="replace").lstrip()
    if text.startswith("data:"):
        chunks = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip() != "[DONE]"]
    else:
        chunks = [json.loads(text)] if text else []
    out = {"content": "", "token_ids": [], "prompt_token_ids": None, "finish_reason": None, "id": None}
    for chunk in chunks:
        out["id"] = out["id"] or chunk.get("id")
        out["prompt_token_ids"] = out["prompt_token_ids"] or chunk.get("prompt_token_ids")
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            message = choice.get("message") or choice.get("delta") or {}
            out["content"] += message.get("content") or ""
            out["token_ids"] += choice.get("token_ids") or []
            out["prompt_token_ids"] = out["prompt_token_ids"] or choice.get("prompt_token_ids")
            out["finish_reason"] = choice.get("finish_reason") or out["finish_reason"]
    return out if out["finish_reason"] else None


def served_row(request: bytes, response: bytes) -> dict | None:
    """The training row of one answered chat (see the module doc), or None when it is not one to log."""
    try:
        body = json.loads(request)
        answer = answer_of(response)
    except (ValueError, AttributeError):
        return None
    messages = body.get("messages") if isinstance(body, dict) else None
    if answer is None or not isinstance(messages, list) or not messages:
        return None
    kept = []
    for m in messages:
        text = text_of(m.get("content")) if isinstance(m, dict) else None
        if text is None or m.get("role") not in ROLES:
            return None
        kept.append({"role": m["role"], "content": text})
    row = {"messages": [*kept, {"role": "assistant", "content": answer["content"]}], "id": answer["id"],
           "served_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "finish_reason": answer["finish_reason"]}
    if answer["token_ids"]:
        row |= {"prompt_token_ids": answer["prompt_token_ids"], "answer_token_ids": answer["token_ids"]}
    return row


def log_from_env() -> ServedLog | None:
    """The log HEADSTART_LOG_SERVED names (None when it is not set), capped by HEADSTART_LOG_SERVED_MB."""
    folder = os.environ.get(LOG_ENV)
    if not folder:
        return None
    return ServedLog(folder, int(os.environ.get(CAP_ENV) or DEFAULT_MB) << 20)


class LogServed:
    """ASGI middleware for vLLM's server (`--middleware headstart.serve.served_log.LogServed`): each answered chat
    appended to the log HEADSTART_LOG_SERVED names (see the module doc); every request passes through unchanged."""

    def __init__(self, app):
        self.app, self.log = app, log_from_env()

    async def __call__(self, scope, receive, send):
        if self.log is None or scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") != CHAT_PATH:
            return await self.app(scope, receive, send)
        request, response, status = bytearray(), bytearray(), []

        async def reading():
            message = await receive()
            if message.get("type") == "http.request":
                request.extend(message.get("body", b""))
            return message

        async def answering(message):
            if message.get("type") == "http.response.start":
                status.append(message.get("status"))
            elif message.get("type") == "http.response.body":
                response.extend(message.get("body", b""))
            await send(message)

        await self.app(scope, reading, answering)
        row = served_row(bytes(request), bytes(response)) if status == [200] else None
        if row is not None:
            try:
                self.log.append(row)
            except OSError as e:  # the answer is sent; serving goes on
                print(f"headstart: could not log a served chat to {self.log.folder}: {e}", file=sys.stderr, flush=True)
