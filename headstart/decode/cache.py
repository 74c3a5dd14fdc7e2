"""Every touch of the HF cache's internals lives here (transformers 5.24: `cache.layers[i].keys`).

The target's cache is shared by the rows of a batch (`RaggedCache`): a slot is one column of every
layer's keys and values (B, H, L, D), and each row marks which slots it may attend and their
absolute positions in its own sequence. The verification forward appends all N + 1 tree inputs of
every row; committing moves the keys and values of each row's accepted path to the slots right
after the prefix and crops the rest. In transformers 5.x `crop` takes a negative count of tokens.
"""

from __future__ import annotations

import torch


def cache_length(cache) -> int:
    """Tokens held by the cache (every layer holds the same number: full-length layers only)."""
    return cache.get_seq_length()


def truncate(cache, length: int) -> None:
    """Drop everything after the first `length` tokens."""
    remove = cache_length(cache) - length
    if remove > 0:
        cache.crop(-remove)


def _layers(cache):
    return [layer for layer in cache.layers if getattr(layer, "is_initialized", True)]


def _gather_slots(layer, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values at the slots `index` (B, S) of each row: (B, H, S, D) each."""
    idx = index.to(layer.keys.device)[:, None, :, None]
    keys = layer.keys.gather(2, idx.expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3]))
    values = layer.values.gather(2, idx.expand(-1, layer.values.shape[1], -1, layer.values.shape[3]))
    return keys, values


class RaggedCache:
    """A DynamicCache shared by rows of different lengths, with per-row slot masks and positions.

    valid (B, L) bool: the slots a row may attend; positions (B, L): their absolute positions in the
    row's sequence. Prompts are left-padded (padding slots invalid). Each step appends every row's
    accepted path, padded to the longest path of the step; the padding slots are holes (invalid),
    at most (longest - own) per row and step. `compact` squeezes the holes out when they add up.
    """

    def __init__(self, cache, valid: torch.Tensor, positions: torch.Tensor):
        self.cache = cache
        self.valid = valid  # (B, L)
        self.positions = positions  # (B, L)

    @property
    def length(self) -> int:
        """Slots per row (L), holes and padding included."""
        return self.valid.shape[1]

    def commit(self, keep: torch.Tensor, counts: torch.Tensor, starts: torch.Tensor) -> None:
        """Keep each row's accepted tree inputs after a verification forward appended them.

        keep (B, m): per row, indices (relative to the prefix, ascending) of the inputs to keep in
        its first counts[b] entries, the rest padding; starts (B,): the position of each row's
        first kept input. Afterwards row b's path fills slots [L, L + counts[b]) and the cache
        holds L + m slots. Padding entries equal to their column skip the move when nothing else does.
        """
        past, m = self.length, keep.shape[1]
        column = torch.arange(m, device=keep.device)
        if not bool((keep == column).all()):
            for layer in _layers(self.cache):
                keys, values = _gather_slots(layer, keep + past)  # (B, H, m, D)
                layer.keys[:, :, past : past + m] = keys
                layer.values[:, :, past : past + m] = values
        truncate(self.cache, past + m)
        self.valid = torch.cat([self.valid, column[None] < counts.to(keep.device)[:, None]], dim=1)
        self.positions = torch.cat([self.positions, starts.to(keep.device)[:, None] + column], dim=1)

    def select_rows(self, index: torch.Tensor) -> None:
        """Keep only the rows `index` (B',): finished rows leave the batch and cost nothing more."""
        self.cache.batch_select_indices(index.to(self.valid.device))
        self.valid, self.positions = self.valid[index], self.positions[index]

    def compact(self, longest: int) -> None:
        """Move each row's valid slots to the right end, in order, and drop the rest.

        longest: the most valid slots of any row; the cache then holds exactly that many slots.
        """
        # A stable sort of the invalid (0) before the valid (1) slots keeps each row's order.
        order = torch.sort(self.valid.to(torch.uint8), dim=1, stable=True).indices[:, self.length - longest :]
        for layer in _layers(self.cache):
            layer.keys, layer.values = _gather_slots(layer, order)
        self.valid, self.positions = self.valid.gather(1, order), self.positions.gather(1, order)
