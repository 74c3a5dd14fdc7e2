"""The Trainer's side of training (train/hf_trainer.py): what the trackers record. The run config
(RunConfig: recipe, target, head) and the metrics HeadTrainer.log adds (per-depth accuracy and the
simulated acceptance length of each logging window, then the held-out figures once) reach wandb's
offline run file and TensorBoard's event file."""

import json
import time

from headstart.train.trainer import train
from tests.helpers import assert_close, recipe


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
    assert_close(heldout, summary.heldout["top1"][0], "held-out top-1 as TensorBoard stores it (float32)", ulps=1)
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
