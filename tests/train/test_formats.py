"""Every input format reads to the same conversation, token ids and mask; bad rows are named."""

import gzip
import json

import datasets
import pytest

from headstart.jsonl import DataError
from headstart.train.data import build_examples
from headstart.train.formats import read_conversations

SYSTEM = "Be brief."
TURNS = ["Hi there", "Hello! How can I help?", "Name two fruits.", "Apple and pear."]


def openai_row(i, system=True):
    msgs = [{"role": "system", "content": SYSTEM}] if system else []
    msgs += [{"role": ("user", "assistant")[k % 2], "content": t} for k, t in enumerate(TURNS)]
    return {"id": f"c{i}", "messages": msgs}


def sharegpt_row(i, system=True):
    conv = [{"from": "system", "value": SYSTEM}] if system else []
    conv += [{"from": ("human", "gpt")[k % 2], "value": t} for k, t in enumerate(TURNS)]
    return {"id": f"c{i}", "conversations": conv}


def write_jsonl(path, rows):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


def test_every_format_gives_the_same_tokens_and_mask(tmp_path, smol_tokenizer):
    n = 3
    sources = {
        "openai.jsonl": write_jsonl(tmp_path / "openai.jsonl", [openai_row(i) for i in range(n)]),
        "openai.jsonl.gz": write_jsonl(tmp_path / "openai.jsonl.gz", [openai_row(i) for i in range(n)]),
        "sharegpt.json": str(tmp_path / "sharegpt.json"),
        "sharegpt top-level system": write_jsonl(
            tmp_path / "sg.jsonl", [{**sharegpt_row(i, system=False), "system": SYSTEM} for i in range(n)]
        ),
        "save_to_disk": str(tmp_path / "saved"),
        "parquet": str(tmp_path / "rows.parquet"),
        "load_dataset folder + columns": str(tmp_path / "hub_like"),
    }
    (tmp_path / "sharegpt.json").write_text(json.dumps([sharegpt_row(i) for i in range(n)]))
    datasets.Dataset.from_list([openai_row(i) for i in range(n)]).save_to_disk(tmp_path / "saved")
    datasets.Dataset.from_list([sharegpt_row(i) for i in range(n)]).to_parquet(tmp_path / "rows.parquet")
    (tmp_path / "hub_like").mkdir()
    write_jsonl(tmp_path / "hub_like" / "train.jsonl",
                [{"uid": f"c{i}", "dialog": sharegpt_row(i)["conversations"]} for i in range(n)])
    reference = None
    for name, source in sources.items():
        columns = {"dialog": "conversations", "uid": "id"} if "columns" in name else None
        convs, _ = read_conversations([source], columns=columns)
        assert [c.id for c in convs] == ["c0", "c1", "c2"], name
        examples, stats = build_examples(smol_tokenizer, [source], 256, columns=columns)
        got = [(e.input_ids, e.loss_mask) for e in examples]
        reference = reference or got
        assert got == reference, name
        assert stats["rows_read"] == n and stats["examples"] == n and stats["rows_skipped_malformed"] == 0
    # UltraChat's `data` (alternating strings, no system) equals the same conversation without one.
    ultra = write_jsonl(tmp_path / "ultra.jsonl", [{"id": "u", "data": TURNS}])
    plain = write_jsonl(tmp_path / "plain.jsonl", [openai_row(0, system=False)])
    a, b = (build_examples(smol_tokenizer, [p], 256)[0][0] for p in (ultra, plain))
    assert (a.input_ids, a.loss_mask) == (b.input_ids, b.loss_mask)
    assert sum(a.loss_mask) < len(a.input_ids)
    # Globs (sharded outputs) read every shard in order.
    convs, _ = read_conversations([str(tmp_path / "openai.jsonl*")])
    assert len(convs) == 2 * n


def test_malformed_rows_are_named_or_skipped_and_counted(tmp_path, smol_tokenizer):
    good = openai_row(0)
    rows = [good, {"conversations": [{"from": "robot", "value": "x"}]}, good, {"data": ["a", 3]}, {"text": "?"}]
    jsonl = write_jsonl(tmp_path / "bad.jsonl", rows)
    with open(jsonl, "a") as f:
        f.write("{oops\n")
    (tmp_path / "bad.json").write_text(json.dumps(rows))
    datasets.Dataset.from_list([{"prompt": "fine"}, {"prompt": None}]).save_to_disk(tmp_path / "ds")

    with pytest.raises(DataError, match=r"bad.jsonl:2: turn 0 must be \{'from': one of"):
        build_examples(smol_tokenizer, [jsonl], 128)
    with pytest.raises(DataError, match=r"bad.json\[1\]: turn 0 must be"):
        build_examples(smol_tokenizer, [str(tmp_path / "bad.json")], 128)
    with pytest.raises(DataError, match=r"ds\[train\]\[1\]: a conversation row needs"):
        read_conversations([str(tmp_path / "ds")])
    with pytest.raises(DataError, match=r"nothing.jsonl: no such file"):
        read_conversations([str(tmp_path / "nothing.jsonl")])

    examples, stats = build_examples(smol_tokenizer, [jsonl], 128, on_error="skip")
    assert len(examples) == 2 and stats["rows_read"] == 6 and stats["rows_skipped_malformed"] == 4
    assert [r.split(": ")[0].rsplit("/", 1)[-1] for r in stats["skip_reasons"]] == [
        "bad.jsonl:2", "bad.jsonl:4", "bad.jsonl:5", "bad.jsonl:6"]
    assert "'data' must be a list of strings" in stats["skip_reasons"][1]
    assert "not valid JSON" in stats["skip_reasons"][3]
    convs, read = read_conversations([str(tmp_path / "ds")], on_error="skip")
    assert len(convs) == 1 and read.skipped == 1


def test_drops_are_counted(tmp_path, smol_tokenizer):
    rows = [openai_row(0), {"messages": [{"role": "user", "content": "only a question"}]},
            {"messages": [{"role": "user", "content": "word " * 50}, {"role": "assistant", "content": "fine"}]}]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    examples, stats = build_examples(smol_tokenizer, [path], 40, on_error="skip")
    assert stats["no_assistant_turn"] == 1
    assert stats["no_loss_tokens"] == 1  # the answer lies beyond max_length: nothing left to learn
    assert stats["truncated"] == 2 and stats["truncated_tokens"] > 0
    assert stats["examples"] == len(examples) == 1
    assert stats["rows_read"] == stats["examples"] + stats["no_assistant_turn"] + stats["no_loss_tokens"]


def test_the_shipped_corpus_still_loads(smol_tokenizer):
    examples, stats = build_examples(smol_tokenizer, ["data/distilled/smollm2-135m.jsonl.gz"], 384, limit=64)
    assert stats["rows_read"] == 6144 and stats["rows_skipped_malformed"] == 0
    assert stats["unused_beyond_limit"] == 6144 - 64 and len(examples) == 64
