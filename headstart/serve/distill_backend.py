"""vLLM generation backend for `headstart distill` (`distill.backend: vllm`, or `auto` where it is usable),
with the rest of headstart's vLLM code in `headstart.serve`; training reaches it only through
`train/distill.py`'s `choose_backend`.

vLLM is not a dependency of headstart: it runs in the serving environment (`.venv-vllm`, `make vllm`;
its CPU build where there is no CUDA GPU) as a worker process (`headstart.serve.worker.VllmWorker`, the
engine runner serve-check uses) that keeps the target loaded for the whole run. Prompts go in as token
ids rendered by the target's own chat template and answers come back as token ids, so both backends
share every other step of distillation (sorting, turns, resume, output rows), and the HF path stays
the reference. tests/end_to_end/test_vllm_distill.py checks that on a float32 target the two give the
same greedy answers, rows and resumed files; at lower precision greedy answers can differ in the last
bits of the numerics, as any two kernels do. Sampled answers use vLLM's own per-request seeds.
"""

from __future__ import annotations

import torch

from headstart.serve.worker import ServingError, VllmWorker, vllm_job, vllm_python
from headstart.target import Target


def vllm_usable() -> bool:
    """Whether `auto` picks vLLM: a CUDA GPU is present and the serving environment exists."""
    if not torch.cuda.is_available():
        return False
    try:
        vllm_python()
    except ServingError:
        return False
    return True


def vllm_backend(target: Target, kv_cache_gib: int = 2):
    """A `Generate` callable (train/distill.py) backed by vLLM serving the target's own weights (its folder
    or Hub id), loaded before it returns; a ServingError (naming `make vllm`) when vLLM cannot run or load it.
    On a CUDA GPU vLLM runs compiled (its default), on CPUs eager (it starts sooner)."""
    model = getattr(target.config, "_name_or_path", None) or target.name
    eos = target.model.generation_config.eos_token_id
    stop_ids = sorted(set(eos if isinstance(eos, list) else [eos]) | {target.tokenizer.eos_token_id})
    job = vllm_job(model, [], [], str(target.dtype).removeprefix("torch."), 0, stop_ids,
                   kv_cache_gib=kv_cache_gib, compiled=torch.cuda.is_available(),
                   max_model_len=target.max_position_embeddings or None, revision=target.revision)
    try:
        python = vllm_python()
    except ServingError as e:
        raise ServingError(f"distill.backend=vllm: {e}") from None
    try:
        worker = VllmWorker(job)
    except ServingError as e:
        raise ServingError(f"distill.backend=vllm: vLLM ({python}) could not load the target {model} (`make vllm` sets up "
                           f"its environment; distill.backend=hf needs none): {e}") from None

    def run(prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int) -> list[list[int]]:
        return worker.generate(prompts, max_new_tokens, temperature, top_p, seed, stop_ids)

    return run
