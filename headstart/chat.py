"""Chat prompts: conversations rendered by the target's own chat template.

Every part encodes a prompt this one way (training data, distillation, self-instruct, evaluation,
the CLI, the benchmarks), so a prompt the head is trained on and one it is measured or served on
are the same tokens. The template writes the special tokens itself (BOS included), so the
tokenizer is asked to add none.
"""

from __future__ import annotations

import torch

from headstart.errors import HeadstartError


class ChatTemplateError(HeadstartError):
    """A tokenizer without a chat template: headstart's prompts are chat conversations."""


def render_chat(tokenizer, messages: list[dict], add_generation_prompt: bool = True) -> str:
    """`messages` ({"role", "content"} dicts) as text through the tokenizer's chat template, ending
    with the assistant's generation prompt unless `add_generation_prompt` is False."""
    if getattr(tokenizer, "chat_template", None) is None:
        name = getattr(tokenizer, "name_or_path", None) or "the target"
        raise ChatTemplateError(
            f"the tokenizer of {name} has no chat template, and headstart's prompts are chat conversations: "
            f"use an instruction-tuned (chat) model, or set tokenizer.chat_template"
        )
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def encode_chat(tokenizer, messages: list[dict]) -> torch.Tensor:
    """(1, T) token ids of `messages` ending with the generation prompt: what the model answers from."""
    return torch.tensor([tokenizer(render_chat(tokenizer, messages), add_special_tokens=False).input_ids])
