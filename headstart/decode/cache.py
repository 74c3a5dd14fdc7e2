"""Every touch of the HF cache's internals lives here (transformers 5.24: `cache.layers[i].keys`).

The verification forward appends all N + 1 tree inputs to the cache. Committing the accepted path
moves the keys and values of its nodes to the positions right after the prefix, and crops the
rest. In transformers 5.x `crop` takes a negative count of tokens to remove.
"""

from __future__ import annotations

import torch


def cache_length(cache) -> int:
    """Tokens held by the cache (every layer holds the same number: full-length layers only)."""
    return cache.get_seq_length()


def commit_path(cache, past_len: int, keep: torch.Tensor) -> None:
    """Keep the tree inputs `keep` (indices relative to `past_len`, ascending) and drop the rest.

    After the call the cache holds past_len + len(keep) tokens, in the order of `keep`.
    """
    total = cache_length(cache)
    k = keep.numel()
    contiguous = bool((keep == torch.arange(k, device=keep.device)).all())
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True):
            continue
        if not contiguous:
            src = keep.to(layer.keys.device) + past_len
            layer.keys[:, :, past_len : past_len + k] = layer.keys.index_select(2, src)
            layer.values[:, :, past_len : past_len + k] = layer.values.index_select(2, src)
    remove = total - (past_len + k)
    if remove > 0:
        cache.crop(-remove)


def truncate(cache, length: int) -> None:
    """Drop everything after the first `length` tokens."""
    remove = cache_length(cache) - length
    if remove > 0:
        cache.crop(-remove)
