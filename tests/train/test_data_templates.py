"""Exact assistant-only masks on three chat templates, multi-turn with a system prompt.

The expected masks are built by hand from each template's known layout (segments tokenised one
by one), independently of the prefix-rendering algorithm of train/data.py that is under test.
"""

import copy

import pytest

from headstart.jsonl import DataError
from headstart.train.data import build_examples, tokenize_conversation

# Templates written for these tests in the style of the families they stand for.
CHATML_QWEN = (
    "{%- if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA3 = (
    "{{- '<|begin_of_text|>' }}"
    "{%- for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
LLAMA3_TOKENS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
# A reasoning-model template: earlier answers lose their <think> part (as Qwen3's and DeepSeek-R1's do).
REASONING = (
    "{%- for m in messages %}{%- set c = m['content'] %}"
    "{%- if m['role'] == 'assistant' and not loop.last %}{%- set c = c.split('</think>')[-1] | trim %}{%- endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + c + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
STRICT = (
    "{%- for m in messages %}{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant') }}{%- endif %}"
    "{{ m['role'] + ': ' + m['content'] + '\\n' }}{%- endfor %}"
)

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Name two fruits."},
    {"role": "assistant", "content": "Apple and pear."},
]


def with_template(tokenizer, template, special=()):
    tok = copy.deepcopy(tokenizer)
    if special:
        tok.add_special_tokens({"additional_special_tokens": list(special)})
    tok.chat_template = template
    return tok


def chatml_segments(messages):
    out = []
    for m in messages:
        head = f"<|im_start|>{m['role']}\n"
        if m["role"] == "assistant":  # the answer and the end-of-turn it must learn to emit
            out += [(head, 0), (m["content"] + "<|im_end|>\n", 1)]
        else:
            out.append((head + m["content"] + "<|im_end|>\n", 0))
    return out


def llama3_segments(messages):
    # SmolLM2's pre-tokenizer splits "\n\n" before a word into two "\n" tokens (alone it is one
    # token): the generation prompt's tokens are not a prefix of the conversation's, the text is.
    out = [("<|begin_of_text|>", 0)]
    for m in messages:
        head = [(f"<|start_header_id|>{m['role']}<|end_header_id|>", 0), ("\n", 0), ("\n", 0)]
        if m["role"] == "assistant":
            out += head + [(m["content"] + "<|eot_id|>", 1)]
        else:
            out += head + [(m["content"] + "<|eot_id|>", 0)]
    return out


def expected(tok, segments):
    ids, mask = [], []
    for text, on in segments:
        piece = tok(text, add_special_tokens=False).input_ids
        ids += piece
        mask += [on] * len(piece)
    return ids, mask


@pytest.mark.parametrize("kind", ["smollm2", "chatml", "llama3"])
def test_exact_masks_multi_turn_with_system(smol_tokenizer, kind):
    if kind == "smollm2":
        tok, segments = smol_tokenizer, chatml_segments(MESSAGES)  # SmolLM2's own template is ChatML
    elif kind == "chatml":
        tok, segments = with_template(smol_tokenizer, CHATML_QWEN), chatml_segments(MESSAGES)
    else:
        tok, segments = with_template(smol_tokenizer, LLAMA3, LLAMA3_TOKENS), llama3_segments(MESSAGES)
    ids, mask = expected(tok, segments)
    assert tok.decode(ids) == tok.apply_chat_template(MESSAGES, tokenize=False)
    ex = tokenize_conversation(tok, MESSAGES, max_length=512)
    assert ex.input_ids == ids
    assert ex.loss_mask == mask
    masked = tok.decode([t for t, m in zip(ex.input_ids, ex.loss_mask) if m])
    end = "<|eot_id|>" if kind == "llama3" else "<|im_end|>\n"
    assert masked == f"Hello! How can I help?{end}Apple and pear.{end}"


def test_smollm2_default_system_prompt_is_not_learned(smol_tokenizer):
    ex = tokenize_conversation(smol_tokenizer, MESSAGES[1:3], max_length=512)
    text = smol_tokenizer.decode(ex.input_ids)
    assert "You are a helpful AI assistant named SmolLM" in text  # added by the template
    assert smol_tokenizer.decode([t for t, m in zip(ex.input_ids, ex.loss_mask) if m]) == "Hello! How can I help?<|im_end|>\n"


def test_templates_that_rewrite_earlier_turns_are_refused(tmp_path, smol_tokenizer):
    tok = with_template(smol_tokenizer, REASONING)
    thinking = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>two and two</think>4"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "<think>three and three</think>6"},
    ]
    with pytest.raises(DataError, match=r"row 7: the chat template does not render assistant turn 1 .* strip <think>"):
        tokenize_conversation(tok, thinking, 512, where="row 7")
    # Single-turn rows, or answers without the stripped part, are fine with the same template.
    ex = tokenize_conversation(tok, thinking[:2], 512)
    assert tok.decode([t for t, m in zip(ex.input_ids, ex.loss_mask) if m]) == "<think>two and two</think>4<|im_end|>\n"


def test_template_errors_name_the_row_or_are_counted(tmp_path, smol_tokenizer):
    import json

    tok = with_template(smol_tokenizer, STRICT)
    path = tmp_path / "c.jsonl"
    good = {"messages": [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "c d e f"}]}
    bad = {"messages": [{"role": "assistant", "content": "hello there you"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"c.jsonl:2: the chat template refused the conversation: Conversation roles must alternate"):
        build_examples(tok, [str(path)], 64)
    examples, stats = build_examples(tok, [str(path)], 64, on_error="skip")
    assert len(examples) == 1 and stats["template_errors"] == 1 and "c.jsonl:2" in stats["skip_reasons"][0]
