"""Resuming and restarting runs without losing or mixing work (docs/architecture.md, principle 10).

`headstart train` and `headstart distill` run as real processes on a tiny SmolLM2-shaped target
saved to disk, are killed with SIGKILL mid-run and resumed: they end with the files an uninterrupted
run writes. Refusals (another recipe's checkpoints, another distillation's settings, a folder holding
an earlier run) are checked in this process.
"""

import json
import os
import signal
import subprocess

import pytest
import yaml
from safetensors.torch import load_file

from headstart.config import RecipeError
from headstart.jsonl import DataError
from headstart.recipe import load_recipe
from headstart.target import Target
from headstart.train.distill import distill
from headstart.train.resume import ResumeError
from headstart.train.trainer import train
from tests.helpers import assert_close, recipe, wait_until, write_conversations, write_prompts
from tests.helpers import start_headstart as headstart


def finish(proc: subprocess.Popen) -> str:
    """Wait for a run that must succeed; returns its stderr."""
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return err


def kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    """SIGKILL `proc` as soon as `ready()` holds; it must still be running then."""
    wait_until(proc, ready, what)
    assert proc.poll() is None, f"the run ended before it could be killed after {what}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def complete(folder) -> bool:
    """Whether a checkpoint's trainer_state.json (written last) is there and whole."""
    try:
        json.loads((folder / "trainer_state.json").read_text())
        return True
    except (OSError, ValueError):
        return False


def assert_same_weights(a, b) -> None:
    """Two safetensors files hold the same tensors (float32 on one machine: equal up to rounding)."""
    x, y = load_file(a), load_file(b)
    assert sorted(x) == sorted(y)
    for name in x:
        assert_close(x[name], y[name], name)


def test_killed_training_resumes_to_the_same_best_and_final_head(tmp_path, smol_folder):
    """kill -9 after a checkpoint past the best one, resume: best/ (step and weights), final/ and the
    summary are the uninterrupted run's. The head has not learned to hit any token yet (simulated τ
    stays 1.0), so the first checkpoint is the best and stays so; a resume that forgot the best score
    took its own first checkpoint for the best (step 6 instead of step 2 when resumed from step 4)."""
    write_conversations(tmp_path / "conv.jsonl")
    spec = {
        "target": {"name_or_path": str(smol_folder), "dtype": "float32"},
        "data": {"train_files": [str(tmp_path / "conv.jsonl")], "eval_size": 8, "max_length": 64},
        "head": {"num_heads": 2},
        "train": {"max_steps": 16, "save_steps": 2, "logging_steps": 2, "batch_size": 4, "bf16": False, "lr": 1e-2,
                  "save_total_limit": 3},
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(spec))
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    runs = {name: headstart("train", "recipe.yaml", f"train.output_dir={name}", cwd=tmp_path) for name in ("whole", "cut")}
    kill_when(runs["cut"], lambda: complete(cut / "checkpoint-4"), "checkpoint-4")
    assert not (cut / "final").exists()
    finish(runs["whole"])
    finish(headstart("train", "recipe.yaml", "train.output_dir=cut", "train.resume_from_checkpoint=last", cwd=tmp_path))

    best = [json.loads((run / "best" / "config.json").read_text())["best"] for run in (whole, cut)]
    assert (best[0]["step"], best[0]["sim_accept_length"]) == (2, 1.0)  # the premise: nothing better came later
    assert best[1]["step"] == best[0]["step"]
    assert best[1]["sim_accept_length"] == best[0]["sim_accept_length"]
    assert_same_weights(whole / "best" / "model.safetensors", cut / "best" / "model.safetensors")
    assert_same_weights(whole / "final" / "model.safetensors", cut / "final" / "model.safetensors")
    summary = [json.loads((run / "train_summary.json").read_text()) for run in (whole, cut)]
    assert summary[1]["steps"] == summary[0]["steps"] == 16
    assert summary[1]["heldout"] == summary[0]["heldout"]
    assert summary[1]["best_checkpoint"]["step"] == summary[0]["best_checkpoint"]["step"]
    assert_close(summary[1]["train_loss"], summary[0]["train_loss"], "mean training loss, cut run against whole")


def test_killed_distillation_resumes_only_with_its_own_settings(tmp_path, smol_folder):
    """kill -9 mid-run; a resume with another temperature is refused and changes nothing; a resume with
    the same settings ends with the uninterrupted run's rows."""
    write_prompts(tmp_path / "p.jsonl", 24)
    spec = {
        "target": {"name_or_path": str(smol_folder), "dtype": "float32"},
        "distill": {"prompts": str(tmp_path / "p.jsonl"), "batch_size": 1, "max_new_tokens": 24},
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(spec))
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    runs = {p: headstart("distill", "recipe.yaml", f"distill.output={p}", cwd=tmp_path) for p in (whole, cut)}

    def rows_written() -> bool:
        return cut.is_file() and cut.read_text().count("\n") >= 2

    kill_when(runs[cut], rows_written, "two rows")
    finish(runs[whole])
    before = cut.read_bytes()
    assert before.count(b"\n") < 24
    hot = load_recipe(tmp_path / "recipe.yaml", [f"distill.output={cut}", "distill.temperature=0.7"])
    with pytest.raises(DataError, match=r"distill.temperature was 0.0, is 0.7; recorded in cut.distill.json"):
        distill(Target.from_pretrained(str(smol_folder), dtype="float32"), hot.distill, progress=False)
    assert cut.read_bytes() == before
    finish(headstart("distill", "recipe.yaml", f"distill.output={cut}", cwd=tmp_path))
    assert cut.read_text() == whole.read_text()


def test_distillation_refuses_a_resume_with_other_settings(tmp_path, smol_shaped_target):  # noqa: F811
    target = smol_shaped_target
    write_prompts(tmp_path / "p.jsonl", 6)
    out = tmp_path / "out.jsonl"

    def cfg(**changes):
        from headstart.config import DistillConfig

        base = dict(prompts=str(tmp_path / "p.jsonl"), output=str(out), batch_size=2, max_new_tokens=4)
        return DistillConfig(**{**base, **changes})

    distill(target, cfg(), progress=False, max_batches=1)
    settings = json.loads((tmp_path / "out.distill.json").read_text())["settings"]
    assert settings["distill.max_new_tokens"] == 4 and settings["target.name_or_path"] == "tiny-smol"
    rows = out.read_text()
    for change, message in [
        ({"max_new_tokens": 5}, "distill.max_new_tokens was 4, is 5"),
        ({"temperature": 0.5}, "distill.temperature was 0.0, is 0.5"),
        ({"top_p": 0.9}, "distill.top_p was 1.0, is 0.9"),
        ({"seed": 1}, "distill.seed was 0, is 1"),
        ({"shard_size": 2}, "distill.shard_size was 0, is 2"),
        ({"system_prompt": "Be terse."}, 'distill.system_prompt was null, is "Be terse."'),
    ]:
        with pytest.raises(DataError, match="written with other settings") as e:
            distill(target, cfg(**change), progress=False)
        assert message in str(e.value) and "write to a new distill.output" in str(e.value)
    other = Target(target.model, target.tokenizer, name="another-target")
    with pytest.raises(DataError, match='target.name_or_path was "tiny-smol", is "another-target"'):
        distill(other, cfg(), progress=False)
    assert out.read_text() == rows  # nothing was appended or repaired
    # Rows without a record of their settings are not appended to either.
    (tmp_path / "out.distill.json").unlink()
    with pytest.raises(DataError, match="settings they were made with are unknown"):
        distill(target, cfg(), progress=False)
    assert out.read_text() == rows
    # The same settings resume; a new output records its own settings.
    (tmp_path / "out.distill.json").write_text(json.dumps({"settings": settings}))
    assert distill(target, cfg(), progress=False)["new_rows"] == 4
    distill(target, cfg(output=str(tmp_path / "hot.jsonl"), temperature=0.5), progress=False)
    assert json.loads((tmp_path / "hot.distill.json").read_text())["settings"]["distill.temperature"] == 0.5


def snapshot(folder) -> dict:
    """Every file under `folder` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_holding_another_run_is_never_taken_over(tmp_path, smol_shaped_target):  # noqa: F811
    """The case that asked for it: output_dir holds another run's checkpoint-6 and final/; a new recipe neither
    trains over it silently nor resumes from it, and starts over only when asked, deleting only what
    training wrote."""
    target = smol_shaped_target
    run = tmp_path / "run"
    train(recipe(tmp_path, "train.max_steps=6", "train.save_steps=3"), target)
    (run / "notes.txt").write_text("the user's own file")
    before = snapshot(run)
    new = ["train.max_steps=2", "train.save_steps=1", "train.lr=2e-2"]
    with pytest.raises(ResumeError) as e:
        train(recipe(tmp_path, *new), target)
    message = str(e.value)
    assert "(checkpoint-3, checkpoint-6, best, final, train_summary.json)" in message
    for advice in ("train.resume_from_checkpoint=last", "train.overwrite_output_dir=true", "another train.output_dir"):
        assert advice in message
    with pytest.raises(ResumeError) as e:
        train(recipe(tmp_path, *new, "train.resume_from_checkpoint=last"), target)
    message = str(e.value)
    assert "checkpoint-6 was written by another recipe" in message
    assert "train.lr was 0.01, is 0.02" in message and "train.max_steps was 6, is 2" in message
    with pytest.raises(RecipeError, match="set only one"):
        train(recipe(tmp_path, *new, "train.resume_from_checkpoint=last", "train.overwrite_output_dir=true"), target)
    assert snapshot(run) == before
    # A finished run without checkpoints still counts as a run.
    for name in ("checkpoint-3", "checkpoint-6"):
        for f in (run / name).iterdir():
            f.unlink()
        (run / name).rmdir()
    with pytest.raises(ResumeError, match=r"holds no checkpoint to resume, but an earlier training run \(best, final, train_summary.json\)"):
        train(recipe(tmp_path, *new, "train.resume_from_checkpoint=last"), target)
    # Asked to start over: the earlier run's outputs go, the user's file stays.
    summary = train(recipe(tmp_path, *new, "train.overwrite_output_dir=true"), target)
    assert summary.steps == 2
    assert sorted(p.name for p in run.iterdir()) == ["best", "checkpoint-1", "checkpoint-2", "final", "notes.txt", "train_summary.json"]
    assert (run / "notes.txt").read_text() == "the user's own file"
    assert json.loads((run / "final" / "config.json").read_text())["recipe"]["train"]["lr"] == 0.02


def test_a_torn_trainer_state_falls_back_to_the_previous_checkpoint(tmp_path, smol_shaped_target, capfd):  # noqa: F811
    target = smol_shaped_target
    run = tmp_path / "run"
    steps = ["train.max_steps=6", "train.save_steps=2", "train.save_total_limit=5"]
    train(recipe(tmp_path, *steps), target)
    final = load_file(run / "final" / "model.safetensors")
    state = run / "checkpoint-6" / "trainer_state.json"
    state.write_text(state.read_text()[:100])  # a kill during HF's plain (not renamed-into-place) write
    capfd.readouterr()
    resumed = train(recipe(tmp_path, *steps, "train.resume_from_checkpoint=last"), target)
    err = capfd.readouterr().err
    skipped = [line for line in err.splitlines() if "skipping" in line]
    assert len(skipped) == 1 and "checkpoint-6" in skipped[0] and "trainer_state.json is not valid JSON" in skipped[0]
    assert "resuming from checkpoint-4" in skipped[0]
    assert resumed.steps == 6
    again = load_file(run / "final" / "model.safetensors")
    for name in final:
        assert_close(again[name], final[name], f"resumed {name}")
    # With every checkpoint torn there is nothing to resume: an error naming the file.
    for folder in run.glob("checkpoint-*"):
        (folder / "trainer_state.json").write_text('{"global_step": ')
    with pytest.raises(ResumeError, match=r"no complete checkpoint: .*checkpoint-6/trainer_state.json is not valid JSON"):
        train(recipe(tmp_path, *steps, "train.resume_from_checkpoint=last"), target)
    with pytest.raises(ResumeError, match=r"cannot resume from .*checkpoint-4: .*checkpoint-4/trainer_state.json is not valid JSON"):
        train(recipe(tmp_path, *steps, f"train.resume_from_checkpoint={run / 'checkpoint-4'}"), target)

