import json

import pytest

from headstart.jsonl import DataError, read_jsonl
from headstart.train.data import build_examples, split, tokenize_conversation


def test_assistant_mask_on_smollm2_template(smol_tokenizer):
    tok = smol_tokenizer
    messages = [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": "Apple."},
    ]
    ex = tokenize_conversation(tok, messages, max_length=512)
    masked = [t for t, m in zip(ex.input_ids, ex.loss_mask) if m]
    # Exactly the two answers, each followed by the end-of-turn token the model must learn to emit.
    expected = tok("Hello!<|im_end|>\n", add_special_tokens=False).input_ids + tok("Apple.<|im_end|>\n", add_special_tokens=False).input_ids
    assert masked == expected
    assert tok.decode(ex.input_ids).count("<|im_start|>assistant") == 2
    short = tokenize_conversation(tok, messages, max_length=10)
    assert short.truncated and len(short.input_ids) == 10


def test_malformed_jsonl_line_is_reported_with_its_number(tmp_path, smol_tokenizer):
    path = tmp_path / "c.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b c d e"}]})
    path.write_text(good + "\n" + good + "\n{not json\n")
    with pytest.raises(DataError, match=r"c.jsonl:3: not valid JSON"):
        list(read_jsonl(path))
    path.write_text(good + "\n" + json.dumps({"messages": [{"role": "robot", "content": "x"}]}) + "\n")
    with pytest.raises(DataError, match=r"c.jsonl:2: message 0 must be"):
        build_examples(smol_tokenizer, [str(path)], 128)
    path.write_text(json.dumps({"text": "no messages"}) + "\n")
    with pytest.raises(DataError, match=r"c.jsonl:1: a conversation row needs 'messages'"):
        build_examples(smol_tokenizer, [str(path)], 128)


def test_empty_dataset_is_a_clear_error(tmp_path, smol_tokenizer):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(DataError, match="the dataset is empty"):
        build_examples(smol_tokenizer, [str(path)], 128)
    with pytest.raises(DataError, match="train_files is empty"):
        build_examples(smol_tokenizer, [], 128)


def test_a_capped_heldout_split_is_said(tmp_path, smol_tokenizer, capsys):
    path = tmp_path / "c.jsonl"
    row = {"messages": [{"role": "user", "content": "count"}, {"role": "assistant", "content": "1 2 3 4 5"}]}
    path.write_text((json.dumps(row) + "\n") * 12)
    examples, _ = build_examples(smol_tokenizer, [str(path)], 64)
    train_ex, eval_ex = split(examples, 2, seed=0)
    assert (len(train_ex), len(eval_ex)) == (11, 1)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "data.eval_size=2: holding out 1 of the 12 examples instead" in lines[0]
    assert "at most a tenth" in lines[0]
    assert len(split(examples, 1, seed=0)[1]) == 1 and capsys.readouterr().err == ""  # no cap, nothing said
