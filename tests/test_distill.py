import json

import pytest
import torch
import transformers as tr

from headstart.config import DistillConfig
from headstart.jsonl import DataError
from headstart.target import Target
from headstart.train.distill import distill


@pytest.fixture
def smol_shaped_target(smol_tokenizer):
    """A tiny random Llama over SmolLM2's real tokenizer and vocabulary."""
    torch.manual_seed(0)
    config = tr.LlamaConfig(
        vocab_size=len(smol_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=smol_tokenizer.eos_token_id, pad_token_id=smol_tokenizer.pad_token_id,
    )
    return Target(tr.AutoModelForCausalLM.from_config(config), smol_tokenizer, name="tiny-smol")


def write_prompts(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"p{i}", "category": "test", "prompt": "word " * (i % 5 + 1) + f"number {i}"}) + "\n")


def test_interrupted_distillation_resumes_to_the_same_rows(tmp_path, smol_shaped_target):
    write_prompts(tmp_path / "p.jsonl", 10)
    cfg = DistillConfig(prompts=str(tmp_path / "p.jsonl"), output=str(tmp_path / "full.jsonl"), batch_size=4, max_new_tokens=6)
    stats = distill(smol_shaped_target, cfg, progress=False)
    assert stats["new_rows"] == 10
    full = (tmp_path / "full.jsonl").read_text().splitlines()
    assert sorted(json.loads(r)["id"] for r in full) == [f"p{i}" for i in range(10)]
    row = json.loads(full[0])
    assert row["messages"][-1]["role"] == "assistant" and row["finish"] in ("stop", "length")

    # A run killed during its second batch: one whole batch on disk and a torn line after it.
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(full[:4]) + "\n" + full[4][:17])
    cfg.output = str(part)
    stats = distill(smol_shaped_target, cfg, progress=False)
    assert stats["skipped_batches"] == 1 and stats["new_rows"] == 6
    assert part.read_text().splitlines() == full  # no duplicate, no lost row, same order
    assert distill(smol_shaped_target, cfg, progress=False)["new_rows"] == 0  # a finished run stays finished


def test_bad_prompt_files(tmp_path, smol_shaped_target):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "text": "no prompt"}\n')
    cfg = DistillConfig(prompts=str(path), output=str(tmp_path / "o.jsonl"))
    with pytest.raises(DataError, match=r"p.jsonl:2: a prompt row needs 'prompt'"):
        distill(smol_shaped_target, cfg, progress=False)
    path.write_text('{"id": "a", "prompt": "' + "word " * 600 + '"}\n')
    with pytest.raises(DataError, match="exceeds the target's context of 512 tokens"):
        distill(smol_shaped_target, cfg, progress=False)
    assert not (tmp_path / "o.jsonl").exists() or (tmp_path / "o.jsonl").read_text() == ""
