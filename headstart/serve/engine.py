"""Run vLLM on token-id prompts with several speculative configs, one engine after the other.

Runs in the serving environment (`.venv-vllm`, `make vllm`, which installs headstart there without its
dependencies), never in headstart's own; this module imports nothing but the standard library and vLLM:

    .venv-vllm/bin/python -m headstart.serve.engine JOB.json OUT.json

JOB.json:
    {"model": "path/to/target", "revision": null, "dtype": "float32", "max_model_len": 512, "kv_cache_gib": 1,
     "prompts": [[1, 2, 3], ...],            # token ids (rendered by headstart's chat template)
     "max_tokens": 32, "ignore_eos": false, "stop_token_ids": [2],
     "engines": [{"name": "plain", "speculative_config": null},
                 {"name": "eagle3", "speculative_config": {"method": "eagle3", "model": "DIR",
                                                           "num_speculative_tokens": 3}},
                 {"name": "hybrid", "speculative_config": {...}, "env": {"HEADSTART_HYBRID": "1"}}]}

An engine's "env" is set while the engine is created (headstart's vLLM plugin reads HEADSTART_HYBRID then).
"temperature", "top_p" and "seed" in JOB.json sample instead of greedy decoding (vLLM's per-request seed).

OUT.json: {"vllm": version, "torch": version, "engines": [one record per engine]}, each record
{"name", "ok", "error", "load_seconds", "seconds", "prompt_seconds" (each prompt's), "tokens", "outputs" (new token ids per prompt),
"metrics" ({"drafts", "draft_tokens", "accepted", "accepted_per_pos"} of the timed prompts only),
"prompt_metrics" (the same counts for each prompt, in order),
"draft_config" (the fields vLLM's draft model was built from)}. An engine that fails to load or
decode is recorded with its error and the next one still runs. Prompts decode one at a time
(batch 1), greedy, after one untimed warm-up request.

With `"interleave": true` in JOB.json all engines are loaded at once, in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0: an idle engine then takes no CPU), and each prompt is decoded by
every engine in turn, the order rotating by one engine per prompt: a machine whose speed drifts over
the minutes of a run (a shared CPU does: docs/results.md#serving-checks) then slows every engine alike, which one
engine after the other cannot promise. Records then carry "interleaved": true.

As a worker (`python -m headstart.serve.engine --worker`, `headstart.serve.worker.VllmWorker`; distillation's
vLLM backend), it reads JOB.json (no prompts; its first engine, plain when it lists none) as the first line of stdin, loads that engine
in this process and answers `{"ready": true, "vllm": version, "load_seconds": s}` (or `{"error": ...}` and
exits 1); then each further line of stdin is a request, `{"prompts": [[ids], ...], "max_tokens", "temperature",
"top_p", "seed", "stop_token_ids"}`, generated as one batch, and answered by one line `{"outputs": [[new ids], ...]}`
(or `{"error": ...}`). The answers are the only lines on stdout (vLLM's own log goes to stderr); the
worker ends at the end of stdin.

vLLM starts its engine process by spawn, hence the __main__ guard.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from contextlib import contextmanager

#: draft-config fields reported back (what the loaders read; see docs/serving.md)
DRAFT_FIELDS = (
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "rope_theta",
    "max_position_embeddings", "vocab_size", "draft_vocab_size", "target_hidden_size", "norm_before_residual",
    "norm_before_fc", "fc_norm", "norm_output", "eagle_aux_hidden_state_layer_ids", "eagle_config",
    "attention_bias", "num_heads", "truncated_vocab_size", "original_lm_head", "medusa_fc_bias", "ptd_token_id",
)


def zero_counts(k: int) -> dict:
    return {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": [0] * k}


def add_counts(into: dict, drafts: int, draft_tokens: int, accepted: int, per_pos) -> None:
    into["drafts"] += drafts
    into["draft_tokens"] += draft_tokens
    into["accepted"] += accepted
    for d, n in enumerate(list(per_pos)[: len(into["accepted_per_pos"])]):
        into["accepted_per_pos"][d] += n


def count_spec_stats(llm) -> None:
    """Add up the engine's speculative-decoding counts into `llm.spec_counts` (`zero_counts`; put a fresh
    one there to count anew): the SpecDecodingStats its scheduler reports each step, as its stat loggers
    receive them, which vLLM's counters `vllm:spec_decode_num_drafts`, `_num_draft_tokens`,
    `_num_accepted_tokens` and `_num_accepted_tokens_per_pos` add up. Counted here, per engine, because
    Prometheus' registry is one per process and an engine loaded later in the same process replaces
    the earlier one's counters there."""
    manager = llm.llm_engine.logger_manager
    record = manager.record

    def counting(*args, **kwargs):
        spec = getattr(kwargs.get("scheduler_stats", args[0] if args else None), "spec_decoding_stats", None)
        if spec is not None:
            add_counts(llm.spec_counts, spec.num_drafts, spec.num_draft_tokens, spec.num_accepted_tokens, spec.num_accepted_tokens_per_pos)
        return record(*args, **kwargs)

    manager.record = counting
    llm.spec_counts = zero_counts(0)


class Decoder:
    """One engine decoding prompts one at a time (batch 1, as headstart's loop decodes): each call timed,
    its output and its speculative-decoding counts kept."""

    def __init__(self, llm, params, engine: dict):
        self.llm, self.params = llm, params
        self.k = (engine.get("speculative_config") or {}).get("num_speculative_tokens", 0)
        self.seconds: list[float] = []
        self.outputs: list[list[int]] = []
        self.counts: list[dict] = []

    def decode(self, prompt: list[int]) -> None:
        self.llm.spec_counts = zero_counts(self.k)
        t0 = time.perf_counter()
        out = self.llm.generate([{"prompt_token_ids": list(prompt)}], self.params, use_tqdm=False)
        self.seconds.append(time.perf_counter() - t0)
        self.outputs.append(list(out[0].outputs[0].token_ids))
        self.counts.append(self.llm.spec_counts)

    def results(self) -> dict:
        """The record's fields: seconds, prompt_seconds, tokens, outputs, metrics and prompt_metrics."""
        metrics = zero_counts(self.k)
        for c in self.counts:
            add_counts(metrics, c["drafts"], c["draft_tokens"], c["accepted"], c["accepted_per_pos"])
        return {"ok": True, "seconds": sum(self.seconds), "prompt_seconds": self.seconds, "tokens": sum(map(len, self.outputs)),
                "outputs": self.outputs, "metrics": metrics, "prompt_metrics": self.counts}


def draft_config(llm) -> dict | None:
    spec = llm.llm_engine.vllm_config.speculative_config
    if spec is None or spec.draft_model_config is None:
        return None
    cfg = spec.draft_model_config.hf_config
    fields = {k: getattr(cfg, k) for k in DRAFT_FIELDS if hasattr(cfg, k)}
    fields["method"] = spec.method
    fields["dtype"] = str(spec.draft_model_config.dtype).removeprefix("torch.")
    fields["max_model_len"] = spec.draft_model_config.max_model_len
    fields["parallel_drafting"] = bool(getattr(spec, "parallel_drafting", False))  # P-EAGLE: one forward per draft
    return json.loads(json.dumps(fields, default=str))


def _numba_proof() -> None:
    """Let an engine load in a process where an earlier one imported numba (vLLM's n-gram proposer does).

    Each engine's worker scans every module for Triton kernels to rebind on CPUs (vLLM 0.32's
    triton_utils/dispatcher.py), reading `vars(value).get("kernel")` of every attribute. llvmlite's
    `lib` object has __slots__ and a __getattr__ that answers any name, `__dict__` included, with a
    C-function wrapper, so the scan failed: `'_lib_fn_wrapper' object has no attribute 'get'`. That
    __getattr__ now refuses dunder names (llvmlite's C functions have none), so `lib` has no `__dict__`."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    wrapper = getattr(ffi, "_lib_wrapper", None)
    if wrapper is None or getattr(wrapper.__getattr__, "headstart", False):
        return
    answer = wrapper.__getattr__

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return answer(self, name)

    __getattr__.headstart = True
    wrapper.__getattr__ = __getattr__


def load_engine(job: dict, engine: dict, record: dict):
    """The engine's LLM, loaded and warmed up with one short untimed request."""
    from vllm import LLM, SamplingParams

    _numba_proof()
    start = time.perf_counter()
    with environment(engine.get("env") or {}):  # read as the engine is created (headstart's hybrid: HEADSTART_HYBRID)
        llm = LLM(
            model=job["model"],
            revision=job.get("revision"),
            dtype=job.get("dtype", "float32"),
            max_model_len=job.get("max_model_len", 512),
            enforce_eager=not job.get("compiled"),  # compiled: vLLM's own default (torch.compile); eager starts sooner
            seed=0,
            disable_log_stats=False,
            speculative_config=engine.get("speculative_config"),
            # interleaved, every engine is held at once: on a GPU each takes its share (CPUs read VLLM_CPU_KVCACHE_SPACE)
            gpu_memory_utilization=0.9 / len(job["engines"]) if job.get("interleave") else 0.9,
        )
    record["load_seconds"] = time.perf_counter() - start
    record["draft_config"] = draft_config(llm)
    count_spec_stats(llm)
    if job.get("prompts"):  # a worker's job has none
        llm.generate([{"prompt_token_ids": list(job["prompts"][0])}], SamplingParams(temperature=0.0, max_tokens=4, detokenize=False),
                     use_tqdm=False)
    return llm


@contextmanager
def environment(variables: dict):
    """These environment variables set inside the block, the earlier values (or their absence) back after it."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def sampling(job: dict):
    """The job's sampling: greedy unless it gives a temperature above 0 (then its top_p and seed)."""
    from vllm import SamplingParams

    temperature = job.get("temperature") or 0.0
    return SamplingParams(temperature=temperature, top_p=job.get("top_p", 1.0) if temperature > 0 else 1.0, seed=job.get("seed"),
                          max_tokens=job["max_tokens"], ignore_eos=bool(job.get("ignore_eos")),
                          stop_token_ids=job.get("stop_token_ids") or None, detokenize=False)


def close(llm) -> None:
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()
        del llm
    gc.collect()


def failed(record: dict, e: Exception) -> dict:
    record["error"] = f"{type(e).__name__}: {e}"
    record["traceback"] = traceback.format_exc()[-4000:]
    return record


def run_engine(job: dict, engine: dict) -> dict:
    record = {"name": engine["name"], "ok": False, "error": None, "speculative_config": engine.get("speculative_config")}
    llm = None
    try:
        llm = load_engine(job, engine, record)
        decoder = Decoder(llm, sampling(job), engine)
        for p in job["prompts"]:
            decoder.decode(p)
        record.update(decoder.results())
    except Exception as e:  # recorded, so that the next engine still runs
        failed(record, e)
    finally:
        close(llm)
    return record


def run_interleaved(job: dict) -> list[dict]:
    """Every engine loaded at once; prompt i decoded by each engine in turn, starting from engine i mod n."""
    records = [{"name": e["name"], "ok": False, "error": None, "speculative_config": e.get("speculative_config"), "interleaved": True}
               for e in job["engines"]]
    decoders, params = {}, sampling(job)
    for engine, record in zip(job["engines"], records):
        try:
            decoders[record["name"]] = Decoder(load_engine(job, engine, record), params, engine)
        except Exception as e:  # recorded; the others still run
            failed(record, e)
    live = [r for r in records if r["name"] in decoders]
    failing = set()
    for i, p in enumerate(job["prompts"]):
        for record in live[i % len(live):] + live[: i % len(live)]:
            if record["name"] in failing:  # failed on an earlier prompt
                continue
            try:
                decoders[record["name"]].decode(p)
            except Exception as e:
                failed(record, e)
                failing.add(record["name"])
    for record in live:
        if record["name"] not in failing:
            record.update(decoders[record["name"]].results())
    for decoder in decoders.values():
        close(decoder.llm)
    return records


def work(requests, answers) -> int:
    """The worker: the job from the first line of `requests`, its first engine loaded, then one answer
    line on `answers` per request line (see the module's docstring)."""

    def answer(message: dict) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    job = json.loads(requests.readline())
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(job.get("kv_cache_gib", 1)))
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: it ends with the worker
    import vllm

    record, llm = {}, None
    try:
        llm = load_engine(job, (job["engines"] or [{"name": "plain"}])[0], record)
    except Exception as e:
        traceback.print_exc()
        answer({"error": f"{type(e).__name__}: {e}"})
        return 1
    answer({"ready": True, "vllm": vllm.__version__, "load_seconds": record["load_seconds"]})
    try:
        for line in requests:
            request = {**job, **json.loads(line)}
            try:
                outs = llm.generate([{"prompt_token_ids": list(p)} for p in request["prompts"]], sampling(request), use_tqdm=False)
                answer({"outputs": [list(o.outputs[0].token_ids) for o in outs]})
            except Exception as e:
                traceback.print_exc()
                answer({"error": f"{type(e).__name__}: {e}"})
    finally:
        close(llm)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--worker"]:
        answers = os.fdopen(os.dup(1), "w")  # the answers' own channel: everything else printed to stdout goes to stderr
        os.dup2(2, 1)
        return work(sys.stdin, answers)
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    job = json.loads(open(argv[0]).read())
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(job.get("kv_cache_gib", 1)))
    if job.get("interleave"):
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engines in this process: idle ones take no CPU
    import torch
    import vllm

    result = {"vllm": vllm.__version__, "torch": torch.__version__, "engines": []}
    if job.get("interleave"):
        result["engines"] = run_interleaved(job)
        with open(argv[1], "w") as f:
            json.dump(result, f, indent=1)
        for r in result["engines"]:
            print(f"headstart.serve.engine: {r['name']}: {'ok' if r['ok'] else r['error']}", file=sys.stderr, flush=True)
        return 0
    for engine in job["engines"]:
        result["engines"].append(run_engine(job, engine))
        with open(argv[1], "w") as f:  # written after every engine: a crash keeps what ran
            json.dump(result, f, indent=1)
        r = result["engines"][-1]
        print(f"headstart.serve.engine: {r['name']}: {'ok' if r['ok'] else r['error']}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
