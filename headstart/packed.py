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


class PreparedLinear(nn.Linear):
    """An nn.Linear whose no-grad CPU forwards multiply by a copy of its weight made once (`_prepare`)
    and made again before the next use when the weight changed in place (an adapter merged into it);
    with gradients, off the CPU or for an input the copy does not take, the stock product on the
    stored weight. The subclasses say how the copy is made and multiplied."""

    _copy: torch.Tensor | None = None
    _copy_version: int = -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        if torch.is_grad_enabled() or x.device.type != "cpu" or not self._takes(x):
            return super().forward(x)
        if self._copy_version != self.weight._version:
            self.refresh()
        shape = x.shape
        return self._product(x.reshape(-1, shape[-1])).reshape(*shape[:-1], self.out_features)

    def refresh(self) -> None:
        """Make the weight's copy from the stored weight."""
        with torch.no_grad():
            self._copy = self._prepare()
        self._copy_version = self.weight._version

    def drop(self) -> None:
        """Free the copy (before the module changes class)."""
        self.__dict__.pop("_copy", None)
        self.__dict__.pop("_copy_version", None)

    def _takes(self, x: torch.Tensor) -> bool:
        return True

    def _prepare(self) -> torch.Tensor:
        raise NotImplementedError

    def _product(self, rows: torch.Tensor) -> torch.Tensor:  # (rows, in) -> (rows, out)
        raise NotImplementedError


class PackedLinear(PreparedLinear):
    """An nn.Linear whose no-grad forwards read a oneDNN-reordered copy of its weight (made by `pack_linears`)."""

    def _takes(self, x: torch.Tensor) -> bool:
        return x.dtype == self.weight.dtype

    def _prepare(self) -> torch.Tensor:
        return torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), 1)

    def _product(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(rows, self._copy, self.bias, "none", [], "")


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
        m.refresh()
    return len(linears)


def is_packed(model: nn.Module) -> bool:
    """Whether `pack_linears` packed any Linear of `model`."""
    return any(type(m) is PackedLinear for m in model.modules())


def unpack_linears(model: nn.Module) -> int:
    """Undo `pack_linears` and `quantize_linears`: the modules become plain nn.Linear again and the packed
    or quantised copies are freed."""
    prepared = [m for m in model.modules() if isinstance(m, PreparedLinear)]
    for m in prepared:
        m.drop()
        m.__class__ = nn.Linear
    return len(prepared)


class Int8Linear(PreparedLinear):
    """An nn.Linear whose no-grad CPU forwards multiply in int8 (made by `quantize_linears`): fbgemm's
    dynamic quantisation, the weight per output row once, each call's input per tensor (in a reduced
    range, so that no instruction set saturates), the product back in the input's dtype. A draft
    head's products over a few rows read their weights more than they compute (the weights are read
    back from memory after each target forward): a quarter of float32's bytes, half of bf16's. Not
    lossless by itself; a draft is verified by the target, so the text does not change, only the
    draft's acceptance (measured in docs/results.md#int8-draft-heads)."""

    def _prepare(self) -> torch.Tensor:  # fbgemm's packed int8 weight
        w = self.weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp_min(1e-12).double()
        zero = torch.zeros(w.shape[0], dtype=torch.long)
        with warnings.catch_warnings():  # PyTorch 2.13 warns that quantised tensors will go (Makefile pins it)
            warnings.simplefilter("ignore", UserWarning)
            qw = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(qw, None if self.bias is None else self.bias.detach().float())

    def _product(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic(rows.float(), self._copy, True).to(rows.dtype)


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
        if isinstance(m, PreparedLinear):
            m.drop()  # a packed copy is not read any more
        m.__class__ = Int8Linear
        m.refresh()
    return len(linears)


def is_quantized(model: nn.Module) -> bool:
    """Whether `quantize_linears` quantised any Linear of `model`."""
    return any(type(m) is Int8Linear for m in model.modules())
