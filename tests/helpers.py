"""Helpers shared by the test files: tiny real models from configs, float comparison, heads and data.

Test files import these from here, never from one another; fixtures live in tests/conftest.py.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers as tr

import headstart as hs
from headstart.decode.contract import DraftState, Proposal
from headstart.eval.prompts import EvalPrompt
from headstart.recipe import load_recipe
from headstart.target import Target

ROOT = Path(__file__).resolve().parents[1]  # the repository


# -------------------- a tiny real target per architecture

VOCAB = 128


ARCHS = ["llama", "qwen2", "qwen3", "mistral", "gemma3"]


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


def tiny_target(arch: str = "llama", seed: int = 0, attn: str = "sdpa", tokenizer=None) -> Target:
    torch.manual_seed(seed)
    config = tiny_config(arch)
    config._attn_implementation = attn
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init gives near-uniform logits; sharpen them so greedy paths are well separated.
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return Target(model, tokenizer, name=f"tiny-{arch}")


def smol_target(tokenizer, seed=0, layers=3, name="tiny-smol"):
    """A tiny random Llama over SmolLM2's real tokenizer, with 3 decoder layers to tap."""
    torch.manual_seed(seed)
    config = tr.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    )
    return Target(tr.AutoModelForCausalLM.from_config(config), tokenizer, name=name)


def save_tiny(folder: Path, tokenizer, arch: str = "llama", seed: int = 0, vocab: int | None = None) -> Path:
    torch.manual_seed(seed)
    config = tiny_config(arch)
    config.vocab_size = vocab or len(tokenizer)
    config.max_position_embeddings = 1024
    model = tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # sharpen random logits so greedy paths are well separated
        model.get_output_embeddings().weight.mul_(8.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# -------------------- float comparison

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


# -------------------- heads with random (as if trained) weights, and a head that knows the answer

def perturbed_heads(target, seed=0, scale=0.5):
    """Medusa heads with random (as if trained) block weights: proposals differ from the lm_head's."""
    heads = hs.heads.build("medusa", target, num_heads=3)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in heads.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return heads.eval()


def perturbed(head, seed=0, scale=0.3):
    """A head with random (as if trained) weights, so that its drafts are neither all right nor all wrong."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return head.eval()


class OracleHead:
    """Proposes the target's own greedy continuation (known in advance) at every depth."""

    kind = "oracle"

    def __init__(self, continuation: list[int], prompt_len: int):
        self.continuation, self.prompt_len = continuation, prompt_len
        self.position = 0

    def propose(self, state: DraftState, tree):
        # state.root is the token at `position`; depth d must be continuation[position + d].
        idx = self.continuation.index(int(state.root[0]), self.position)
        self.position = idx
        tokens = []
        for d, c in zip(tree.depth[1:].tolist(), tree.choice[1:].tolist()):
            j = idx + d
            right = self.continuation[j] if j < len(self.continuation) else 0
            tokens.append(right if c == 0 else (right + 1) % 128)
        return Proposal(torch.tensor([tokens]), tree)


def random_prompts(batch: int = 2, length: int = 11, seed: int = 3) -> torch.Tensor:
    """(batch, length) random token ids of the tiny targets' vocabulary."""
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def perturbed_of(kind: str, target):
    """A perturbed (non-trivial) Medusa head, or EAGLE-3 head with a draft vocabulary of every other id."""
    if kind == "medusa":
        return perturbed_heads(target)
    return perturbed(hs.heads.build("eagle3", target, draft_vocab=torch.arange(0, VOCAB, 2)))


def adapted_head(folder):
    """A Medusa-2 head folder: heads + a LoRA adapter (random, as if trained) on a tiny target."""
    # imported here, so that importing these helpers loads no training code (test_layering checks a process that
    # loads a head never imports headstart.train)
    from headstart.adapter import adapter_parameters, add_adapter
    from headstart.train.joint import JointConfig, lora_config

    target = tiny_target("llama")
    add_adapter(target, lora_config(JointConfig(lora_r=2, lora_alpha=4), target))
    with torch.no_grad():
        for p in adapter_parameters(target):
            p.add_(torch.randn_like(p) * 0.1)
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(folder, target)
    return folder


def assert_reloads_and_decodes_losslessly(summary, target) -> object:
    """The trained head saved in `summary.final` loads with the tensors of the one in memory (`summary.head`)
    and decodes a prompt exactly as the target does greedily; returns the loaded head."""
    from headstart.decode.generate import SpeculativeGenerator
    from headstart.decode.plain import greedy_generate

    loaded = hs.load_heads(summary.final, target=target)
    for name, value in summary.head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    prompt = torch.tensor([target.tokenizer("count from 7").input_ids])
    ref = greedy_generate(target, prompt, 16, eos_token_id=[])
    for head in (loaded, summary.head):
        assert torch.equal(SpeculativeGenerator(target, head).generate(prompt, 16, eos_token_id=[]).sequences, ref.sequences)
    return loaded


# -------------------- data

def flip_tensor_bytes(path, n=1000):
    """Flip `n` bytes in the middle of a safetensors file's tensor data, leaving its header intact."""
    data = bytearray(path.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")  # u64 header length, then the JSON header
    middle = start + (len(data) - start - n) // 2
    data[middle : middle + n] = bytes(b ^ 0xFF for b in data[middle : middle + n])
    path.write_bytes(bytes(data))



def write_prompts(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"p{i}", "category": "test", "prompt": "word " * (i % 5 + 1) + f"number {i}"}) + "\n")


def write_conversations(path, n=48, seed=0):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            start = rng.randrange(100)
            answer = " ".join(str(start + j) for j in range(16))
            f.write(json.dumps({"messages": [{"role": "user", "content": f"count from {start}"}, {"role": "assistant", "content": answer}]}) + "\n")


def write_small_recipe(tmp_path, target_folder) -> Path:
    """tmp_path/recipe.yaml: a Medusa head of 2 heads on the target folder, 2 steps over tmp_path/conv.jsonl (24
    counting chats, written here), its corpus table of order 3 saved: a head to continue in a test."""
    import yaml

    write_conversations(tmp_path / "conv.jsonl", n=24)
    recipe = {"target": {"name_or_path": str(target_folder), "dtype": "float32"},
              "data": {"train_files": [str(tmp_path / "conv.jsonl")], "eval_size": 4, "max_length": 64},
              "head": {"num_heads": 2},
              "train": {"max_steps": 2, "logging_steps": 1, "batch_size": 4, "bf16": False, "corpus_ngram": 3, "lr": 1e-2}}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return tmp_path / "recipe.yaml"


def recipe(tmp_path, *extra):
    write_conversations(tmp_path / "conv.jsonl")
    return load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}",
        "data.eval_size=8", "data.max_length=64", "train.batch_size=4", "train.logging_steps=2",
        "train.bf16=false", "train.lr=1e-2", "head.num_heads=2", *extra,
    ])


def batch_of(ids: torch.Tensor) -> dict:
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "loss_mask": torch.ones_like(ids)}


def fit_head(head, target, batches: list[dict], options, steps: int, lr: float = 3e-3) -> dict:
    """Train `head` for `steps` AdamW steps on `batches` in turn (every token counted; the target's
    features computed once per batch) with its kind's recipe `options`, then freeze it; returns the last
    step's metrics."""
    # imported here: test_layering loads a head through these helpers in a process free of headstart.train
    from headstart.train.features import batch_features

    layers = tuple(getattr(head, "feature_layers", ()) or ())
    pairs = [(batch, batch_features(target, batch, layers)) for batch in batches]
    opt = torch.optim.AdamW(head.parameters(), lr=lr)
    head.train()
    metrics: dict = {}
    for step in range(steps):
        batch, out = pairs[step % len(pairs)]
        loss, metrics = head.training_loss(out, batch, target, options)
        opt.zero_grad()
        loss.backward()
        opt.step()
    head.eval().requires_grad_(False)
    return metrics


def assert_learns_one_draft_forward_per_step(target, head, drafting_module, options) -> None:
    """A head trained on `target`'s own greedy continuations drafts well (its training
    metrics), decodes exactly those continuations, and runs `drafting_module` once per verification
    per row: one draft forward a step, the newly committed positions included."""
    from headstart.decode.generate import SpeculativeGenerator
    from headstart.decode.plain import greedy_generate

    prompts = torch.randint(0, VOCAB, (16, 4), generator=torch.Generator().manual_seed(0))
    data = greedy_generate(target, prompts, 28, eos_token_id=[]).sequences  # (16, 32)
    metrics = fit_head(head, target, [batch_of(data)], options, 150)
    assert metrics["step0_top1"] > 0.6 and metrics["step2_top1"] > 0.3, metrics
    calls = []
    hook = drafting_module.register_forward_hook(lambda *args: calls.append(1))
    try:
        for depth, top_k, total in [(3, 1, 3), (3, 2, 6)]:
            calls.clear()
            res = SpeculativeGenerator(target, head, depth=depth, top_k=top_k, total_tokens=total).generate(
                prompts[:4], 28, eos_token_id=[]
            )
            assert torch.equal(res.sequences, data[:4])
            assert res.acceptance_length > 1.8, (depth, top_k, res.acceptance_length)
            assert len(calls) == len(res.accepted_per_step)  # one draft forward per verification, per row
    finally:
        hook.remove()


PROMPT = EvalPrompt("p0", "chat", [{"role": "user", "content": "Name a colour."}])


# -------------------- statistics

def chi2_critical(dof: int, z: float = 3.09) -> float:
    """Wilson–Hilferty approximation of the chi-square quantile (z = 3.09: p = 0.001)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def chi2_ok(counts: torch.Tensor, expected_p: torch.Tensor) -> tuple[bool, float, float]:
    """Pool cells expected below 5 counts; zero-probability cells must stay empty."""
    n = counts.sum().item()
    assert counts[expected_p == 0].sum() == 0, "a token of probability 0 was sampled"
    exp = expected_p * n
    big = exp >= 5
    obs_cells = torch.cat([counts[big].float(), counts[~big & (expected_p > 0)].sum().float()[None]])
    exp_cells = torch.cat([exp[big], exp[~big & (expected_p > 0)].sum()[None]])
    keep = exp_cells > 0
    stat = ((obs_cells[keep] - exp_cells[keep]) ** 2 / exp_cells[keep]).sum().item()
    dof = int(keep.sum()) - 1
    crit = chi2_critical(max(dof, 1))
    return stat < crit, stat, crit


# -------------------- headstart as users run it, in its own process


def start_headstart(*argv: str, cwd) -> subprocess.Popen:
    """Start `headstart ...` as users run it; one thread each, so that every run sums in the same order."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen([sys.executable, "-m", "headstart", *argv], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_until(proc: subprocess.Popen, ready, what: str) -> None:
    """Wait until `ready()` holds while `proc` still runs (it must not end first; 10 minutes at most)."""
    deadline = time.monotonic() + 600
    while not ready():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no {what} in 10 minutes"
        time.sleep(0.005)


# -------------------- the command line in this process


def snapshot(root) -> dict:
    """Every file under root with its size and modification time: a refused command changes nothing."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """headstart's main(argv) in this process: (exit status, stderr); argparse's refusals exit through SystemExit."""
    from headstart.cli import main

    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def assert_one_error_line(code: int, err: str, verb: str, names: str) -> None:
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith(f"headstart {verb}: error: "), lines[0]
    assert names in lines[0] and "Traceback" not in err
