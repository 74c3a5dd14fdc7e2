"""oneDNN-packed Linear weights for decoding on CPU: the same model, its matrix products faster.

PyTorch's `F.linear` on CPU hands the weight to the BLAS in its stored layout at every call. oneDNN
can reorder a weight once into the blocked layout its kernels read (what vLLM's CPU build and
Inductor's freezing do); a decode step then reads the reordered copy instead of handing the stored
layout to the BLAS at every call (measured in docs/results.md#packed-weights).

Only forwards without gradients take the packed path (decoding, distillation, feature extraction);
a forward that records gradients (Medusa-2's LoRA training) runs the stock `F.linear` on the stored
weight. A weight changed in place after packing (an adapter merged into it) is packed again before
its next use. The stored weights and the state dict are untouched; the packed copies cost as much
memory again as the Linear weights (the lm_head's included), which is why `target.pack_linears`
can turn it off.
"""

from __future__ import annotations

import torch
from torch import nn


class PackedLinear(nn.Linear):
    """An nn.Linear whose no-grad forwards read a oneDNN-reordered copy of its weight (made by `pack`)."""

    _packed: torch.Tensor | None = None
    _packed_version: int = -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        if torch.is_grad_enabled() or x.dtype != self.weight.dtype or x.device.type != "cpu":
            return super().forward(x)
        if self._packed_version != self.weight._version:  # changed in place since it was packed
            self._pack()
        shape = x.shape
        y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, shape[-1]), self._packed, self.bias, "none", [], "")
        return y.reshape(*shape[:-1], self.out_features)

    def _pack(self) -> None:
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), 1)
        self._packed_version = self.weight._version


def can_pack(model: nn.Module) -> bool:
    """oneDNN is built in, every weight is on the CPU in float32 or bfloat16 (not partitioned by ZeRO-3),
    and, for bfloat16, oneDNN has bf16 kernels for this CPU."""
    params = list(model.parameters())
    dtypes = {p.dtype for p in params}
    return (
        torch.backends.mkldnn.is_available()
        and bool(params)
        and dtypes <= {torch.float32, torch.bfloat16}
        and all(p.device.type == "cpu" and p.numel() > 0 for p in params)
        and (torch.bfloat16 not in dtypes or torch.ops.mkldnn._is_mkldnn_bf16_supported())
    )


def pack_linears(model: nn.Module) -> int:
    """Turn every plain nn.Linear of `model` into a PackedLinear in place; returns how many (0 where
    `can_pack` says no). Subclasses of nn.Linear (quantised or adapter layers) are left as they are."""
    if not can_pack(model):
        return 0
    linears = [m for m in model.modules() if type(m) is nn.Linear]
    for m in linears:
        m.__class__ = PackedLinear
        m._pack()
    return len(linears)


def is_packed(model: nn.Module) -> bool:
    """Whether `pack_linears` packed any Linear of `model`."""
    return any(type(m) is PackedLinear for m in model.modules())


def unpack_linears(model: nn.Module) -> int:
    """Undo `pack_linears`: the modules become plain nn.Linear again and the packed copies are freed."""
    packed = [m for m in model.modules() if type(m) is PackedLinear]
    for m in packed:
        del m._packed, m._packed_version
        m.__class__ = nn.Linear
    return len(packed)
