"""Distillation through vLLM (`distill.backend=vllm`): vLLM's CPU build in .venv-vllm, a worker process
speaking token ids (headstart.serve.job.VllmWorker), gives the same rows as HF generate.

On test_vllm.py's tiny float32 target saved to a folder (with a second stop token that its greedy
answers meet, so that some answers stop and others run to the length limit): the same greedy answers
token for token, the same rows and fields, and an interrupted output (one batch written and a torn
line) resumed by `headstart distill` to the HF run's file; a target vLLM cannot load is refused before
anything is written. The tests that run vLLM are marked `vllm`
(`make test` deselects them, `make test-vllm` runs them) and skip as test_vllm.py's do; the
one-line error without .venv-vllm runs in `make test` (no vLLM is started).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from headstart.chat import encode_chat
from headstart.config import DistillConfig
from headstart.serve.worker import ServingError
from headstart.target import Target
from headstart.train.distill import distill
from tests.end_to_end.test_vllm import require_vllm, tiny_llama

NEW = 16  # new tokens per answer
ROWS = [
    {"id": "a", "prompt": "Name three rivers."},
    {"id": "b", "prompt": "Count from 7 to 12, then back."},
    {"id": "c", "conversations": [{"from": "human", "value": "Why is the sky blue?"}, {"from": "gpt", "value": "old"},
                                  {"from": "human", "value": "And at sunset?"}]},
    {"id": "d", "prompt": "Write a haiku about rain."},
    {"id": "e", "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hello"},
                             {"role": "assistant", "content": "old"}, {"role": "user", "content": "and then?"},
                             {"role": "assistant", "content": "old"}, {"role": "user", "content": "last one"}]},
    {"id": "f", "prompt": "Tell me a story."},
]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "headstart", "distill", *args], capture_output=True, text=True, timeout=1200,
                          env={**os.environ, **(env or {})})


def write_recipe(tmp, target_folder) -> str:
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    recipe = tmp / "recipe.yaml"
    recipe.write_text(f"target:\n  name_or_path: {target_folder}\n  dtype: float32\n"
                      f"distill:\n  prompts: {tmp / 'prompts.jsonl'}\n  batch_size: 2\n  max_new_tokens: {NEW}\n")
    return str(recipe)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, smol_tokenizer):
    """The tiny float32 target in a folder, whose generation config adds a stop token that one greedy answer
    meets halfway; the recipe, and the HF backend's rows (the reference)."""
    require_vllm()
    tmp = tmp_path_factory.mktemp("vllm-distill")
    folder = tmp / "target"
    target = tiny_llama(folder, smol_tokenizer)
    first = encode_chat(smol_tokenizer, [{"role": "user", "content": ROWS[0]["prompt"]}])[0]
    with torch.no_grad():
        answer = target.model.generate(first[None], max_new_tokens=NEW, do_sample=False)[0, len(first):].tolist()
    target.model.generation_config.eos_token_id = [smol_tokenizer.eos_token_id, answer[NEW // 2]]
    target.model.generation_config.save_pretrained(folder)
    target = Target.from_pretrained(folder, dtype=torch.float32)  # as the CLI loads it
    recipe = write_recipe(tmp, folder)
    cfg = DistillConfig(prompts=str(tmp / "prompts.jsonl"), output=str(tmp / "hf.jsonl"), batch_size=2, max_new_tokens=NEW, backend="hf")
    distill(target, cfg, progress=False)
    return {"tmp": tmp, "target": target, "recipe": recipe, "cfg": cfg, "hf": (tmp / "hf.jsonl").read_text()}


@pytest.mark.vllm
def test_vllm_backend_writes_the_hf_rows(setup):
    """backend=vllm vs backend=hf: the same greedy answers token for token, the same rows and fields,
    the same settings but the backend."""
    tmp, target = setup["tmp"], setup["target"]
    cfg = replace(setup["cfg"], output=str(tmp / "vllm.jsonl"), backend="vllm")
    stats = distill(target, cfg, progress=False)
    assert stats["new_rows"] == len(ROWS) and stats["generation"]["backend"] == "vllm"
    hf = [json.loads(r) for r in setup["hf"].splitlines()]
    rows = [json.loads(r) for r in (tmp / "vllm.jsonl").read_text().splitlines()]
    assert rows == hf
    finishes = [f for r in hf for f in r["turn_finish"]]
    assert "stop" in finishes and "length" in finishes  # both ways an answer ends are compared
    assert [len(r["turn_finish"]) for r in sorted(rows, key=lambda r: r["id"])] == [1, 1, 2, 1, 3, 1]  # every turn answered
    hf_settings = json.loads((tmp / "hf.distill.json").read_text())["settings"]
    vllm_settings = json.loads((tmp / "vllm.distill.json").read_text())["settings"]
    assert {k for k in hf_settings if hf_settings[k] != vllm_settings[k]} == {"distill.backend"}


@pytest.mark.vllm
def test_interrupted_vllm_distillation_resumes_to_the_same_file(setup):
    """One batch written, then a torn line (a run killed in its second write); `headstart distill` with
    backend=vllm resumes it to exactly the HF run's file; a resume with the other backend is refused."""
    tmp, target = setup["tmp"], setup["target"]
    part = tmp / "part.jsonl"
    cfg = replace(setup["cfg"], output=str(part), backend="vllm")
    assert distill(target, cfg, progress=False, max_batches=1)["new_rows"] == 2
    full = setup["hf"].splitlines(keepends=True)
    assert part.read_text() == "".join(full[:2])
    part.write_text(part.read_text() + full[2][:20])  # the torn start of the next batch's write
    refused = run_cli(setup["recipe"], f"distill.output={part}", "distill.backend=hf")
    assert refused.returncode == 2 and "distill.backend" in refused.stderr
    proc = run_cli(setup["recipe"], f"distill.output={part}", "distill.backend=vllm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout)
    assert stats["skipped_batches"] == 1 and stats["new_rows"] == len(ROWS) - 2
    assert part.read_text() == setup["hf"]


@pytest.mark.vllm
def test_a_target_vllm_cannot_load_is_refused_before_anything_is_written(setup, tmp_path):
    """The target's folder loses its weights after transformers loaded them: vLLM's load fails, the error
    names `make vllm` and the output is not created."""
    folder = tmp_path / "target"
    shutil.copytree(setup["tmp"] / "target", folder)
    target = Target.from_pretrained(folder, dtype=torch.float32)
    (folder / "model.safetensors").unlink()
    cfg = replace(setup["cfg"], output=str(tmp_path / "out" / "rows.jsonl"), backend="vllm")
    with pytest.raises(ServingError, match="could not load the target") as refused:
        distill(target, cfg, progress=False)
    assert "make vllm" in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_missing_vllm_environment_is_one_error_line(tmp_path, smol_folder):
    """Without the serving environment: one `error:` line naming `make vllm`, no traceback, nothing written."""
    recipe = write_recipe(tmp_path, smol_folder)
    out = tmp_path / "out" / "rows.jsonl"
    proc = run_cli(recipe, f"distill.output={out}", "distill.backend=vllm",
                   env={"HEADSTART_VLLM_PYTHON": str(tmp_path / "no-venv/bin/python")})
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]  # besides transformers' loading bar
    assert len(errors) == 1 and errors[0].startswith("headstart distill: error: distill.backend=vllm: "), proc.stderr
    assert "make vllm" in errors[0] and "Traceback" not in proc.stderr
    assert not out.parent.exists()
