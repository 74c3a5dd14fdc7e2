"""Run vLLM on token-id prompts with several speculative configs, one engine after the other.

Runs in the serving environment (`.venv-vllm`, `make vllm`), never in headstart's own:

    .venv-vllm/bin/python -P eval/vllm_run.py JOB.json OUT.json   (-P: eval/html.py must not shadow the stdlib html)

JOB.json:
    {"model": "path/to/target", "dtype": "float32", "max_model_len": 512, "kv_cache_gib": 1,
     "prompts": [[1, 2, 3], ...],            # token ids (rendered by headstart's chat template)
     "max_tokens": 32, "ignore_eos": false, "stop_token_ids": [2],
     "engines": [{"name": "plain", "speculative_config": null},
                 {"name": "eagle3", "speculative_config": {"method": "eagle3", "model": "DIR",
                                                           "num_speculative_tokens": 3}}]}

OUT.json: {"vllm": version, "torch": version, "engines": [one record per engine]}, each record
{"name", "ok", "error", "load_seconds", "seconds", "tokens", "outputs" (new token ids per prompt),
"metrics" ({"drafts", "draft_tokens", "accepted", "accepted_per_pos"} of the timed prompts only),
"prompt_metrics" (the same counts for each prompt, in order),
"draft_config" (the fields vLLM's draft model was built from)}. An engine that fails to load or
decode is recorded with its error and the next one still runs. Prompts decode one at a time
(batch 1), greedy, after one untimed warm-up request.

vLLM starts its engine process by spawn, hence the __main__ guard.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback

#: draft-config fields reported back (what the loaders read; see docs/serving.md)
DRAFT_FIELDS = (
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "rope_parameters", "rope_theta",
    "max_position_embeddings", "vocab_size", "draft_vocab_size", "target_hidden_size", "norm_before_residual",
    "norm_before_fc", "fc_norm", "norm_output", "eagle_aux_hidden_state_layer_ids", "eagle_config",
    "attention_bias", "num_heads", "truncated_vocab_size", "original_lm_head", "medusa_fc_bias", "ptd_token_id",
)


def spec_metrics(llm) -> dict:
    """vLLM's cumulative speculative-decoding counters (zero when the engine drafts nothing)."""
    out = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
    names = {
        "vllm:spec_decode_num_drafts": "drafts",
        "vllm:spec_decode_num_draft_tokens": "draft_tokens",
        "vllm:spec_decode_num_accepted_tokens": "accepted",
    }
    for m in llm.get_metrics():
        if m.name in names:
            out[names[m.name]] += int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            values = [int(v) for v in m.values]
            prev = out["accepted_per_pos"]
            out["accepted_per_pos"] = [a + b for a, b in zip(values, prev + [0] * len(values))]
    return out


def minus(after: dict, before: dict) -> dict:
    per = before["accepted_per_pos"] + [0] * len(after["accepted_per_pos"])
    return {
        "drafts": after["drafts"] - before["drafts"],
        "draft_tokens": after["draft_tokens"] - before["draft_tokens"],
        "accepted": after["accepted"] - before["accepted"],
        "accepted_per_pos": [a - b for a, b in zip(after["accepted_per_pos"], per)],
    }


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


def run_engine(job: dict, engine: dict) -> dict:
    from vllm import LLM, SamplingParams

    record = {"name": engine["name"], "ok": False, "error": None, "speculative_config": engine.get("speculative_config")}
    start = time.perf_counter()
    llm = None
    try:
        llm = LLM(
            model=job["model"],
            dtype=job.get("dtype", "float32"),
            max_model_len=job.get("max_model_len", 512),
            enforce_eager=True,
            seed=0,
            disable_log_stats=False,
            speculative_config=engine.get("speculative_config"),
        )
        record["load_seconds"] = time.perf_counter() - start
        record["draft_config"] = draft_config(llm)
        params = SamplingParams(
            temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=bool(job.get("ignore_eos")),
            stop_token_ids=job.get("stop_token_ids") or None, detokenize=False,
        )
        prompts = [{"prompt_token_ids": list(p)} for p in job["prompts"]]
        llm.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=4, detokenize=False), use_tqdm=False)
        marks = [spec_metrics(llm)]  # the counters before the timed prompts, then after each
        outputs, seconds = [], 0.0
        for p in prompts:  # batch 1, as headstart's loop decodes
            t0 = time.perf_counter()
            out = llm.generate([p], params, use_tqdm=False)
            seconds += time.perf_counter() - t0
            outputs.append(list(out[0].outputs[0].token_ids))
            marks.append(spec_metrics(llm))
        record.update(
            ok=True, seconds=seconds, tokens=sum(map(len, outputs)), outputs=outputs,
            metrics=minus(marks[-1], marks[0]), prompt_metrics=[minus(b, a) for a, b in zip(marks, marks[1:])],
        )
    except Exception as e:  # recorded, so that the next engine still runs
        record["error"] = f"{type(e).__name__}: {e}"
        record["traceback"] = traceback.format_exc()[-4000:]
    finally:
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
        gc.collect()
    return record


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    job = json.loads(open(argv[0]).read())
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(job.get("kv_cache_gib", 1)))
    import torch
    import vllm

    result = {"vllm": vllm.__version__, "torch": torch.__version__, "engines": []}
    for engine in job["engines"]:
        result["engines"].append(run_engine(job, engine))
        with open(argv[1], "w") as f:  # written after every engine: a crash keeps what ran
            json.dump(result, f, indent=1)
        r = result["engines"][-1]
        print(f"vllm_run: {r['name']}: {'ok' if r['ok'] else r['error']}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
