"""Two processes (the DeepSpeed launcher, or plain DDP under torchrun; CPU, gloo) train the same
head as one plain process.

The check: with the same global batch (2 processes x 2 sequences = 1 process x 4), every step's
logged loss and the saved head agree to float precision. It holds because the data order is the
same on every process count: the Trainer's sampler draws one permutation from the shared seed, and
the launcher's data sharding hands process r the batches r, r + 2, ... of it, so one global step
sees the same four sequences. It also needs every sequence to have the same number of loss tokens:
each process averages its own tokens and DeepSpeed averages the processes' gradients, which equals
the one-process mean over all tokens only when the counts agree. The data below is built so.

Run alone with `pytest -m slow`; the first run on a machine compiles DeepSpeed's shared-memory
communication op (minutes on 2 cores, cached under ~/.cache/torch_extensions).
"""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers as tr
from safetensors.torch import load_file

from headstart.config import RecipeError
from headstart.recipe import load_recipe
from headstart.serve.load import free_port
from headstart.target import Target
from headstart.train.data import build_examples
from headstart.train.trainer import train, zero3_loading, zero_stage
from tests.helpers import ROOT, assert_close

WORDS = [" cat", " dog", " red", " blue", " sun", " sea", " tree", " car"]  # one token each
SHM = Path("/dev/shm")


def shm_buffers() -> set[Path]:
    """DeepSpeed's shared-memory buffers of its CPU communication op now in /dev/shm."""
    return set(SHM.glob("deepspeed_allreduce_buffer_*")) if SHM.is_dir() else set()


@pytest.fixture(autouse=True)
def shm_buffers_removed():
    """DeepSpeed's CPU communication op leaves its shared-memory buffers (/dev/shm/deepspeed_allreduce_buffer_*,
    69 MB a process) behind when the processes end; headstart's trainer removes its own (the test checks it), and
    whatever a failed test left is removed after it."""
    before = shm_buffers()
    yield
    for buffer in shm_buffers() - before:
        buffer.unlink(missing_ok=True)


def warm_deepspeed_op(env: dict) -> None:
    """Compile DeepSpeed's CPU communication op once here, so that two launched processes do not
    both compile it at the same time (which takes minutes on two cores)."""
    cache = Path(env.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    if any(cache.glob("**/deepspeed_shm_comm*.so")):
        return
    code = "from deepspeed.accelerator import get_accelerator as g; g().create_op_builder('ShareMemCommBuilder').load()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=900)


@pytest.fixture
def setup(tmp_path, smol_tokenizer):
    """A tiny Llama over SmolLM2's tokenizer saved as a folder, conversations of equal shape, a recipe."""
    torch.manual_seed(0)
    config = tr.LlamaConfig(  # three layers: EAGLE-3 (the ZeRO-3 case) fuses three distinct ones
        vocab_size=len(smol_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=smol_tokenizer.eos_token_id, pad_token_id=smol_tokenizer.pad_token_id,
    )
    tr.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "target")
    smol_tokenizer.save_pretrained(tmp_path / "target")
    rng = random.Random(0)
    with open(tmp_path / "conv.jsonl", "w") as f:
        for _ in range(40):
            answer = rng.choice(WORDS).strip() + "".join(rng.choice(WORDS) for _ in range(11))
            messages = [{"role": "user", "content": "say words"}, {"role": "assistant", "content": answer}]
            f.write(json.dumps({"messages": messages}) + "\n")
    (tmp_path / "recipe.yaml").write_text(
        f"target: {{name_or_path: {tmp_path / 'target'}, dtype: float32}}\n"
        f"data: {{train_files: [{tmp_path / 'conv.jsonl'}], eval_size: 8, max_length: 64}}\n"
        "head: {kind: medusa, num_heads: 2, draft_vocab_size: 64}\n"
        "train: {max_steps: 3, logging_steps: 1, save_steps: 3, bf16: false, lr: 1.0e-2, report_to: none}\n"
    )
    examples, _ = build_examples(smol_tokenizer, [str(tmp_path / "conv.jsonl")], 64, None)
    assert len({len(e.input_ids) for e in examples}) == 1 and len({sum(e.loss_mask) for e in examples}) == 1
    return tmp_path


def step_losses(run: Path) -> list[float]:
    state = json.loads((run / "checkpoint-3" / "trainer_state.json").read_text())
    return [h["loss"] for h in state["log_history"] if "loss" in h]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["deepspeed", "deepspeed-zero3", "torchrun"])
def test_two_processes_match_one_plain_process(setup, launcher):
    """DeepSpeed ZeRO-2 (the launcher script's default), ZeRO-3 and plain DDP under torchrun.

    Under ZeRO-3 the frozen target is partitioned as it loads (each process keeps half of every
    weight) and the head is an EAGLE-3 head, the kind that reads the most of the target outside its
    forward: three feature layers, the embedding while unrolling, the lm_head's rows for the loss.
    """
    port = free_port()
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", MASTER_PORT=str(port), NUM_GPUS="2")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR"):
        env.pop(key, None)
    head = ["head.kind=eagle3", "train.ttt_steps=2"] if launcher == "deepspeed-zero3" else []
    args = [str(setup / "recipe.yaml"), *head, "train.batch_size=2", f"train.output_dir={setup / 'ds'}"]
    if launcher.startswith("deepspeed"):
        if launcher == "deepspeed-zero3":
            env["DS_CONFIG"] = str(ROOT / "scripts" / "ds_zero3.json")
        warm_deepspeed_op(env)
        cmd = ["bash", str(ROOT / "scripts" / "train_deepspeed.sh"), *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
               "-m", "headstart.cli", "train", *args]
    buffers = shm_buffers()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Each process removed DeepSpeed's shared-memory buffer it had made (headstart's trainer does; DeepSpeed does not).
    assert shm_buffers() == buffers

    # The same recipe in this process: plain PyTorch, one process, all four sequences per step.
    recipe = load_recipe(setup / "recipe.yaml", [*head, "train.batch_size=4", f"train.output_dir={setup / 'plain'}"])
    target = Target.from_pretrained(setup / "target", dtype=torch.float32)
    train(recipe, target)

    plain, ds = step_losses(setup / "plain"), step_losses(setup / "ds")
    assert len(plain) == len(ds) == 3
    assert_close(ds, plain, "losses per step, two processes against one")
    a, b = load_file(setup / "plain" / "final" / "model.safetensors"), load_file(setup / "ds" / "final" / "model.safetensors")
    assert sorted(a) == sorted(b)
    for name in a:
        assert_close(b[name], a[name], f"trained {name}, two processes against one")
    if not head:  # Medusa's blocks start at zero: they trained
        assert not torch.equal(a["blocks.0.0.linear.weight"], torch.zeros_like(a["blocks.0.0.linear.weight"]))
    # One writer: the final head and its summary exist once and are complete.
    assert json.loads((setup / "ds" / "final" / "config.json").read_text())["training"]["steps"] == 3
    if launcher == "deepspeed-zero3":
        # Each process held half of the target's weights from loading on (ZeRO-3 pads each slice).
        shares = re.findall(r"ZeRO-3: process (\d) holds ([\d,]+) of the target's ([\d,]+) parameters", proc.stdout + proc.stderr)
        assert sorted(r for r, _, _ in shares) == ["0", "1"], proc.stderr[-2000:]
        total = sum(p.numel() for p in target.model.parameters())
        for _, local, whole in shares:
            assert int(whole.replace(",", "")) == total
            assert 0.5 <= int(local.replace(",", "")) / total < 0.52


def test_zero3_recipes_are_checked_before_loading(tmp_path):
    """ZeRO-3 keeps every weight in the DeepSpeed config's precision: a mix it would silently change
    (a bf16 target with train.bf16 false) is refused before anything loads; so is an unreadable config."""
    zero3 = str(ROOT / "scripts" / "ds_zero3.json")
    assert zero_stage(zero3) == 3 and zero_stage(str(ROOT / "scripts" / "ds_zero2.json")) == 2 and zero_stage(None) is None
    recipe = load_recipe(None, [f"train.deepspeed={zero3}", "target.dtype=bfloat16", "train.bf16=false"])
    with pytest.raises(RecipeError, match="train.bf16=true"), zero3_loading(recipe):
        pytest.fail("the block must not run")
    (tmp_path / "broken.json").write_text('{"zero_optimization": {"stage": 3')
    with pytest.raises(RecipeError, match="cannot read the DeepSpeed config"):
        zero_stage(str(tmp_path / "broken.json"))
    joint = load_recipe(None, [f"train.deepspeed={zero3}", "train.joint=true", "head.kind=medusa"])
    with pytest.raises(RecipeError, match="ZeRO-3"):
        train(joint, None)
