"""The EAGLE-3 draft layer's forward while drafting, in fewer operations.

A draft layer is one Llama decoder layer of the target's width. On a CPU its drafting forward over
a few tokens is made of per-operation overhead, not arithmetic: transformers' layer runs three
products for q, k and v, two for the MLP's gate and up, six operations per RMSNorm, a rotary
embedding that concatenates halves, and a cache that concatenates its keys at every call. Here
the same arithmetic runs in fewer operations, for forwards without gradients only (training keeps
the module's own path):

- q, k and v in one product, gate and up in one (weights concatenated once, packed for oneDNN or
  quantised to int8 when the head's are, rebuilt when a weight changes);
- q and k rotated together, cos and sin read from a table by position (`RotaryTable`);
- RMSNorm's arithmetic without a module call; the masks as bool, handed to SDPA as they are;
- the keys and values in `DraftKV`, buffers grown by doubling, so that appending is a copy and
  cutting back is a length (the HF cache protocol's `update`, `get_seq_length` and `crop`, so the
  module's own path can use it too).

`tests/heads/test_lean_layer.py` checks it against the module's forward, tree masks included. What it
saves is measured in docs/results.md (the head's step cost on CPU, not its arithmetic).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from headstart.packed import is_packed, is_quantized, pack_linears, quantize_linears


class DraftKV:
    """A draft layer's keys and values (1 layer): (B, H, capacity, d) buffers and the length in use."""

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.length = 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def crop(self, max_length: int) -> None:
        """HF's convention: a negative `max_length` drops that many tokens from the end."""
        self.length = max(0, self.length + max_length if max_length < 0 else min(max_length, self.length))

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int = 0, *args, **kwargs):
        """Append (B, H, n, d) keys and values; returns every key and value held, as views."""
        end = self.length + keys.shape[2]
        if self.keys is None or end > self.keys.shape[2] or self.keys.dtype != keys.dtype or self.keys.device != keys.device:
            self._grow(keys, values, max(2 * end, 256))
        self.keys[:, :, self.length : end] = keys
        self.values[:, :, self.length : end] = values
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def _grow(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        b, h, _, d = keys.shape
        new_k = keys.new_empty(b, h, capacity, d)
        new_v = values.new_empty(b, h, capacity, values.shape[3])
        if self.keys is not None and self.length:
            new_k[:, :, : self.length] = self.keys[:, :, : self.length].to(keys)
            new_v[:, :, : self.length] = self.values[:, :, : self.length].to(values)
        self.keys, self.values = new_k, new_v


def rms_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`LlamaRMSNorm`'s arithmetic (normalised in float32, scaled by the weight in x's dtype) without a module
    call; on a few rows this is faster than `F.rms_norm`, whose CPU kernel is a composite of the same steps."""
    x32 = x.float()
    return norm.weight * (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + norm.variance_epsilon)).to(x.dtype)


def _fused(linears: list[nn.Linear]) -> nn.Linear:
    weight = torch.cat([m.weight.detach() for m in linears], dim=0)
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        fused.weight.copy_(weight)
    fused.weight.requires_grad_(False)
    return fused


class RotaryTable:
    """cos and sin of the draft layer's rotary embedding by position, computed by the architecture's own
    rotary module once per position range (doubled when a longer position comes) where its frequencies are
    fixed; rotary types that rescale with the sequence (dynamic, longrope) are called at every step. sin
    carries the sign of the rotated half, so that a rotation is x * cos + roll(x, d/2) * sin."""

    STATIC = ("default", "linear", "llama3", "yarn")

    def __init__(self, rotary):
        self.rotary = rotary  # heads.feature_head.Rotary
        inner = getattr(rotary, "rotary", rotary)
        self.static = getattr(inner, "rope_type", "default") in self.STATIC
        self.cos = self.sin = None

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n) positions -> cos, signed sin (B, n, 1, d) in x's dtype."""
        if not self.static:
            return self._signed(*self.rotary(x, positions))
        top = int(positions.max()) + 1
        if self.cos is None or top > self.cos.shape[0] or self.cos.dtype != x.dtype or self.cos.device != x.device:
            span = torch.arange(max(2 * top, 1024), device=x.device)[None]
            cos, sin = self._signed(*self.rotary(x, span))
            self.cos, self.sin = cos[0], sin[0]
        return self.cos[positions], self.sin[positions]

    @staticmethod
    def _signed(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        half = sin.shape[-1] // 2
        return cos[..., None, :], torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)[..., None, :]


class LeanDraftLayer:
    """The drafting forward of an EAGLE-3 head's `midlayer` (see the module docstring). Not a module:
    its fused weights are copies, never saved or trained."""

    def __init__(self, head):
        self.head = head
        self._key: tuple | None = None
        self._parts: nn.ModuleDict | None = None
        self.rotary = RotaryTable(head.rotary)

    def _sources(self) -> list[nn.Linear]:
        attn, mlp = self.head.midlayer.self_attn, self.head.midlayer.mlp
        return [attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj]

    def parts(self) -> nn.ModuleDict:
        """The fused products, rebuilt when a source weight was changed, moved, packed or quantised since
        (packed or quantised as the layer is)."""
        sources = self._sources()
        key = tuple((m.weight.data_ptr(), m.weight._version, m.weight.dtype, type(m)) for m in sources)
        if key != self._key:
            q, k, v, gate, up = sources
            self._parts = nn.ModuleDict({"qkv": _fused([q, k, v]), "gate_up": _fused([gate, up])})
            if is_quantized(self.head.midlayer):
                quantize_linears(self._parts)
            elif is_packed(self.head.midlayer):
                pack_linears(self._parts)
            self._key = key
        return self._parts

    @torch.no_grad()
    def step(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, mask, cache: DraftKV) -> torch.Tensor:
        """What `Eagle3Head.step` computes: hidden (B, n, D), tokens (B, n), positions (B, n), an additive
        or bool mask (B or 1, 1, n, past + n) -> (B, n, D); appends the n keys and values to `cache`."""
        head, layer = self.head, self.head.midlayer
        attn, mlp = layer.self_attn, layer.mlp
        parts = self.parts()
        hidden = hidden.to(head.dtype)
        b, n, _ = hidden.shape
        embed = rms_norm(layer.input_layernorm, head.target_parts.embed_tokens(tokens).to(head.dtype))
        normed = rms_norm(layer.hidden_norm, hidden)
        if head.norms["norm_before_residual"]:
            hidden = normed  # the residual stream starts from the normed features too (heads/eagle3.py's NORMS)
        x = torch.cat([embed, normed], dim=-1)  # (B, n, 2D)
        heads, kv_heads, d = attn.config.num_attention_heads, attn.config.num_key_value_heads, attn.head_dim
        qk, v = parts["qkv"](x).split([(heads + kv_heads) * d, kv_heads * d], dim=-1)
        qk = qk.view(b, n, heads + kv_heads, d)
        cos, sin = self.rotary(x, positions)  # (B, n, 1, d): q and k rotated in one product
        qk = torch.addcmul(qk * cos, qk.roll(d // 2, dims=-1), sin).transpose(1, 2)
        q, k = qk[:, :heads], qk[:, heads:]
        v = v.view(b, n, kv_heads, d).transpose(1, 2)
        keys, values = cache.update(k, v)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=attn.scaling,
                                             enable_gqa=heads != kv_heads)
        hidden = hidden + attn.o_proj(out.transpose(1, 2).reshape(b, n, heads * d))
        gate, up = parts["gate_up"](rms_norm(layer.post_attention_layernorm, hidden)).chunk(2, dim=-1)
        out = hidden + mlp.down_proj(mlp.act_fn(gate) * up)
        return rms_norm(head.norm, out) if head.norms["norm_output"] else out
