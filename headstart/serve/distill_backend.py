"""Optional vLLM generation backend for `headstart distill` (`distill.backend: vllm` or `auto`), with the rest of
headstart's vLLM code in `headstart.serve`; training reaches it only through `train/distill.py`'s `choose_backend`.

vLLM is not a dependency of headstart and this module is not exercised by the test suite (vLLM
needs a CUDA GPU; the CI machines have none). It is kept to one function so the HF path stays the
reference: prompts go in as token ids rendered by the target's own chat template and answers come
back as token ids, so both backends share every other step of distillation (sorting, turns,
resume, output rows). Greedy answers can differ from HF `generate` in the last bits of the
numerics, as any two kernels do; sampled answers use vLLM's own per-request seeds.
"""

from __future__ import annotations

from headstart.target import Target


def vllm_backend(target: Target, gpu_memory_utilization: float = 0.8):
    """A `Generate` callable backed by `vllm.LLM` over the target's own weights (path or Hub id)."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as e:
        raise ImportError("distill.backend=vllm needs vLLM: pip install vllm (on a CUDA machine)") from e

    model = getattr(target.config, "_name_or_path", None) or target.name
    dtype = str(target.dtype).removeprefix("torch.")
    llm = LLM(model=model, revision=target.revision, dtype=dtype, skip_tokenizer_init=True,
              gpu_memory_utilization=gpu_memory_utilization)
    eos = target.model.generation_config.eos_token_id
    stop_ids = sorted(set(eos if isinstance(eos, list) else [eos]) | {target.tokenizer.eos_token_id})

    def run(prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float, seed: int) -> list[list[int]]:
        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                                seed=seed, stop_token_ids=stop_ids, detokenize=False)
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    return run
