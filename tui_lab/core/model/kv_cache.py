"""The KV cache of one attention module, and the decode-only speed-ups that live with it.

Decoding feeds one token at a time. Without a cache every step would recompute
the keys and values of the whole sequence; with it, each step projects only the
new token and appends its keys and values, into buffers with room to spare. A
decoded token is bound by per-op overhead, not arithmetic, so the cache also
keeps the self-attention's stacked q/k/v projection (``packed_weights``), made
on the first step: a decode lives as long as its cache, and the weights do not
change during it.
"""

from __future__ import annotations

from typing import Protocol

import torch

PackedWeights = tuple[torch.Tensor, torch.Tensor | None]


class Packable(Protocol):
    """What the cache asks of its attention module (``MultiHeadAttention``)."""

    def packed_weights(self) -> PackedWeights: ...


def stacked(parts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``torch.cat(parts)`` along dim 0; a view, not a copy, when the parts already lie
    back to back in one tensor (GPT-2's fused ``c_attn`` split into q, k, v views):
    a checkpoint's 85 MB of projections are then neither copied per decode nor held twice."""
    first = parts[0]
    offset = first.storage_offset()
    for part in parts:
        if (
            part.stride() != first.stride()
            or part.shape[1:] != first.shape[1:]
            or part.dtype != first.dtype
            or part.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()
            or part.storage_offset() != offset
        ):
            return torch.cat(parts)
        offset += part.size(0) * part.stride(0)
    rows = sum(part.size(0) for part in parts)
    return first.as_strided((rows, *first.shape[1:]), first.stride(), first.storage_offset())


class KVCache:
    """Keys and values of one attention module, kept across decoding steps.

    Self-attention (``static=False``): each step appends the new tokens' keys and
    values, (B, H_kv, T_new, d_head), so a new query attends to everything so far
    without recomputing old projections.

    Cross-attention (``static=True``): keys and values come from the encoder
    memory, which does not change while decoding; they are computed on the
    first step and reused afterwards.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: torch.Tensor | None = None  # (B, H_kv, T, d_head)
        self.v: torch.Tensor | None = None
        # Decoding: buffers (B, H_kv, room, d_head) whose first T positions are k and v.
        self._room: tuple[torch.Tensor, ...] | None = None
        # The stacked (D + 2 D_kv, D) q/k/v projection and its bias (``packed_weights``).
        self.packed: PackedWeights | None = None

    @property
    def length(self) -> int:
        """Number of cached key positions (0 when empty)."""
        return 0 if self.k is None else self.k.size(-2)

    @property
    def filled(self) -> bool:
        return self.k is not None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store (static) or append (B, H_kv, T_new, d_head) keys/values; return all of them.

        Without a gradient (decoding) the keys and values are written into buffers
        with room to spare and handed out as views of their filled part: appending
        with ``torch.cat`` copied the whole cache at every step (2 ms a token for
        GPT-2 small 50 tokens in, growing with the length). With a gradient the
        cache concatenates, so no tensor autograd saved is ever written over.
        """
        if self.k is None or self.v is None or self.static:
            self.k, self.v = k, v
            self._room = None
        elif torch.is_grad_enabled():
            self.k = torch.cat((self.k, k), dim=-2)  # (B, H, T + T_new, d_head)
            self.v = torch.cat((self.v, v), dim=-2)
            self._room = None
        else:
            self.k, self.v = self._append(k, v)
        return self.k, self.v

    def _append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.k is not None and self.v is not None
        old, new = self.k.size(-2), k.size(-2)
        room = self._room
        if room is None or old + new > room[0].size(-2) or room[0].shape[:-2] != k.shape[:-2]:
            # Double the room (at least 64 more positions): copies stay amortised O(1) a token.
            size = max(2 * (old + new), old + new + 64)
            room = tuple(t.new_empty((*t.shape[:-2], size, t.size(-1))) for t in (self.k, self.v))
            room[0][..., :old, :].copy_(self.k)
            room[1][..., :old, :].copy_(self.v)
            self._room = room
        room[0][..., old : old + new, :].copy_(k)
        room[1][..., old : old + new, :].copy_(v)
        return room[0][..., : old + new, :], room[1][..., : old + new, :]

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions; the room stays, so appends write over the rest."""
        if self.k is not None and self.v is not None and length < self.k.size(-2):
            self.k, self.v = self.k[..., :length, :], self.v[..., :length, :]

    def reset(self) -> None:
        self.k = self.v = None
        self._room = None
        self.packed = None

    def packed_weights(self, attn: Packable) -> PackedWeights:
        """``attn.packed_weights()``, made on the first step and kept for the decode's length."""
        if self.packed is None:
            self.packed = attn.packed_weights()
        return self.packed
