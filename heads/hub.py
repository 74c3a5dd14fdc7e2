"""Publishing a head on the Hugging Face Hub: exactly the head's files and a generated model card.

    push_to_hub("runs/llama-medusa/final", "me/llama-3.1-8b-medusa")          # our layout
    push_to_hub("runs/llama-medusa/vllm", "me/llama-3.1-8b-medusa-vllm")      # an exported layout

The card (README.md) names the target, the head's kind and options, the data, the training budget,
the held-out accuracy and the last evaluation, as far as the head's config.json records them, and
says that the target's weights are not in the repository. Only the layout's config.json and
weights file go up (one commit, through `HfApi.create_commit`); optimizer states, trainer files
and anything else in the folder stay home. A weights file that does not match the checksum its
config.json records is refused before anything is created.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from headstart.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from headstart.decode.corpus import FILE_NAME as CORPUS_FILE
from headstart.errors import HeadstartError
from headstart.heads.checkpoint import CHECKSUMS, CONFIG_NAME, WEIGHTS_NAME, hub_offline, verify_checksum
from headstart.heads.reading import read_json

CARD_NAME = "README.md"
#: the files a head folder may publish, per layout (the weights file is the only large one)
HEAD_FILES = (
    CONFIG_NAME, WEIGHTS_NAME, "medusa_lm_head.safetensors",
    ADAPTER_CONFIG, ADAPTER_WEIGHTS,  # Medusa-2: the LoRA adapter trained with the heads
    CORPUS_FILE,  # the training answers' n-gram table, for hybrid trees' corpus trees
)


class HubError(HeadstartError):
    """An upload that cannot start (offline mode, no head files)."""


def head_files(folder: Path) -> list[Path]:
    """The files of a head folder that belong on the Hub (config.json and its weights file)."""
    files = [folder / name for name in HEAD_FILES if (folder / name).is_file()]
    if not (folder / CONFIG_NAME).is_file() or len(files) < 2:
        raise HubError(
            f"{folder} is not a head folder: it needs {CONFIG_NAME} and one of "
            f"{', '.join(HEAD_FILES[1:])} (write one with save_pretrained or `headstart export`)"
        )
    return files


def push_to_hub(
    folder_or_heads,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    card_extra: str | None = None,
    target=None,
    commit_message: str = "Upload draft head with headstart",
) -> str:
    """Create `repo_id` (if needed) and upload the head's files plus a model card in one commit.

    `folder_or_heads` is a head folder in any layout, or a head module (saved first in headstart's
    layout; `target` then supplies the target description). `card_extra` is Markdown appended to
    the card. Returns the commit URL. Offline (HF_HUB_OFFLINE=1), fails before anything is created.
    """
    if hub_offline():
        raise HubError(
            f"cannot push to {repo_id}: the Hugging Face Hub is in offline mode (HF_HUB_OFFLINE is set). "
            f"Unset HF_HUB_OFFLINE to upload; the head folder itself is complete and can be copied."
        )
    if not isinstance(folder_or_heads, (str, Path)):
        with tempfile.TemporaryDirectory(prefix="headstart-push-") as tmp:
            folder = folder_or_heads.save_pretrained(Path(tmp) / "head", target)
            return push_to_hub(folder, repo_id, private, revision, token, card_extra, commit_message=commit_message)
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(folder_or_heads)
    files = head_files(folder)
    config = read_json(folder / CONFIG_NAME)
    for name in config.get(CHECKSUMS) or {}:  # never publish a corrupt head
        verify_checksum(folder, config, name)
    card = model_card(config, repo_id, [f.name for f in files], card_extra)
    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True, token=token)
    if revision is not None:
        api.create_branch(repo_id, branch=revision, exist_ok=True, token=token)
    operations = [CommitOperationAdd(path_in_repo=f.name, path_or_fileobj=str(f)) for f in files]
    operations.append(CommitOperationAdd(path_in_repo=CARD_NAME, path_or_fileobj=card.encode()))
    info = api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision, token=token)
    return getattr(info, "commit_url", str(info))


# ---------------------------------------------------------------------------------------------
# the model card


def _ours(config: dict) -> tuple[dict, str]:
    """(headstart config, layout name) of any exported config.json."""
    if "format_version" in config and "kind" in config:
        return config, "headstart"
    if "speculators_model_type" in config:
        layout = "speculators"
    elif any("Eagle3" in a for a in config.get("architectures") or []):
        layout = "eagle3"
    else:
        layout = "vllm-medusa" if config.get("model_type") == "medusa" else "medusa"
    return config.get("headstart") or {}, layout


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def model_card(config: dict, repo_id: str, files: list[str], card_extra: str | None = None) -> str:
    """README.md for a head repo, from its config.json (any layout headstart writes)."""
    from huggingface_hub import ModelCardData

    ours, layout = _ours(config)
    target = ours.get("target") or {"name_or_path": config.get("base_model_name_or_path")}
    target_name = target.get("name_or_path") or "unknown"
    kind = ours.get("kind", "medusa")
    head = ours.get("head") or {}
    options = {k: v for k, v in head.items() if k not in ("accuracy", "tree")}
    base_model = target_name if target_name.count("/") == 1 and not Path(target_name).exists() else None
    data = ModelCardData(
        base_model=base_model, library_name="headstart", tags=["speculative-decoding", kind, "draft-head", "headstart"]
    )
    lines = [
        "---",
        data.to_yaml(),
        "---",
        "",
        f"# {repo_id.split('/')[-1]}",
        "",
        f"A **{kind}** draft head for speculative decoding of **{target_name}**"
        + (f" (revision {target['revision']})" if target.get("revision") else "")
        + ", trained with headstart. The head proposes tokens; the "
        "target verifies them, so the output is the target's own.",
        "",
        "**The target's weights are not included.** Load the target from its own repository"
        + (
            "; this layout does include a copy of the target's lm_head rows for the head's vocabulary, "
            "which vLLM needs to run the head (the target's license applies to them)."
            if layout == "vllm-medusa" and head.get("shared_lm_head")
            else "."
        ),
        "",
        f"Layout: `{layout}`. Files: {', '.join(f'`{f}`' for f in files)}.",
        "",
        *_adapter_text(ours),
        "## Head",
        "",
        *_table(["option", "value"], [[k, json.dumps(v)] for k, v in sorted(options.items())]),
        "",
        f"Target: hidden size {target.get('hidden_size', config.get('hidden_size'))}, vocabulary "
        f"{target.get('vocab_size', config.get('vocab_size'))}, max_position_embeddings "
        f"{target.get('max_position_embeddings', config.get('max_position_embeddings'))}.",
        "",
        *_usage(layout, repo_id, target_name, head),
    ]
    lines += _training(ours)
    if ours.get("eval"):
        lines += ["## Last evaluation", "", _eval_text(ours["eval"]), ""]
    if card_extra:
        lines += [card_extra.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def _adapter_text(ours: dict) -> list[str]:
    if not ours.get("adapter"):
        return []
    a = ours["adapter"]
    return [
        f"**Medusa-2: the heads were trained jointly with a LoRA adapter on the target** (rank {a.get('r')}, "
        f"alpha {a.get('lora_alpha')}; `{a.get('config')}`, `{a.get('weights')}`, PEFT's format). The model that "
        "verifies the drafts, and whose output speculative decoding reproduces, is the **adapted** target, not "
        "the base model: headstart puts the adapter on the target when it loads the head. For serving, merge it "
        "into the target (`headstart export --head HEAD --merged-target DIR`) and serve the merged model with the head.",
        "",
    ]


def _usage(layout: str, repo_id: str, target_name: str, head: dict) -> list[str]:
    if layout == "vllm-medusa":
        spec = json.dumps({"method": "medusa", "model": repo_id, "num_speculative_tokens": head.get("num_heads", 3)})
        return ["## Use", "", "```bash", f"vllm serve {target_name} --speculative-config '{spec}'", "```", ""]
    if layout in ("eagle3", "speculators"):
        spec = json.dumps({"method": "eagle3", "model": repo_id, "num_speculative_tokens": 3})
        lines = ["## Use", "", "```bash", "# vLLM", f"vllm serve {target_name} --speculative-config '{spec}'"]
        if layout == "eagle3":
            lines += [
                "# SGLang",
                f"python -m sglang.launch_server --model {target_name} --speculative-algorithm EAGLE3 \\",
                f"    --speculative-draft-model-path {repo_id} --speculative-num-steps 3 --speculative-eagle-topk 1 \\",
                "    --speculative-num-draft-tokens 4",
            ]
        return [*lines, "```", ""]
    if layout == "headstart":
        return [
            "## Use",
            "",
            "```python",
            "import headstart as hs",
            f'target = hs.Target.from_pretrained("{target_name}")',
            f'head = hs.load_heads("{repo_id}", target=target)',
            "out = hs.SpeculativeGenerator(target, head).generate(input_ids, max_new_tokens=256)",
            "```",
            "",
        ]
    return []


def _training(ours: dict) -> list[str]:
    training, recipe = ours.get("training") or {}, ours.get("recipe") or {}
    if not training and not recipe:
        return []
    lines = ["## Training", ""]
    data = training.get("data") or {}
    files = (recipe.get("data") or {}).get("train_files")
    if files or data:
        lines.append(
            f"- Data: {', '.join(files) if files else 'see recipe'}; {training.get('train_examples', '?')} training and "
            f"{training.get('heldout_examples', '?')} held-out conversations"
            + (f" ({', '.join(f'{k} {v}' for k, v in data.items() if not isinstance(v, (dict, list)))})" if data else "")
        )
    train = recipe.get("train") or {}
    if training:
        lines.append(
            f"- Budget: {training.get('steps')} optimizer steps in {training.get('train_seconds')} s; "
            f"final training loss {training.get('train_loss')}"
        )
    if train:
        batch = train.get("batch_size")
        lines.append(
            f"- Optimizer: AdamW, lr {train.get('lr')}, {train.get('scheduler')} schedule, batch {batch} x grad_accum "
            f"{train.get('grad_accum')} per device, bf16 {train.get('bf16')}, DeepSpeed {train.get('deepspeed') or 'off'}"
        )
    heldout = training.get("heldout") or {}
    if heldout.get("top1"):
        rows = [[d + 1, heldout["top1"][d], (heldout.get("top5") or ["?"] * (d + 1))[d]] for d in range(len(heldout["top1"]))]
        lines += ["", "Held-out accuracy per depth (assistant tokens):", "", *_table(["depth", "top-1", "top-5"], rows)]
        if "sim_accept_length" in heldout:
            lines += ["", f"Simulated chain acceptance length (bonus token counted): {heldout['sim_accept_length']}"]
    return lines + [""]


def _eval_text(report) -> str:
    if isinstance(report, str):
        return report
    if isinstance(report, dict) and isinstance(report.get("markdown"), str):
        return report["markdown"]
    return "```json\n" + json.dumps(report, indent=2) + "\n```"
