"""One vLLM run from headstart's side: the engines' speculative configs, the job that
`headstart.serve.engine` runs in the serving environment (`.venv-vllm`, made by `make vllm`), and
running it there as a subprocess on a head exported for vLLM.

`serve_check` (serve/check.py) and `bench_serving` (serve/bench.py) both run their engines through
`run_exported`; tests/end_to_end/test_vllm.py builds its own jobs with `vllm_job` and `run_vllm`.
Finding the serving environment, the job's layout (`vllm_job`) and reading a failed run's log:
serve/worker.py, whose `VllmWorker` keeps one engine loaded there instead (distillation's vLLM backend).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from headstart.serve.proposer import CLASS_PATH, ENV, HYBRID_ENV, HYBRID_METHODS
from headstart.serve.worker import RUNNER, ServingError, failure, serving_env, vllm_job, vllm_python

#: head kind -> (export layouts vLLM serves it from, the first is the default; vLLM's method)
SERVED = {"eagle3": (("eagle3", "speculators"), "eagle3"), "medusa": (("vllm-medusa",), "medusa")}


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


#: what `headstart serve --method` and serve-check's engines serve: method -> what vLLM drafts with
METHODS = {
    "head": "the exported head, a chain of k drafts a step",
    "hybrid": "the head as headstart's hybrid (its plugin): prompt lookup, else the corpus table when sure, else the head",
    "corpus": "headstart's corpus proposer: prompt lookup, else the head folder's corpus table (no head forward)",
    "ngram": "vLLM's own n-gram proposer (prompt lookup of 1-4 tokens; no head, no table), for comparison",
    "plain": "no drafts: vLLM alone, for comparison",
}


def method_engine(method: str, head, vllm_method: str | None, folder, k: int) -> dict:
    """The engine serving `method` (METHODS), named after it: the head exported to `folder` (vLLM's `vllm_method`),
    as headstart's hybrid, headstart's corpus proposer, vLLM's n-gram proposer or vLLM plain. `folder` and
    `vllm_method` are unused by the last three."""
    if method == "plain":
        return plain_engine()
    if method == "corpus":
        return {"name": "corpus", "speculative_config": corpus_speculative_config(k)}
    if method == "ngram":
        return {"name": "ngram", "speculative_config": ngram_speculative_config(k)}
    if method == "hybrid":
        return hybrid_engine(head, vllm_method, folder, k, name="hybrid")
    return {"name": "head", "speculative_config": head_speculative_config(head, vllm_method, folder, k)}


def hybrid_refusal(head, vllm_method: str) -> str | None:
    """Why vLLM cannot serve the head as headstart's hybrid (None when it can): the plugin drafts with an EAGLE
    head, one draft forward a step, so not a parallel-drafting (P-EAGLE) one."""
    if vllm_method not in HYBRID_METHODS:
        return f"the hybrid drafts with an EAGLE head ({' or '.join(HYBRID_METHODS)} in vLLM), not a {head.kind} head"
    if head.options.get("parallel_drafting"):
        return "the hybrid drafts one token a forward, not with a parallel-drafting (P-EAGLE) head"
    return None


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
