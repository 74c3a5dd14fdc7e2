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

A draft head's Linears can multiply in int8 instead (`Int8Linear`, `quantize_linears`;
`decode.draft_int8`): its products over a few rows read weights that the target's forward pushed
out of the cache, so halving the bytes read halves most of their time; the target stays as it is.
"""

from __future__ import annotations

import warnings

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
    """Undo `pack_linears` and `quantize_linears`: the modules become plain nn.Linear again and the packed
    or quantised copies are freed."""
    packed = [m for m in model.modules() if type(m) in (PackedLinear, Int8Linear)]
    for m in packed:
        for name in ("_packed", "_packed_version", "_q", "_q_version"):
            m.__dict__.pop(name, None)
        m.__class__ = nn.Linear
    return len(packed)


class Int8Linear(nn.Linear):
    """An nn.Linear whose no-grad CPU forwards multiply in int8 (made by `quantize_linears`): fbgemm's
    dynamic quantisation, the weight per output row once, each call's input per tensor (in a reduced
    range, so that no instruction set saturates), the product back in the input's dtype. A draft
    head's products over a few rows read their weights more than they compute (the weights are read
    back from memory after each target forward): a quarter of float32's bytes, half of bf16's. Not
    lossless by itself; a draft is verified by the target, so the text does not change, only the
    draft's acceptance (measured in docs/results.md#int8-draft-heads)."""

    _q: torch.Tensor | None = None  # fbgemm's packed int8 weight
    _q_version: int = -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        if torch.is_grad_enabled() or x.device.type != "cpu":
            return super().forward(x)
        if self._q_version != self.weight._version:  # changed in place since it was quantised
            self._quantize()
        shape = x.shape
        y = torch.ops.quantized.linear_dynamic(x.reshape(-1, shape[-1]).float(), self._q, True)
        return y.to(x.dtype).reshape(*shape[:-1], self.out_features)

    def _quantize(self) -> None:
        with torch.no_grad():
            w = self.weight.detach().float()
            scale = (w.abs().amax(dim=1) / 127).clamp_min(1e-12).double()
            zero = torch.zeros(w.shape[0], dtype=torch.long)
            with warnings.catch_warnings():  # PyTorch 2.13 warns that quantised tensors will go (Makefile pins it)
                warnings.simplefilter("ignore", UserWarning)
                qw = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
            bias = None if self.bias is None else self.bias.detach().float()
            self._q = torch.ops.quantized.linear_prepack(qw, bias)
        self._q_version = self.weight._version


def can_quantize(model: nn.Module) -> bool:
    """PyTorch's CPU quantised kernels for this CPU (fbgemm: x86 with AVX2 or later) and every weight on
    the CPU in a float dtype."""
    params = list(model.parameters())
    return (
        bool({"fbgemm", "x86"} & set(torch.backends.quantized.supported_engines))
        and bool(params)
        and all(p.device.type == "cpu" and p.is_floating_point() and p.numel() > 0 for p in params)
    )


def quantize_linears(model: nn.Module, skip: tuple[str, ...] = ()) -> int:
    """Turn every plain or packed nn.Linear of `model` into an Int8Linear in place, but those whose
    attribute name is in `skip`; returns how many (0 where `can_quantize` says no). The stored weights
    and the state dict are untouched."""
    if not can_quantize(model):
        return 0
    linears = [m for name, m in model.named_modules() if type(m) in (nn.Linear, PackedLinear) and name.rsplit(".", 1)[-1] not in skip]
    for m in linears:
        m.__dict__.pop("_packed", None)  # a packed copy is not read any more
        m.__dict__.pop("_packed_version", None)
        m.__class__ = Int8Linear
        m._quantize()
    return len(linears)


def is_quantized(model: nn.Module) -> bool:
    """Whether `quantize_linears` quantised any Linear of `model`."""
    return any(type(m) is Int8Linear for m in model.modules())
