"""vLLM's `speculators` CLI (0.9.0) on a machine without an accelerator: what scripts/bench_peers.py runs in
.venv-peers (`make peers`) as `python scripts/peers/speculators_cpu.py train ...`.

speculators' Trainer (speculators/train/trainer.py) places the draft and every batch on device index
LOCAL_RANK (`model.to(0)`), which on a CPU-only torch fails with "RuntimeError: Cannot access accelerator
device when none is available", autocasts with device type "cuda" when there is no accelerator, and
synchronizes the accelerator to time logged steps. Three runtime changes, made here and nowhere in
speculators' files, run it on the CPU unchanged otherwise: the device is "cpu", autocast's device type is
"cpu", and synchronizing is a no-op without an accelerator. Pass `--draft-attn-impl sdpa` and
`--loss-implementation eager` as well (its documented options for hardware without flex attention, and
without triton for the fused loss). Every other argument goes to speculators as given. docs/peers.md lists
every change; nothing else of speculators is touched.
"""

from __future__ import annotations

import torch


def run_on_cpu() -> None:
    """The three changes above; a no-op where torch has an accelerator (speculators runs as shipped)."""
    if torch.accelerator.is_available():
        return
    import speculators.train.trainer as trainer

    trainer.get_local_rank = lambda: "cpu"  # read once by Trainer.__init__: model.to / batch.to("cpu")
    torch.accelerator.synchronize = lambda *args, **kwargs: None
    init = trainer.Trainer.__init__

    def cpu_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.device_type = "cpu"  # torch.autocast("cpu", dtype=bf16) around the draft's forward

    trainer.Trainer.__init__ = cpu_init


if __name__ == "__main__":
    run_on_cpu()
    from speculators.cli import app

    app()
