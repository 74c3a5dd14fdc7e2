import json
import random

import pytest
import torch

from headstart.jsonl import DataError
from headstart.recipe import load_recipe
from headstart.train.data import ExampleDataset, build_examples, collate
from headstart.train.features import (
    CachedFeatureDataset,
    FeatureCache,
    batch_features,
    check_disk,
    training_dataset,
    write_feature_cache,
    write_features,
)
from headstart.train.trainer import train
from tests.helpers import assert_close, smol_target


def write_conversations(path, n=24, seed=0):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            answer = " ".join(str(rng.randrange(1000)) for _ in range(rng.randrange(4, 40)))
            f.write(json.dumps({"id": f"c{i}", "messages": [
                {"role": "user", "content": f"list {i} numbers " + "please " * rng.randrange(4)},
                {"role": "assistant", "content": answer},
            ]}) + "\n")


@pytest.fixture
def setup(tmp_path, smol_tokenizer):
    write_conversations(tmp_path / "conv.jsonl")
    examples, _ = build_examples(smol_tokenizer, [str(tmp_path / "conv.jsonl")], 96)
    return smol_target(smol_tokenizer), examples


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_offline_features_equal_online_ones(tmp_path, setup, dtype):
    target, examples = setup
    layers = (0, 2)
    batch_ex = examples[:4]
    stats = write_feature_cache(target, batch_ex, tmp_path / "cache", layers, dtype=dtype, batch_size=4, progress=False)
    assert stats["examples"] == 4 and stats["layers"] == [0, 2]
    order = [2, 0, 3, 1]  # another order than the writer's (longest first): rows are independent
    cached = training_dataset(batch_ex, str(tmp_path / "cache"), target, layers)
    offline = batch_features(target, collate([cached[i] for i in order]), layers)
    batch = collate([ExampleDataset(batch_ex)[i] for i in order])
    online = batch_features(target, batch, layers)
    real = batch["attention_mask"].bool()  # padding positions are not stored (zeros offline)
    pairs = [(offline.hidden, online.hidden)] + [(offline.features[k], online.features[k]) for k in layers]
    for off, on in pairs:
        assert off.dtype == on.dtype == torch.float32 and off.shape == on.shape
        # The cache was computed in another batch order: equal up to rounding, and in bfloat16 up to
        # one rounding to it (half a unit in its last place).
        if dtype == "float32":
            assert_close(off[real], on[real], "offline float32 features")
        else:
            assert_close(off[real], on[real], "offline bfloat16 features", dtype=torch.bfloat16, ulps=0.5)
        assert not off[~real].any()


def test_disk_estimate_and_refusal(tmp_path, setup):
    target, examples = setup
    stats = write_feature_cache(target, examples, tmp_path / "c", (0, 1, 2), shard_mb=0.01, progress=False)
    assert stats["shards"] > 1
    written = sum(p.stat().st_size for p in (tmp_path / "c").iterdir())
    assert written == stats["written_bytes"]
    assert abs(stats["estimated_bytes"] - written) / written < 0.10
    # Every example's rows are in exactly one shard, back to back, without padding.
    index = json.loads((tmp_path / "c" / "index.json").read_text())
    assert sum(s["tokens"] for s in index["shards"]) == index["tokens"] == sum(len(e.input_ids) for e in examples)
    with pytest.raises(DataError, match="already holds a feature cache"):
        write_feature_cache(target, examples, tmp_path / "c", (), progress=False)
    with pytest.raises(DataError, match=r"the feature cache needs about .* GiB free"):
        check_disk(tmp_path / "new" / "folder", 2**62)


def test_a_cache_for_another_target_layers_or_data_is_refused(tmp_path, setup, smol_tokenizer):
    target, examples = setup
    write_feature_cache(target, examples[:6], tmp_path / "c", (1,), progress=False)
    cache = FeatureCache(tmp_path / "c")
    with pytest.raises(DataError, match=r"made for another target \(name_or_path 'tiny-smol'"):
        cache.check(smol_target(smol_tokenizer, name="other-model"))
    with pytest.raises(DataError, match=r"made for another target \(num_hidden_layers 3"):
        cache.check(smol_target(smol_tokenizer, layers=4, name="tiny-smol"))
    with pytest.raises(DataError, match=r"stores layers \[1\] but the head reads layers \[0, 1\] \(missing \[0\]\)"):
        cache.check(target, (0, 1))
    with pytest.raises(DataError, match=r"4 of 10 training examples are not in the feature cache"):
        CachedFeatureDataset(examples[:10], cache, (1,))
    with pytest.raises(DataError, match="is not a feature cache"):
        FeatureCache(tmp_path)


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
def test_training_from_the_cache(tmp_path, setup, smol_tokenizer, kind):
    """`headstart features` then `train` with data.features_dir: the target never runs in a step."""
    target, _ = setup
    recipe = load_recipe(None, [
        f"data.train_files=[{tmp_path / 'conv.jsonl'}]", f"data.features_dir={tmp_path / 'feat'}",
        f"train.output_dir={tmp_path / 'run'}", "data.eval_size=4", "data.max_length=96", "train.batch_size=4",
        "train.bf16=false", "train.max_steps=3", "train.save_steps=100", "head.num_heads=2", "features.dtype=float32",
        "head.draft_vocab_size=300", f"head.kind={kind}", "train.ttt_steps=2",
    ])
    stats = write_features(recipe, target, progress=False)
    assert stats["layers"] == ([] if kind == "medusa" else [0, 1, 2]) and stats["data"]["examples"] == 24
    seen = set()  # every sequence the target's base model ran over during `train`
    handle = target.base.register_forward_hook(
        lambda module, args, kwargs, out: seen.update(tuple(r) for r in kwargs["input_ids"].tolist()), with_kwargs=True
    )
    try:
        summary = train(recipe, target)
    finally:
        handle.remove()
    assert summary.steps == 3 and summary.data["examples"] == 24
    # The target ran only over the held-out examples (measured after training), never in a step:
    # 3 steps of 4 would have added 12 training sequences.
    assert 0 < len(seen) <= summary.heldout_examples == 2
