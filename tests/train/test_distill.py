import json

import pytest

from headstart.config import DistillConfig
from headstart.jsonl import DataError
from headstart.train.distill import distill
from tests.helpers import write_prompts


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
    (tmp_path / "part.distill.json").write_text((tmp_path / "full.distill.json").read_text())  # written at its start
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


def write_multi_turn(path):
    """Single-turn prompts, ShareGPT conversations (their answers get regenerated), a system prompt."""
    rows = []
    for i in range(7):
        if i % 3 == 0:
            rows.append({"id": f"s{i}", "prompt": f"say {i} things " + "word " * (i % 4)})
        elif i % 3 == 1:
            rows.append({"id": f"m{i}", "conversations": [
                {"from": "human", "value": f"first question {i}"}, {"from": "gpt", "value": "an old answer"},
                {"from": "human", "value": "and then?" + " more" * i}, {"from": "gpt", "value": "old again"},
                {"from": "human", "value": "last one"},
            ]})
        else:
            rows.append({"id": f"y{i}", "messages": [
                {"role": "system", "content": "Be terse."}, {"role": "user", "content": f"hello {i}"},
                {"role": "assistant", "content": "old"}, {"role": "user", "content": "word " * 480},  # won't fit
            ]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


class Recorder:
    """A real generation backend (HF generate on the target) that records its prompts, and can fail."""

    def __init__(self, target, fail_after=None):
        from headstart.train.distill import hf_backend

        self.run, self.prompts, self.fail_after = hf_backend(target), [], fail_after

    def __call__(self, prompts, *args):
        if self.fail_after is not None and len(self.prompts) >= self.fail_after:
            raise RuntimeError("killed")
        self.prompts.append(prompts)
        return self.run(prompts, *args)


def test_multi_turn_distillation_answers_each_turn_in_its_own_context(tmp_path, smol_shaped_target):
    target, tok = smol_shaped_target, smol_shaped_target.tokenizer
    write_multi_turn(tmp_path / "p.jsonl")
    cfg = DistillConfig(prompts=str(tmp_path / "p.jsonl"), output=str(tmp_path / "full.jsonl"), batch_size=3,
                        max_new_tokens=5, sort_window=4)
    rec = Recorder(target)
    stats = distill(target, cfg, progress=False, generate=rec)
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "full.jsonl").read_text().splitlines())}
    assert len(rows) == 7 and stats["new_turns"] == 3 * 1 + 2 * 3 + 2 * 1
    m = rows["m1"]["messages"]
    assert [x["role"] for x in m] == ["user", "assistant"] * 3
    assert "old" not in m[1]["content"] + m[3]["content"]  # the dataset's answers were replaced
    assert len(rows["m1"]["turn_finish"]) == 3 and rows["m1"]["answer_tokens"] > 0
    # Turn 2 was generated after the target's own first answer.
    want = tok(tok.apply_chat_template(m[:3], tokenize=False, add_generation_prompt=True), add_special_tokens=False).input_ids
    assert any(want in batch for batch in rec.prompts)
    # The long second turn of the y-rows did not fit the context: cut, counted, marked.
    assert stats["turns_cut_by_context"] == 2 and rows["y2"]["finish"] == "context"
    assert [x["role"] for x in rows["y2"]["messages"]] == ["system", "user", "assistant"]
    assert rows["s0"]["source"].endswith("p.jsonl:1")

    # Killed inside the second batch (an exception from the backend), then resumed.
    cfg.output = str(tmp_path / "part.jsonl")
    with pytest.raises(RuntimeError, match="killed"):
        distill(target, cfg, progress=False, generate=Recorder(target, fail_after=4))
    assert 0 < len((tmp_path / "part.jsonl").read_text().splitlines()) < 7
    distill(target, cfg, progress=False, max_batches=1)  # stopped on purpose after one more batch
    stats = distill(target, cfg, progress=False)
    assert stats["skipped_batches"] >= 2
    assert (tmp_path / "part.jsonl").read_text() == (tmp_path / "full.jsonl").read_text()


def test_sharded_output_resumes_to_the_same_shards(tmp_path, smol_shaped_target):
    write_prompts(tmp_path / "p.jsonl", 8)
    cfg = DistillConfig(prompts=str(tmp_path / "p.jsonl"), output=str(tmp_path / "a" / "out.jsonl"), batch_size=2,
                        max_new_tokens=3, shard_size=3)
    stats = distill(smol_shaped_target, cfg, progress=False)
    full = [p.read_text() for p in sorted((tmp_path / "a").glob("out-*.jsonl"))]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["out-00000.jsonl", "out-00001.jsonl", "out.distill.json"]
    assert [p.rsplit("/", 1)[-1] for p in stats["output"]] == ["out-00000.jsonl", "out-00001.jsonl"]
    assert [len(t.splitlines()) for t in full] == [4, 4]  # whole batches, at least shard_size rows
    cfg.output = str(tmp_path / "b" / "out.jsonl")
    distill(smol_shaped_target, cfg, progress=False, max_batches=3)
    shard = tmp_path / "b" / "out-00001.jsonl"
    shard.write_text(shard.read_text()[:-9])  # a torn last line: its batch's first row is whole, the second not
    distill(smol_shaped_target, cfg, progress=False)
    assert [p.read_text() for p in sorted((tmp_path / "b").glob("out-*.jsonl"))] == full
