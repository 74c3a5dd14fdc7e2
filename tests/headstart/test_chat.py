"""Chat prompts (headstart/chat.py): one encoding of a conversation for every part of headstart."""

import copy

import pytest
import torch

from headstart.chat import ChatTemplateError, encode_chat, render_chat
from headstart.errors import HeadstartError

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Name two fruits."},
]


def test_the_prompt_is_the_template_text_with_no_special_token_added_twice(smol_tokenizer):
    tok = smol_tokenizer
    text = render_chat(tok, MESSAGES)
    assert text == "<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nName two fruits.<|im_end|>\n<|im_start|>assistant\n"
    assert render_chat(tok, MESSAGES, add_generation_prompt=False) == text.removesuffix("<|im_start|>assistant\n")
    ids = encode_chat(tok, MESSAGES)
    assert ids.shape == (1, len(tok(text, add_special_tokens=False).input_ids)) and ids.dtype == torch.long
    assert tok.decode(ids[0]) == text
    assert ids[0, 0].item() == tok.convert_tokens_to_ids("<|im_start|>")  # the template's own first token only


def test_a_tokenizer_without_a_chat_template_is_refused_with_advice(smol_tokenizer):
    tok = copy.deepcopy(smol_tokenizer)
    tok.chat_template = None
    with pytest.raises(ChatTemplateError, match="no chat template.*instruction-tuned.*tokenizer.chat_template"):
        encode_chat(tok, MESSAGES)
    assert issubclass(ChatTemplateError, HeadstartError)
