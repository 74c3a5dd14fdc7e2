"""What headstart guarantees when runs collide, die, fill the disk or read damaged files
(docs/reliability.md lists each guarantee beside the test here that shows it).

Runs are real `headstart` processes on a tiny SmolLM2-shaped target saved to disk, killed with
SIGKILL where a kill is the point; a full disk is a 2 MiB tmpfs mounted for the test.
"""

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

import headstart as hs
from headstart.cli import main
from headstart.decode.corpus import FILE_NAME, CorpusNgram, CorpusNgramError
from headstart.files import sha256_file
from headstart.heads.checkpoint import CheckpointError, save_corpus
from headstart.lock import lock_path
from headstart.train.data import Example
from tests.helpers import flip_tensor_bytes, tiny_target, wait_until, write_conversations
from tests.helpers import start_headstart as headstart

QUICK_ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def train_recipe(tmp_path, smol_folder, **train) -> str:
    """A recipe training 2 Medusa heads on the tiny target; returns its file name (in tmp_path)."""
    write_conversations(tmp_path / "conv.jsonl")
    spec = {
        "target": {"name_or_path": str(smol_folder), "dtype": "float32"},
        "data": {"train_files": [str(tmp_path / "conv.jsonl")], "eval_size": 8, "max_length": 64},
        "head": {"num_heads": 2},
        "train": {"max_steps": 4, "save_steps": 2, "logging_steps": 2, "batch_size": 4, "bf16": False, "corpus_ngram": 2,
                  **train},
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(spec))
    return "recipe.yaml"


def ended(proc: subprocess.Popen, code: int) -> str:
    """Wait for `proc`, check its exit status; returns its stderr."""
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == code, err[-3000:]
    return err


def one_error_line(err: str) -> str:
    """The stderr of a refused command: one `headstart VERB: error:` line and nothing else."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and ": error: " in lines[0] and "Traceback" not in err, err[-3000:]
    return lines[0]


def test_a_second_training_into_one_output_dir_is_refused_and_a_dead_holders_lock_taken_over(tmp_path, smol_folder):
    """A second `headstart train` into a folder a live run writes is refused in one line naming the
    holder; once the holder is killed (-9), a resumed run takes its lock over, says so, and ends."""
    name = train_recipe(tmp_path, smol_folder, max_steps=400, save_steps=2)
    first = headstart("train", name, "train.output_dir=run", cwd=tmp_path)
    wait_until(first, lambda: (tmp_path / "run" / "checkpoint-2" / "trainer_state.json").is_file(), "checkpoint-2")
    second = headstart("train", name, "train.output_dir=run", "train.resume_from_checkpoint=last", cwd=tmp_path)
    line = one_error_line(ended(second, 2))
    assert f"PID {first.pid}" in line and "headstart train" in line and "another run" in line
    assert first.poll() is None, "the first run must have been alive while the second was refused"
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    assert lock_path(tmp_path / "run").is_file()  # the dead holder's lock file, still naming it

    err = ended(headstart("train", name, "train.output_dir=run", "train.resume_from_checkpoint=last",
                          "train.max_steps=400", "train.max_minutes=0.05", cwd=tmp_path), 0)
    assert f"took over the lock on run left by headstart train (PID {first.pid}" in err
    assert not lock_path(tmp_path / "run").exists()  # a run that ends removes its lock
    assert (tmp_path / "run" / "final" / "config.json").is_file()


# -------------------- a full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root can mount one: CI runs as root), nearly filled by a file `filler` that
    leaves `free` bytes: the disk of a run that fills it."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root?): the full-disk tests need a real small disk")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder, leave: int) -> None:
    """Write a filler file that leaves about `leave` bytes free on `folder`'s disk."""
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave))


def error_lines(err: str) -> list[str]:
    """The `error:` lines of a command's stderr, which must hold no traceback."""
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if ": error: " in line]


def test_a_full_disk_ends_training_in_one_line_and_leaves_no_partial_checkpoint(tmp_path, smol_folder, small_disk):
    name = train_recipe(tmp_path, smol_folder)
    run = small_disk / "run"
    fill(small_disk, 24 << 10)  # a checkpoint of this head with its optimizer state is larger
    err = ended(headstart("train", name, f"train.output_dir={run}", cwd=tmp_path), 2)
    (line,) = error_lines(err)
    assert f"no space left on the disk of {run} while writing checkpoint-2" in line and "needs about" in line
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "run"]  # no staging
    assert list(run.iterdir()) == []  # no empty or partial checkpoint-2

    (small_disk / "filler").unlink()  # space again: the rerun is a fresh run, never refused as an earlier one
    ended(headstart("train", name, f"train.output_dir={run}", "train.resume_from_checkpoint=last", cwd=tmp_path), 0)
    assert (run / "final" / "config.json").is_file() and (run / "checkpoint-4").is_dir()


def test_a_full_disk_ends_an_export_in_one_line_and_leaves_nothing(tmp_path, small_disk, capsys):
    target = tiny_target("llama")
    head = hs.heads.build("medusa", target, num_heads=4, shared_lm_head=False)  # about 330 KiB of weights
    head.save_pretrained(tmp_path / "head", target)
    fill(small_disk, 64 << 10)
    assert main(["export", "--head", str(tmp_path / "head"), "--out", str(small_disk / "out")]) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert f"no space left on the disk of {small_disk} while writing the headstart layout of the head (out)" in line
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


# -------------------- corrupt files


def head_with_corpus(folder, target):
    """A saved Medusa head with its corpus table, as training leaves final/."""
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(folder, target)
    answers = [Example(input_ids=[(i * 7 + j) % 100 for j in range(400)], loss_mask=[1] * 400, source=f"x:{i}") for i in range(20)]
    save_corpus(folder, answers, order=3, max_tokens=10_000)
    return folder


def test_every_file_of_a_head_is_checked_and_the_table_ranges_too(tmp_path):
    target = tiny_target("llama")
    folder = head_with_corpus(tmp_path / "h", target)
    config = json.loads((folder / "config.json").read_text())
    assert sorted(config["sha256"]) == [FILE_NAME, "model.safetensors"]
    assert hs.load_heads(folder, target).corpus is not None
    flip_tensor_bytes(folder / FILE_NAME, n=400)
    with pytest.raises(CheckpointError, match=f"{FILE_NAME} does not match the SHA-256"):
        hs.load_heads(folder, target)

    # A table whose checksum fits but whose ranges do not (written so by a bug, or edited): refused at load.
    table = CorpusNgram.build([[1, 2, 3, 1, 2, 4]], order=2)
    ctx, totals, starts, nxt, cnt = table.tables[1]
    backwards = starts.copy()
    backwards[1], backwards[2] = starts[2], starts[1]  # offsets [0, 3, 2, 4]: context 1's successors run backwards
    table.tables[1] = (ctx, totals, backwards, nxt, cnt)
    table.save(folder)
    config["sha256"][FILE_NAME] = sha256_file(folder / FILE_NAME)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorpusNgramError, match="order-2 table has successor offsets"):
        hs.load_heads(folder, target)
    table.tables[1] = (ctx, totals, starts, nxt + 1000, cnt)  # token ids past the vocabulary of 128
    table.save(folder)
    config["sha256"][FILE_NAME] = sha256_file(folder / FILE_NAME)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorpusNgramError, match=r"next token ids outside \[0, 128\)"):
        hs.load_heads(folder, target)


def test_data_files_that_are_not_what_their_name_says_are_one_line_naming_file_and_line(tmp_path, capsys):
    """Checked before the target loads (here a folder that does not exist: reaching it would be another error)."""
    import gzip

    rows = [json.dumps({"messages": [{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": "yo"}]})
            for i in range(3000)]
    packed = gzip.compress(("\n".join(rows) + "\n").encode())
    files = {
        "cut.jsonl.gz": (packed[: len(packed) // 2], "the gzip data ends early: the file is truncated"),
        "plain.jsonl.gz": ("\n".join(rows).encode(), "not valid gzip data"),
        "latin1.jsonl": ("\n".join(rows[:2]).encode() + b'\n{"messages": "caf\xe9"}\n', "latin1.jsonl:3: not UTF-8 text"),
        "latin1.json": (b'[\n{"a": 1},\n {"b": "caf\xe9"}]', "latin1.json:3: not UTF-8 text"),
    }
    for name, (data, expected) in files.items():
        (tmp_path / name).write_bytes(data)
        code = main(["train", str(write_recipe(tmp_path)), f"train.output_dir={tmp_path / 'run'}",
                     f"data.train_files=[{tmp_path / name}]", f"target.name_or_path={tmp_path / 'no-model'}"])
        err = capsys.readouterr().err
        assert code == 2 and expected in one_error_line(err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, "recipe.yaml"])  # nothing written


def write_recipe(tmp_path, text: str = "train:\n  max_steps: 1\n"):
    (tmp_path / "recipe.yaml").write_text(text)
    return tmp_path / "recipe.yaml"


@pytest.mark.parametrize("text, argv, expected", [
    ("- a\n- b\n", ["train.max_steps=1"], "a recipe is a mapping of sections (target:, data:, train:, ...), but its top level is a list"),
    ("train:\n", ["train.max_steps=1"], "data.train_files is empty"),  # an empty section takes overrides
    ("", [], "data.train_files is empty"),  # said before the (default, embedded) target loads
    (None, [], "is a folder; give a YAML file"),
    ("head:\n  kind: dflash\n", ["train.free_hit_weight=0.5"], "train.free_hit_weight: complementary training weighs the loss of medusa and eagle3"),
    ("", ["decode.hybrid_nodes=100000"], "decode.hybrid_nodes: expected a value >= 0 and <= 1024 (one target forward verifies"),
])
def test_recipe_mistakes_are_said_as_they_are(tmp_path, capsys, monkeypatch, text, argv, expected):
    recipe = tmp_path if text is None else write_recipe(tmp_path, text)

    def no_target(*args, **kwargs):
        raise AssertionError("the target was loaded before the recipe's mistake was said")

    monkeypatch.setattr(hs.Target, "from_pretrained", no_target)  # said before any target loads, not timed
    assert main(["train", str(recipe), *argv]) == 2
    assert expected in one_error_line(capsys.readouterr().err)


def test_a_killed_exports_staging_folder_is_removed_by_the_next_export(tmp_path, capsys):
    target = tiny_target("llama")
    hs.heads.build("medusa", target, num_heads=2).save_pretrained(tmp_path / "head", target)
    stage = ("import sys, time\nfrom headstart.files import staged_folder\n"
             "with staged_folder(sys.argv[1]) as tmp:\n    (tmp / 'part').write_bytes(b'x')\n    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", stage, str(tmp_path / "out")], env={**os.environ, **QUICK_ENV})
    left = f".out.{proc.pid}-"
    wait_until(proc, lambda: any(p.name.startswith(left) for p in tmp_path.iterdir()), "a staging folder")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    (staging,) = [p for p in tmp_path.iterdir() if p.name.startswith(left)]

    assert main(["export", "--head", str(tmp_path / "head"), "--out", str(tmp_path / "out")]) == 0
    assert f"removed {staging}, left by a write of {tmp_path / 'out'} by process {proc.pid}" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head", "out"]


def test_serve_check_refuses_a_vllm_python_that_is_not_executable(tmp_path, smol_folder, monkeypatch, capsys):
    target = hs.Target.from_pretrained(str(smol_folder), dtype="float32")
    hs.heads.build("medusa", target, num_heads=3).save_pretrained(tmp_path / "head", target)
    (tmp_path / "python").write_text("#!/bin/sh\n")  # mode 0644
    monkeypatch.setenv("HEADSTART_VLLM_PYTHON", str(tmp_path / "python"))
    recipe = write_recipe(tmp_path, yaml.safe_dump({"target": {"name_or_path": str(smol_folder), "dtype": "float32"}}))
    code = main(["serve-check", str(recipe), "--head", str(tmp_path / "head"), "--out", str(tmp_path / "sc.json"),
                 "--layout", "vllm-medusa"])
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path / 'python'} is not executable (HEADSTART_VLLM_PYTHON)" in err.splitlines()[-1]
    assert "Traceback" not in err and not list(tmp_path.glob("sc*"))  # no empty vLLM log
