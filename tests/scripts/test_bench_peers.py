"""scripts/bench_peers.py's command line, its speculators commands and its choice of checkpoint (the runs
themselves, which need .venv-peers and vLLM, are the script's --smoke; docs/peers.md)."""

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
    for name in ("PEERS_PYTHON", "SUFFIX_PYTHON"):  # environments that exist, so that only the arguments are judged
        path = tmp_path / "env" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("")
        setattr(module, name, path)
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
    bench.PEERS_PYTHON = tmp_path / "missing" / "python"
    assert "run `make peers`" in refused(bench, [RECIPE, *out], capsys)


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
    assert check(bench, [RECIPE, "--serve-from", str(earlier), *out]).serve_from == str(earlier)
    head, spec, trained_by = bench.earlier_heads(earlier)
    assert head == earlier / "headstart" / "final" and spec == earlier / "speculators" / "0"
    assert trained_by["headstart"]["steps"] == 577 and trained_by["speculators"] == {"planned_steps": 245}


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
