import json
import random
import time

import torch
from safetensors.torch import load_file

import headstart as hs
from headstart.config import load_recipe
from headstart.decode.generate import greedy_generate
from headstart.train.resume import last_complete_checkpoint
from headstart.train.trainer import train
from tests.conftest import assert_close
from tests.test_distill import smol_shaped_target  # noqa: F401  (fixture)


def write_conversations(path, n=48, seed=0):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            start = rng.randrange(100)
            answer = " ".join(str(start + j) for j in range(16))
            f.write(json.dumps({"messages": [{"role": "user", "content": f"count from {start}"}, {"role": "assistant", "content": answer}]}) + "\n")


def recipe(tmp_path, *extra):
    write_conversations(tmp_path / "conv.jsonl")
    return load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"train.output_dir={tmp_path / 'run'}",
        "data.eval_size=8", "data.max_length=64", "train.batch_size=4", "train.logging_steps=2",
        "train.bf16=false", "train.lr=1e-2", "head.num_heads=2", *extra,
    ])


def test_a_step_moves_the_head_and_not_the_target(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_shaped_target
    before = {k: v.clone() for k, v in target.model.state_dict().items()}
    heads = hs.heads.build("medusa", target, num_heads=2, draft_vocab=torch.arange(300))
    initial = {k: v.clone() for k, v in heads.state_dict().items()}
    summary = train(recipe(tmp_path, "train.max_steps=3", "train.save_steps=100"), target, heads)
    assert summary["steps"] == 3
    for name, value in heads.state_dict().items():
        if name != "draft_ids":
            assert not torch.equal(value, initial[name]), f"{name} did not move"
    for name, value in target.model.state_dict().items():
        assert torch.equal(value, before[name]), f"target weight {name} changed"
    # The final head reloads and decodes losslessly.
    loaded = hs.load_heads(summary["final"], target=target)
    assert len(loaded.options["accuracy"]) == 2
    prompt = torch.tensor([target.tokenizer("count from 7").input_ids])
    ref = greedy_generate(target, prompt, 12, eos_token_id=[])
    out = hs.SpeculativeGenerator(target, loaded).generate(prompt, 12, eos_token_id=[])
    assert torch.equal(out.sequences, ref.sequences)


def test_resume_skips_a_checkpoint_cut_short_and_ends_as_the_uninterrupted_run(tmp_path, smol_shaped_target, capsys):  # noqa: F811
    target = smol_shaped_target
    r = recipe(tmp_path, "train.max_steps=6", "train.save_steps=2", "train.save_total_limit=5")
    uninterrupted = train(r, target)
    run = tmp_path / "run"
    final = load_file(run / "final" / "model.safetensors")
    assert last_complete_checkpoint(run) == str(run / "checkpoint-6")
    # A checkpoint interrupted mid-write (no trainer state yet) is never taken for a complete one.
    (run / "checkpoint-6" / "trainer_state.json").unlink()
    capsys.readouterr()
    assert last_complete_checkpoint(run) == str(run / "checkpoint-4")
    assert "skipping checkpoint-6" in capsys.readouterr().err
    # Resuming from the last complete checkpoint ends where the uninterrupted run did.
    r2 = recipe(tmp_path, "train.max_steps=6", "train.save_steps=2", "train.save_total_limit=5", "train.resume_from_checkpoint=last")
    resumed = train(r2, target)
    assert resumed["steps"] == 6
    assert_close(resumed["train_loss"], uninterrupted["train_loss"], "mean training loss, resumed against uninterrupted")
    assert resumed["heldout"] == uninterrupted["heldout"] and resumed["best_checkpoint"] == uninterrupted["best_checkpoint"]
    again = load_file(run / "final" / "model.safetensors")
    for name in final:
        assert_close(again[name], final[name], f"resumed {name}")


def test_training_learns_a_predictable_pattern(tmp_path, smol_shaped_target):  # noqa: F811
    r = recipe(tmp_path, "train.max_steps=40", "head.shared_lm_head=false", "head.draft_vocab_size=64")
    summary = train(r, smol_shaped_target)
    assert summary["heldout"]["top5"][0] > 0.2  # counting is predictable two tokens ahead


def test_wandb_offline_run_is_written(tmp_path, smol_shaped_target, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    train(recipe(tmp_path, "train.max_steps=2", "train.report_to=wandb"), smol_shaped_target)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))
    # The run config holds the recipe, the target and the head; the metrics hold per-depth accuracy
    # during training, the held-out accuracy per depth and the simulated acceptance length.
    import wandb

    wandb.finish()  # the run stays open after training (HF leaves it to the process); close it
    path = next(runs[0].glob("*.wandb"))
    for _ in range(100):  # wandb's service may still be writing the file on a busy machine
        record = path.read_bytes()
        if b"heldout/sim_accept_length" in record and b"\theadstart\x82\x01" in record:
            break
        time.sleep(0.2)
    ours = wandb_config_item(record, "headstart")
    assert ours["recipe"]["train"]["max_steps"] == 2 and ours["recipe"]["head"]["num_heads"] == 2
    assert ours["target"]["name_or_path"] == "tiny-smol" and ours["target"]["vocab_size"] == smol_shaped_target.vocab_size
    assert ours["head"]["kind"] == "medusa" and ours["head"]["num_heads"] == 2
    assert wandb_config_item(record, "learning_rate") == 1e-2  # HF's own TrainingArguments are there too
    for key in (b"head0_top1", b"head1_top5", b"sim_accept_length", b"heldout/top1_depth1", b"heldout/sim_accept_length"):
        assert key in record, key


def test_tensorboard_events_are_written(tmp_path, smol_shaped_target):  # noqa: F811
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = train(recipe(tmp_path, "train.max_steps=2", "train.logging_steps=1", "train.report_to=tensorboard"),
                    smol_shaped_target)
    logdirs = list((tmp_path / "run" / "runs").iterdir())  # HF's default: output_dir/runs/<date>_<host>
    assert len(logdirs) == 1
    events = EventAccumulator(str(logdirs[0]), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = events.Tags()["scalars"]
    # Per-depth accuracy and the simulated acceptance length at every logging step; the held-out
    # figures once, after training (HF prefixes "train/").
    for tag in ("train/loss", "train/head0_top1", "train/head1_top5", "train/sim_accept_length"):
        assert [e.step for e in events.Scalars(tag)] == [1, 2], tag
    for tag in ("train/heldout/top1_depth1", "train/heldout/top5_depth2", "train/heldout/sim_accept_length"):
        assert len(events.Scalars(tag)) == 1, (tag, scalars)
    heldout = events.Scalars("train/heldout/top1_depth1")[0].value
    assert_close(heldout, summary["heldout"]["top1"][0], "held-out top-1 as TensorBoard stores it (float32)", ulps=1)
    # The run config: the recipe, the target and the head, as JSON text beside HF's own arguments.
    texts = {t.split("/")[0]: t for t in events.Tags()["tensors"]}
    ours = json.loads(events.Tensors(texts["headstart"])[0].tensor_proto.string_val[0])
    assert ours["recipe"]["train"]["report_to"] == "tensorboard" and ours["head"]["kind"] == "medusa"
    assert ours["target"]["vocab_size"] == smol_shaped_target.vocab_size
    assert "args" in texts


def wandb_config_item(record: bytes, key: str):
    """The JSON value of one run-config key in an offline .wandb file: a ConfigItem protobuf is
    the key (field 1) followed by value_json (field 16: tag bytes 0x82 0x01, a varint length)."""
    start = record.index(b"\n" + bytes([len(key)]) + key.encode() + b"\x82\x01") + 2 + len(key) + 2
    length, shift = 0, 0
    while True:
        byte = record[start]
        start += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    return json.loads(record[start : start + length])
