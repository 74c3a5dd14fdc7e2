"""The CLI on a tiny target saved to disk: bad input is one `headstart VERB: error: ...` line, exit
status 2 and nothing written; `--debug` shows the traceback; overrides go anywhere on the line.

Most checks call `main` in this process (capsys); a few real subprocesses check the exit status and
that no traceback reaches the terminal.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
import transformers as tr
import yaml

import headstart as hs
from headstart.cli import build_parser, main, one_line
from headstart.config import RecipeError
from headstart.errors import HeadstartError
from headstart.heads.checkpoint import CheckpointError
from headstart.jsonl import DataError
from headstart.target import Target
from tests.helpers import assert_one_error_line, run_cli, snapshot, tiny_config

pytestmark = pytest.mark.usefixtures("no_progress_bars")

CONTEXT = 128  # the tiny target's max_position_embeddings
LONG_PROMPT = " ".join(["word"] * 200)  # longer than CONTEXT tokens with any template


def test_every_verb_has_help(capsys):
    verbs = ["distill", "features", "self-instruct", "train", "eval", "generate", "tune-tree", "export", "demo"]
    for verb in verbs:
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([verb, "--help"])
        assert e.value.code == 0
        assert "overrides" in capsys.readouterr().out


def test_bad_override_is_a_clear_error_and_exit_2(capsys):
    assert main(["train", "recipes/smollm2-135m/medusa.yaml", "train.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown recipe key 'train.lrr'" in err and "lr" in err
    assert main(["distill", "no/such/recipe.yaml"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_every_user_error_is_a_headstart_error():
    # main() catches HeadstartError; what it caught before must still be caught.
    assert issubclass(RecipeError, HeadstartError) and issubclass(DataError, HeadstartError)
    assert issubclass(CheckpointError, HeadstartError)


# ---------------------------------------------------------------- a tiny target, its heads and a recipe on disk


@pytest.fixture(scope="module")
def work(tmp_path_factory, smol_tokenizer) -> dict:
    """Paths: R (recipe), H (a head for the target), O (a head trained on another model of its shapes), root."""
    root = tmp_path_factory.mktemp("cli")
    config = tiny_config("llama")
    config.vocab_size = len(smol_tokenizer)
    config.max_position_embeddings = CONTEXT
    for seed, name in [(0, "target"), (1, "another-model")]:  # the same shapes, other weights
        torch.manual_seed(seed)
        tr.AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(root / name)
        smol_tokenizer.save_pretrained(root / name)
    target = Target.from_pretrained(root / "target", dtype=torch.float32)
    hs.heads.build("medusa", target, num_heads=3).save_pretrained(root / "head", target)
    other = Target.from_pretrained(root / "another-model", dtype=torch.float32)
    hs.heads.build("medusa", other, num_heads=3).save_pretrained(root / "other-head", other)

    conv = [{"messages": [{"role": "user", "content": f"count from {i}"}, {"role": "assistant", "content": f"{i} {i + 1}"}]}
            for i in range(24)]
    (root / "conv.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conv))
    (root / "prompts.jsonl").write_text(json.dumps({"id": "p0", "prompt": "hello"}) + "\n")
    (root / "eval.jsonl").write_text(json.dumps({"id": "e0", "category": "chat", "prompt": "Say hi."}) + "\n")
    out = root / "out"  # every output goes here; a refused command must not create it
    recipe = {
        "target": {"name_or_path": str(root / "target"), "dtype": "float32"},
        "distill": {"prompts": str(root / "prompts.jsonl"), "output": str(out / "distilled.jsonl")},
        "data": {"train_files": [str(root / "conv.jsonl")], "eval_size": 2, "max_length": 96},
        "train": {"output_dir": str(out / "run"), "bf16": False},
        "decode": {"tree": "chain3", "max_new_tokens": 8},
        "eval": {"prompts": str(root / "eval.jsonl"), "num_prompts": 1, "max_new_tokens": 4, "peers": False,
                 "output": str(out / "eval.json")},
    }
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return {"R": str(root / "recipe.yaml"), "H": str(root / "head"), "O": str(root / "other-head"), "root": root}


# Each case: the command line ({R} recipe, {H} head, {O} head for another model, {LONG} a prompt
# longer than the context) and what its one error line must name.
REFUSED = [
    # argparse checks: ranges that do not depend on the target
    ("generate {R} --head {H} --prompt hi --temperature -1", "argument --temperature: expected a value >= 0, got -1"),
    ("generate {R} --head {H} --prompt hi --top-p 1.5", "argument --top-p: expected a value > 0 and <= 1, got 1.5"),
    ("generate {R} --head {H} --prompt hi --top-p 0", "argument --top-p: expected a value > 0 and <= 1, got 0"),
    ("generate {R} --head {H} --prompt hi --top-k -3", "argument --top-k: expected a value >= 0, got -3"),
    ("generate {R} --head {H} --prompt hi --max-new-tokens -5", "argument --max-new-tokens: expected a value >= 1 and <= 1048576 (longer than any target's context window), got -5"),
    ("generate {R} --head {H} --prompt hi --max-new-tokens 0", "argument --max-new-tokens: expected a value >= 1 and <= 1048576 (longer than any target's context window), got 0"),
    ("eval {R} --head {H} --temperature -1", "argument --temperature: expected a value >= 0, got -1"),
    ("eval {R} --head {H} eval.num_prompts=2 --bogus", "unrecognized arguments: --bogus"),
    ("eval {R}", "the following arguments are required: --head"),
    # the recipe's ranges, checked as it loads (an override after an option included)
    ("distill {R} distill.max_new_tokens=-1", "distill.max_new_tokens: expected a value >= 1 and <= 1048576 (longer than any target's context window), got -1"),
    ("distill {R} distill.temperature=-1", "distill.temperature: expected a value >= 0, got -1"),
    ("distill {R} distill.top_p=1.5", "distill.top_p: expected a value > 0 and <= 1, got 1.5"),
    ("train {R} head.draft_vocab_size=-5", "head.draft_vocab_size: expected a value >= 1 and <= 4194304 (larger than any vocabulary; checked against the target's when it loads), got -5"),
    ("train {R} data.features_dir={root}/no-cache", "no-cache is not a feature cache (no index.json; an interrupted `headstart features` leaves none): run `headstart features RECIPE` to write it"),
    ("train {R} head.draft_vocab_size=0", "head.draft_vocab_size: expected a value >= 1 and <= 4194304 (larger than any vocabulary; checked against the target's when it loads), got 0"),
    ("eval {R} --head {H} eval.num_prompts=0", "eval.num_prompts: expected a value >= 1, got 0"),
    ("eval {R} --head {H} --head {H}", "is given twice"),
    ("export --head {H}", "give --out DIR, --push-to-hub REPO, or both"),
    # checks that need the target
    ("generate {R} --head {H} --prompt {LONG}", "context"),
    ("train {R} head.draft_vocab_size=100000", "draft_vocab_size"),
    ("train {R} head.kind=eagle3 head.feature_layers=[0,1,3]", "feature_layers"),
    ("eval {R} --head {O}", "another-model"),
    ("generate {R} --head {O} --prompt hi", "another-model"),
    ("tune-tree {R} --head {O}", "another-model"),
    ("generate {R} --head no-such-dir/head --prompt hi", "no-such-dir/head"),
    # a target that cannot be loaded: transformers' OSError, as one line
    ("generate {R} --head {H} --prompt hi target.name_or_path={root}/no-such-model", "cannot load the target"),
    ("distill {R} target.name_or_path=no-such-org/no-such-model", "no-such-org/no-such-model"),
]


@pytest.mark.parametrize("line, names", REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_input_is_one_error_line_and_writes_nothing(work, capsys, line, names):
    argv = [w.format(LONG=LONG_PROMPT, **work) for w in line.split()]
    before = snapshot(work["root"])
    code, err = run_cli(argv, capsys)
    assert_one_error_line(code, err, argv[0], names)
    assert snapshot(work["root"]) == before


def test_debug_shows_the_traceback_before_or_after_the_verb(work, capsys):
    for argv in (["--debug", "distill", work["R"], "distill.temperature=-1"], ["distill", work["R"], "--debug", "distill.temperature=-1"]):
        with pytest.raises(RecipeError, match="distill.temperature"):
            main(argv)
    assert not (work["root"] / "out").exists()


def test_overrides_after_options_and_a_head_for_another_target(work, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["eval", work["R"], "--head", work["O"], "eval.max_new_tokens=3", "--allow-other-target", f"eval.output={out}"]
    assert main(argv) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    assert report["prompts"]["count"] == 1 and report["prompts"]["max_new_tokens"] == 3
    argv = ["generate", work["R"], "--head", work["O"], "--allow-other-target", "--prompt", "hi", "--max-new-tokens", "2"]
    assert main(argv) == 0
    assert "target forwards" in capsys.readouterr().err


def test_export_replaces_a_folder_of_other_files_only_with_force(work, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    code, err = run_cli(["export", "--head", work["H"], "--out", str(out)], capsys)
    assert_one_error_line(code, err, "export", str(out))
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert main(["export", "--head", work["H"], "--out", str(out), "--force"]) == 0
    assert (out / "model.safetensors").is_file() and not (out / "notes.txt").exists()
    # --force never replaces the folder holding the head itself
    before = snapshot(work["root"])
    code, err = run_cli(["export", "--head", work["H"], "--out", work["H"], "--force"], capsys)
    assert_one_error_line(code, err, "export", work["H"])
    assert snapshot(work["root"]) == before


def test_real_processes_exit_2_without_traceback_and_1_with_debug(work):
    """The installed entry point as users run it: several processes at once (each spends seconds on imports)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    runs = {
        "context": ["generate", work["R"], "--head", work["H"], "--prompt", LONG_PROMPT],
        "recipe": ["eval", work["R"], "--head", work["H"], "distill.top_p=1.5"],
        "argparse": ["generate", work["R"], "--head", work["H"], "--prompt", "hi", "--top-p", "1.5"],
        "debug": ["--debug", "distill", work["R"], "distill.temperature=-1"],
    }
    before = snapshot(work["root"])
    procs = {
        name: subprocess.Popen([sys.executable, "-m", "headstart.cli", *argv], cwd=work["root"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, argv in runs.items()
    }
    done = {}
    for name, p in procs.items():
        _, err = p.communicate(timeout=300)
        done[name] = (p.returncode, err)
    for name, verb, names in [("context", "generate", "context"), ("recipe", "eval", "distill.top_p"), ("argparse", "generate", "--top-p")]:
        assert_one_error_line(*done[name], verb, names)
    code, err = done["debug"]
    assert code == 1 and "Traceback" in err and "RecipeError" in err and "distill.temperature" in err
    assert snapshot(work["root"]) == before


def test_an_error_quoting_a_line_break_of_the_users_input_stays_one_line(capsys):
    # A form feed in an override (found by the long fuzz run) once split the error over two lines.
    assert main(["train", "recipes/smollm2-135m/medusa.yaml", "data.columns=0\x0c"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("headstart train: error: ") and "\\x0c" in lines[0]
    assert one_line("a\nb\u2028c é") == "a\\nb\\u2028c é"
