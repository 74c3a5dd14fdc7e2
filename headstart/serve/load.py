"""`headstart serve` under load, as `scripts/bench_serve_load.py` and the tests drive it.

`started_server` runs `headstart serve` in a subprocess (as a user runs it) until the block ends, then stops it
with SIGTERM; `ask_chat` is one greedy chat request through the server's OpenAI-compatible API (the standard
library's HTTP client, so that nothing beyond headstart is needed); `run_load` sends N of them from C
concurrent clients; `load_summary` reduces them to requests/s, latency percentiles and tokens/s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from headstart.serve.server import START_TIMEOUT, served_models, wait_ready


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StartedServer:
    """A `headstart serve` process: its URL, served model name, seconds until `/v1/models` answered; after the
    block, its exit status, what it printed, and vLLM's process group (which must be gone by then)."""

    url: str
    proc: subprocess.Popen
    model: str = ""
    ready_seconds: float = 0.0
    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    group: int | None = None
    started: float = 0.0  # time.monotonic() when the command started

    def seconds_since_start(self) -> float:
        return time.monotonic() - self.started


@contextmanager
def started_server(argv: list[str], port: int, logs: Path, env: dict | None = None, timeout: float = START_TIMEOUT) -> Iterator[StartedServer]:
    """`headstart serve ARGV --port PORT` in a subprocess (its output in LOGS.out and LOGS.err); yields once its
    `/v1/models` answers, and stops it with SIGTERM when the block ends."""
    env = {**os.environ, **(env or {})}
    cache = Path(env.get("HEADSTART_CACHE") or Path.home() / ".cache" / "headstart")
    start = time.monotonic()
    with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "headstart", "serve", *argv, "--port", str(port)], stdout=out, stderr=err, env=env)
    server = StartedServer(url=f"http://127.0.0.1:{port}", proc=proc, started=start)
    try:
        wait_ready(proc, server.url, cache / "serve" / f"vllm-{port}.log", timeout=timeout)
        server.ready_seconds, server.model = time.monotonic() - start, served_models(server.url)[0]
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        server.code = proc.wait(timeout=120)
        server.stdout, server.stderr = Path(f"{logs}.out").read_text(), Path(f"{logs}.err").read_text()
        found = re.search(r"process group (\d+)", server.stderr)
        server.group = int(found.group(1)) if found else None


def post(url: str, body: dict, timeout: float = 600.0) -> dict:
    """The JSON answer of a POST to the local server, proxies bypassed."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout) as r:
        return json.load(r)


def ask_chat(url: str, model: str, prompt: str, max_tokens: int, ignore_eos: bool = False) -> dict:
    """One greedy chat request: its latency (seconds), new token ids and text."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": max_tokens,
            "ignore_eos": ignore_eos, "return_token_ids": True}
    start = time.perf_counter()
    answer = post(f"{url}/v1/chat/completions", body)
    choice = answer["choices"][0]
    return {"seconds": time.perf_counter() - start, "ids": choice.get("token_ids") or [], "text": choice["message"]["content"] or "",
            "tokens": answer["usage"]["completion_tokens"]}


def run_load(url: str, model: str, prompts: list[str], requests: int, concurrency: int, max_tokens: int,
             ignore_eos: bool = False) -> tuple[list[dict], float]:
    """`requests` chat requests (the prompts in turn) from `concurrency` clients at once: (their answers in
    the prompts' order, the wall-clock seconds from the first sent to the last answered)."""
    asked = [prompts[i % len(prompts)] for i in range(requests)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as clients:
        answers = list(clients.map(lambda p: ask_chat(url, model, p, max_tokens, ignore_eos), asked))
    return answers, time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def load_summary(answers: list[dict], wall: float) -> dict:
    """requests/s, p50/p95 latency (s) and new tokens/s of a `run_load`."""
    latencies, tokens = [a["seconds"] for a in answers], sum(a["tokens"] for a in answers)
    return {"requests": len(answers), "seconds": wall, "requests_per_s": len(answers) / wall, "latency_p50": percentile(latencies, 50),
            "latency_p95": percentile(latencies, 95), "tokens": tokens, "tokens_per_s": tokens / wall}
