"""scripts/bench_peers.py's command line, its peers' commands and its choice of checkpoint, and the pure parts of
scripts/peers/eagle3_official_cpu.py (the runs themselves, which need .venv-peers, .venv-eagle3 with the official
code and vLLM, are the script's --smoke; docs/peers.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import time

import pytest

from headstart.recipe import load_recipe
from tests.helpers import ROOT, smol_target

RECIPE = str(ROOT / "recipes/smollm2-135m/eagle3.yaml")


@pytest.fixture
def bench(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "scripts" / "bench_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("PEERS_PYTHON", "SUFFIX_PYTHON", "OFFICIAL_PYTHON"):  # environments that exist, so that only the arguments are judged
        path = tmp_path / "env" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("")
        setattr(module, name, path)
    module.OFFICIAL_SOURCE = tmp_path / "env" / "traineagle3"
    module.OFFICIAL_SOURCE.mkdir()
    (module.OFFICIAL_SOURCE / "cnets.py").write_text("")
    return module


@pytest.fixture
def official():
    spec = importlib.util.spec_from_file_location("eagle3_official_cpu", ROOT / "scripts" / "peers" / "eagle3_official_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(bench, argv):
    ap = bench.parser()
    return bench.check_args(ap, ap.parse_args(argv))


def refused(bench, argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        check(bench, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].startswith("bench_peers.py: error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


def test_defaults_and_smoke(bench, tmp_path):
    args = check(bench, [RECIPE, "--out", str(tmp_path / "out")])
    assert (args.minutes, args.ks, args.suffix_ks, args.ngram_k, args.humaneval, args.examples) == (11.0, [2, 3], [3, 8], [3], 10, None)
    smoke = check(bench, [RECIPE, "--smoke", "--out", str(tmp_path / "out")])
    assert (smoke.minutes, smoke.examples, smoke.ks, smoke.suffix_ks, smoke.probe_steps, smoke.humaneval) == (0.5, 20, [2], [2], 1, 0)
    none = check(bench, [RECIPE, "--suffix-ks", "0", "--corpus-ks", "0", "--hybrid-ks", "0", "--ks", "3", "3", "2",
                         "--out", str(tmp_path / "out")])
    assert none.suffix_ks == [] and none.corpus_ks == [] and none.hybrid_ks == [] and none.ks == [2, 3]


def test_bad_input_is_one_error_line(bench, tmp_path, capsys):
    out = ["--out", str(tmp_path / "out")]
    assert "--minutes must be > 0" in refused(bench, [RECIPE, "--minutes", "0", *out], capsys)
    assert "--examples must be at least 2" in refused(bench, [RECIPE, "--examples", "1", *out], capsys)
    assert "--ks: k must be at least 1" in refused(bench, [RECIPE, "--ks", "0", *out], capsys)
    assert "--suffix-ks: k must be >= 0" in refused(bench, [RECIPE, "--suffix-ks", "-1", *out], capsys)
    assert "no recipe at nope.yaml" in refused(bench, ["nope.yaml", *out], capsys)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    assert "is not an empty folder" in refused(bench, [RECIPE, "--out", str(tmp_path / "used")], capsys)
    bench.SUFFIX_PYTHON = tmp_path / "missing" / "python"
    assert "--suffix-ks 0" in refused(bench, [RECIPE, *out], capsys)
    assert check(bench, [RECIPE, "--suffix-ks", "0", *out]).suffix_ks == []
    out += ["--suffix-ks", "0"]
    assert check(bench, [RECIPE, *out]).peers == ["official", "speculators"]
    assert "invalid choice" in refused(bench, [RECIPE, "--peers", "medusa", *out], capsys)
    bench.OFFICIAL_PYTHON = tmp_path / "missing" / "python"
    assert "run `make official-eagle3`" in refused(bench, [RECIPE, *out], capsys)
    assert check(bench, [RECIPE, "--peers", "speculators", *out]).peers == ["speculators"]
    bench.PEERS_PYTHON = tmp_path / "missing" / "python"
    assert "run `make peers`" in refused(bench, [RECIPE, "--peers", "speculators", *out], capsys)


def test_speculators_commands(bench, tmp_path):
    recipe = load_recipe(RECIPE, [])
    argv = bench.speculators_train_args(recipe, None, tmp_path / "data", tmp_path / "save", 40)
    assert argv[0] == "train" and argv[argv.index("--verifier-name-or-path") + 1].endswith("smollm2-135m-instruct")
    pairs = dict(zip(argv[1::2], argv[2::2]))
    assert pairs["--draft-attn-impl"] == "sdpa" and pairs["--loss-implementation"] == "eager"  # what a CPU needs
    assert pairs["--draft-vocab-size"] == "8192"  # the recipe's, and its tokens a step (4 x 384): speculators packs to it
    assert pairs["--total-seq-len"] == "1536"
    assert pairs["--max-steps"] == pairs["--scheduler-total-steps"] == "40"
    assert "--max-steps" not in bench.speculators_train_args(recipe, None, tmp_path / "data", tmp_path / "save", None)
    assert "--lr" not in pairs and "--epochs" not in pairs  # its own defaults otherwise


def test_official_eagle3_command(bench, tmp_path):
    """The official code runs with the recipe's draft vocabulary and peak learning rate, on headstart's rows, to the clock."""
    recipe = load_recipe(RECIPE, [])
    argv = bench.official_train_args(recipe, tmp_path / "rows.jsonl", tmp_path / "official", 11.0)
    pairs = dict(zip(argv[::2], argv[1::2]))
    assert pairs["--source"] == str(bench.OFFICIAL_SOURCE) and pairs["--model"].endswith("smollm2-135m-instruct")
    assert pairs["--rows"] == str(tmp_path / "rows.jsonl") and pairs["--minutes"] == "11.0"
    assert pairs["--draft-vocab-size"] == "8192" and float(pairs["--lr"]) == recipe.train.lr


def test_the_official_runner_keeps_their_rules(official, tmp_path):
    """scandata's draft vocabulary (the most frequent tokens at loss positions, sorted; d2t, t2d), WarmupDecayLR's shape
    over the clock, their config.json filled in for the target, and the target folder transformers 4.53 reads."""
    rows = [([5, 7, 7, 9, 3], [0, 1, 1, 1, 0]), ([7, 9, 2, 2], [1, 1, 0, 1])]  # at loss positions: 7 x3, 9 x2, 2 x1
    cache = official.vocabulary_cache(rows, 2, 12)
    assert cache["t2d"].nonzero().flatten().tolist() == [7, 9] and cache["d2t"].tolist() == [7, 8]  # id = index + d2t
    assert official.vocabulary_cache(rows, 4, 12)["t2d"].nonzero().flatten().tolist() == [0, 2, 7, 9]  # topped up by id
    assert official.lr_at(0.0, 1e-3) == 0.0 and official.lr_at(official.WARMUP_SHARE, 1e-3) == pytest.approx(1e-3)
    assert official.lr_at(0.5, 1e-3) == pytest.approx(1e-3 * 0.5 / (1 - official.WARMUP_SHARE)) and official.lr_at(1.0, 1e-3) == 0.0
    model = tmp_path / "model"
    model.mkdir()
    import torch
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.zeros(12, 4), "model.norm.weight": torch.ones(4)}, str(model / "model.safetensors"))
    target_config = {"hidden_size": 4, "intermediate_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "vocab_size": 12, "rms_norm_eps": 1e-5, "max_position_embeddings": 64, "hidden_act": "silu",
                     "num_hidden_layers": 30, "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}}
    (model / "config.json").write_text(json.dumps(target_config))
    view = official.target_view(model, tmp_path / "save")
    assert json.loads((view / "config.json").read_text())["rope_theta"] == 100000.0
    index = json.loads((view / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {"model.embed_tokens.weight": "model.safetensors", "model.norm.weight": "model.safetensors"}
    assert (view / "model.safetensors").resolve() == (model / "model.safetensors").resolve()
    assert json.loads((model / "config.json").read_text()) == target_config  # the target's own folder untouched
    draft = official.draft_config(target_config, 6)
    assert draft["num_hidden_layers"] == 1 and draft["draft_vocab_size"] == 6 and draft["hidden_size"] == 4
    assert not any(k.startswith("rope") for k in draft)  # their layer's RoPE base is 10000 whatever the target's


def test_the_official_runner_refuses_bad_input_and_keeps_a_draft(official, tmp_path):
    """One `error:` line for a missing code folder, rows file or model folder, or a --minutes of 0; a --save that holds a
    draft is refused and left as it was."""
    source, model, rows, save = tmp_path / "src", tmp_path / "model", tmp_path / "rows.jsonl", tmp_path / "save"
    for folder in (source, model, save):
        folder.mkdir()
    (source / "cnets.py").write_text("")
    (model / "config.json").write_text("{}")
    rows.write_text('{"input_ids": [1, 2], "loss_mask": [0, 1]}\n')
    (save / "model.safetensors").write_bytes(b"a draft")

    def refused(**changes) -> str:
        argv = {"--source": source, "--model": model, "--rows": rows, "--save": save, "--minutes": 1, **changes}
        with pytest.raises(SystemExit) as e:
            official.main([str(x) for kv in argv.items() for x in kv])
        assert str(e.value).startswith("eagle3_official_cpu: error: ") and "\n" not in str(e.value)
        return str(e.value)

    assert "has no cnets.py" in refused(**{"--source": tmp_path / "nowhere"})
    assert "no rows file" in refused(**{"--rows": tmp_path / "none.jsonl"})
    assert "no config.json" in refused(**{"--model": tmp_path / "nomodel"})
    assert "--minutes must be > 0" in refused(**{"--minutes": 0, "--save": tmp_path / "new"})
    assert "already holds a draft" in refused()
    assert (save / "model.safetensors").read_bytes() == b"a draft" and sorted(p.name for p in save.iterdir()) == ["model.safetensors"]


def test_the_newest_checkpoint_is_served(bench, tmp_path, capsys):
    save = tmp_path / "save"
    with pytest.raises(SystemExit, match="bench_peers: error: speculators saved no checkpoint"):
        bench.newest_checkpoint(save)
    for i, name in enumerate(["0", "1", "checkpoint_best"]):
        (save / name).mkdir(parents=True)
        (save / name / "model.safetensors").write_text("")
        os.utime(save / name, (time.time() + i, time.time() + i))
    assert bench.newest_checkpoint(save) == save / "1"


def test_speculators_step_time_comes_from_its_log(bench, tmp_path):
    log = tmp_path / "probe.log"
    log.write_text("INFO  profile/fwd_ms=398.457,\n  profile/step_ms=1.03e+03,\n x profile/step_ms=900.5, profile/step_ms=2.5e+03\n")
    assert bench.logged_step_seconds(log) == pytest.approx(1.03)
    log.write_text("no profile lines\n")
    assert bench.logged_step_seconds(log) is None


def test_serving_again_the_heads_an_earlier_run_left(bench, tmp_path, capsys):
    earlier, out = tmp_path / "earlier", ["--out", str(tmp_path / "out")]
    assert "no trained heads there" in refused(bench, [RECIPE, "--serve-from", str(earlier), *out], capsys)
    (earlier / "headstart" / "final").mkdir(parents=True)
    (earlier / "headstart" / "train_summary.json").write_text('{"steps": 577, "train_seconds": 661.5, "heldout": {"top1": [0.38]}}')
    assert "no trained heads there" in refused(bench, [RECIPE, "--serve-from", str(earlier), *out], capsys)  # speculators' missing
    (earlier / "speculators" / "0").mkdir(parents=True)
    (earlier / "speculators" / "0" / "model.safetensors").write_text("")
    (earlier / "speculators.log").write_text("  trainer/max_steps=245, logging/logger='',\n")
    assert "no trained heads there" in refused(bench, [RECIPE, "--serve-from", str(earlier), *out], capsys)  # the official's missing
    serve_spec = [RECIPE, "--serve-from", str(earlier), "--peers", "speculators", *out]
    assert check(bench, serve_spec).serve_from == str(earlier)
    head, peers, trained_by = bench.earlier_heads(earlier, ["speculators"])
    assert head == earlier / "headstart" / "final" and peers == {"speculators": earlier / "speculators" / "0"}
    assert trained_by["headstart"]["steps"] == 577 and trained_by["speculators"] == {"planned_steps": 245}
    (earlier / "official").mkdir()
    (earlier / "official" / "model.safetensors").write_text("")
    (earlier / "official" / "summary.json").write_text('{"steps": 480, "seconds": 660.2, "epochs": 1}')
    bench.PEERS_PYTHON = bench.OFFICIAL_PYTHON = tmp_path / "missing" / "python"  # serving needs no trainer's environment
    assert check(bench, [RECIPE, "--serve-from", str(earlier), *out]).peers == ["official", "speculators"]
    _, peers, trained_by = bench.earlier_heads(earlier, ["official", "speculators"])
    assert peers["official"] == earlier / "official" and trained_by["official"] == {"steps": 480, "seconds": 660.2, "epochs": 1}


def test_a_speculators_run_that_trained_on_nothing_stops_the_bench(bench, tmp_path):
    log = tmp_path / "probe.log"
    log.write_text("  train/loss_0=0.00e+00, train/loss=0.00e+00,\n  train/loss=0.00e+00,\n")
    with pytest.raises(SystemExit, match="speculators trained on no tokens"):
        bench.check_trained(log)
    log.write_text("  train/loss=0.00e+00,\n  train/loss=9.21e+00,\n")
    bench.check_trained(log)  # a first step may log 0; a later one learned
    log.write_text("nothing logged\n")
    bench.check_trained(log)


def test_headstart_from_features_cached_before_its_clock(bench, tmp_path, capsys, smol_tokenizer):
    """--features: headstart's recipe reads a feature cache written before training (charged to neither clock), as
    speculators reads hidden states computed before its own."""
    out = ["--out", str(tmp_path / "out")]
    assert "give one of them" in refused(bench, [RECIPE, "--features", "--serve-from", str(tmp_path), *out], capsys)
    assert check(bench, [RECIPE, "--features", *out]).features
    with open(tmp_path / "conv.jsonl", "w") as f:
        for i in range(6):
            f.write(json.dumps({"messages": [{"role": "user", "content": f"count to {i + 3}"},
                                             {"role": "assistant", "content": " ".join(map(str, range(i + 3)))}]}) + "\n")
    recipe = load_recipe(None, [f"data.train_files=[{tmp_path / 'conv.jsonl'}]", "data.max_length=48", "head.kind=eagle3",
                                "features.dtype=float32"])
    target = smol_target(smol_tokenizer)
    folder = tmp_path / "out" / "headstart-features"
    cached, report = bench.cache_headstart_features(recipe, target, folder)
    assert cached.data.features_dir == str(folder) and recipe.data.features_dir is None
    assert report["tokens"] > 0 and report["written_bytes"] > 0 and report["seconds"] >= 0
    index = json.loads((folder / "index.json").read_text())
    assert index["layers"] == target.default_feature_layers() and index["examples"] == 6  # what the EAGLE-3 head reads
