"""Scaled dot-product attention, masks, a KV cache and multi-head attention.

Attention lets every query position take a weighted average of the value
vectors, weighted by how well its query matches each key:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two code paths compute it:

- ``scaled_dot_product_attention`` below writes the formula out and returns the
  weights, so they can be shown and tested;
- ``torch.nn.functional.scaled_dot_product_attention`` (the fused kernel) is
  used by ``MultiHeadAttention`` whenever nobody asks for the weights. It never
  materialises the (Tq, Tk) matrix and is markedly faster.

Masks are boolean and **True means "may attend"** (the convention of
``F.scaled_dot_product_attention``; the opposite of ``nn.MultiheadAttention``'s
``key_padding_mask``).

Options real checkpoints need: fewer key/value heads than query heads
(grouped-query attention: query head i reads key/value head i // (H / H_kv)),
another score scale than 1/sqrt(d_k) (GPT-Neo uses none), a local window (each
query sees only its last w keys), and projections without biases.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.model.positions import RotaryEmbedding


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, written out so the weights can be returned.

    Shapes: ``q`` (..., Tq, d_k), ``k`` (..., Tk, d_k), ``v`` (..., Tk, d_v) with
    any (broadcastable) leading dims; ``mask`` boolean, broadcastable to
    (..., Tq, Tk), True where attending is allowed. Returns ``(output (..., Tq,
    d_v), weights (..., Tq, Tk))``.

    A query row whose keys are all masked has nothing to attend to; softmax
    over only ``-inf`` would be NaN, so such rows get zero weights and a zero
    output instead (matching the fused kernel on CPU). ``scale`` replaces
    1/sqrt(d_k) when given.
    """
    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)
    scores = scores / math.sqrt(q.size(-1)) if scale is None else scores * scale
    if mask is not None:
        # torch.where(mask, x, c) is masked_fill(~mask, c) without building ~mask.
        scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # Masked entries are already exactly 0, except in fully masked rows where
        # softmax produced NaN: this zeroes those without touching the others.
        weights = torch.where(mask, weights, 0.0)
    return weights @ v, weights


def causal_mask(
    t_q: int, t_k: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean (t_q, t_k) mask, True where query i may attend to key j.

    Queries are the *last* ``t_q`` of ``t_k`` positions (with a KV cache the
    earlier keys come from previous steps), so query i sits at absolute
    position ``t_k - t_q + i`` and may see keys ``j <= t_k - t_q + i``.
    """
    t_k = t_q if t_k is None else t_k
    ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    return ones.tril(diagonal=t_k - t_q)


def window_mask(
    t_q: int, t_k: int, window: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean (t_q, t_k) causal band: query i (at position t_k - t_q + i, as in
    ``causal_mask``) may attend to its last ``window`` keys, itself included."""
    ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    return ones.tril(diagonal=t_k - t_q) & ~ones.tril(diagonal=t_k - t_q - window)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, T) token ids -> (B, 1, 1, T) boolean, True at real (non-pad) tokens.

    The two singleton dims broadcast over heads and query positions, so padded
    keys are hidden from every query of every head.
    """
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


class KVCache:
    """Keys and values of one attention module, kept across decoding steps.

    Self-attention (``static=False``): each step appends the new tokens' keys and
    values, (B, H, T_new, d_head), so a new query attends to everything so far
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
        # w_q, w_k, w_v weights and biases stacked into one (3 d_model, d_model)
        # projection (narrower with fewer key/value heads), made on the first
        # step: a decode lives as long as its cache and the weights do not
        # change during it (see MultiHeadAttention).
        self.packed: tuple[torch.Tensor, torch.Tensor | None] | None = None

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


def _stacked(parts: tuple[torch.Tensor, ...]) -> torch.Tensor:
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


class WeightStore(Protocol):
    """Where captured weights go (``capture.AttentionStore`` implements it)."""

    def record(self, name: str, weights: torch.Tensor) -> None: ...


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate ``w_q, w_k, w_v, w_o`` projections.

    ``forward(query, key, value, mask=None, need_weights=False, cache=None,
    is_causal=False, rope_angles=None)`` with inputs (B, T, d_model) returns
    ``(output (B, Tq, d_model), weights (B, H, Tq, Tk) or None)``.

    - ``mask``: boolean, broadcastable to (B, H, Tq, Tk), True = may attend.
    - ``is_causal``: each query also sees only keys at or before its own
      position (positions continue after the cache's contents).
    - ``cache``: a ``KVCache``; new keys/values are appended (or, for a static
      cache already filled, reused without looking at ``key``/``value``).
      Self-attention with a cache and no gradient (decoding) projects q, k, v
      with one matmul on a stacked copy of the weights kept in the cache.
    - ``rope``: a shared ``RotaryEmbedding`` applied to q and k (self-attention);
      ``rope_angles``, its ``angles(offset, Tq)`` when the caller has them.
    - ``n_kv_heads`` < ``n_heads``: ``w_k``/``w_v`` project to ``n_kv_heads``
      heads (the cache keeps those), each shared by ``n_heads / n_kv_heads``
      consecutive query heads; weights are still (B, n_heads, Tq, Tk).
    - ``score_scale``: multiplies q.k instead of 1/sqrt(d_head); ``window`` > 0:
      a causal query sees only its last ``window`` keys (with or without cache).

    Attention capture: ``capture_name`` is set by the model
    (``decoder.0.cross``...) and ``store`` is None except inside
    ``capture_attention``; while set, the explicit path runs and the weights are
    handed to ``store.record``. Otherwise the fused kernel runs and capture
    costs a single ``is None`` check.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        rope: RotaryEmbedding | None = None,
        *,
        n_kv_heads: int | None = None,
        qkv_bias: bool = True,
        out_bias: bool = True,
        score_scale: float | None = None,
        window: int = 0,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        kv_heads = n_kv_heads or n_heads
        if n_heads % kv_heads:
            raise ValueError(f"n_kv_heads={kv_heads} does not divide n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = kv_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.score_scale = score_scale
        self.window = window
        d_kv = kv_heads * self.d_head
        self.w_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_kv, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_kv, bias=qkv_bias)
        self.w_o = nn.Linear(d_model, d_model, bias=out_bias)
        self.rope = rope
        self.capture_name: str = "attention"
        self.store: WeightStore | None = None  # an AttentionStore while capturing
        # False forces the explicit path everywhere (train.fused_attention: false),
        # e.g. to compare kernels or rule the fused one out when debugging.
        self.fused: bool = True

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_head, self.d_head).transpose(1, 2)  # (B, H, T, d_head)

    def _packed_qkv(
        self, x: torch.Tensor, cache: KVCache
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of self-attention from one matmul on the stacked weights.

        A decoded token is bound by per-op overhead, not arithmetic: one
        (3 d_model) projection costs one GEMM where three cost three. The
        parameters stay separate (checkpoint names unchanged); the stacked copy
        lives in the decode's cache and is made only when no gradient is wanted.
        """
        if cache.packed is None:
            q_b, k_b, v_b = self.w_q.bias, self.w_k.bias, self.w_v.bias
            cache.packed = (
                _stacked((self.w_q.weight, self.w_k.weight, self.w_v.weight)),  # (3D, D)
                None if q_b is None or k_b is None or v_b is None else _stacked((q_b, k_b, v_b)),
            )
        b, t, _ = x.shape
        qkv = F.linear(x, *cache.packed)  # (B, T, D + 2 D_kv)
        if self.n_kv_heads == self.n_heads:
            q, k, v = qkv.view(b, t, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).unbind(0)
            return q, k, v  # (B, H, T, d_head) each
        d_kv = self.n_kv_heads * self.d_head
        q, k, v = qkv.split((self.d_model, d_kv, d_kv), dim=-1)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        is_causal: bool = False,
        rope_angles: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """See the class docstring; ``rope_angles`` are ``rope.angles(offset, Tq)``
        when the caller (a layer stack) already has them for this step."""
        b, t_q, _ = query.shape
        offset = 0 if cache is None or cache.static else cache.length
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            q = self._split_heads(self.w_q(query))  # (B, H, Tq, d_head)
            k, v = cache.k, cache.v  # memory projections from the first step
            new_k = None
        else:
            if (
                cache is not None
                and not cache.static
                and query is key
                and key is value
                and not torch.is_grad_enabled()
            ):
                q, k, v = self._packed_qkv(query, cache)
            else:
                q = self._split_heads(self.w_q(query))  # (B, H, Tq, d_head)
                k = self._split_heads(self.w_k(key))  # (B, H, Tk_new, d_head)
                v = self._split_heads(self.w_v(value))
            new_k = k
        if self.rope is not None:
            # Self-attention: the new keys sit at the queries' positions, so one
            # pair of angle rows serves both.
            cos, sin = rope_angles if rope_angles is not None else self.rope.angles(offset, t_q)
            q = self.rope.rotate(q, cos, sin)
            if new_k is not None:
                if new_k.size(-2) != t_q:
                    cos, sin = self.rope.angles(offset, new_k.size(-2))
                k = self.rope.rotate(new_k, cos, sin)
        if new_k is not None and cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, Tk, d_head)
        if self.n_kv_heads != self.n_heads:  # each key/value head serves a group of query heads
            group = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        t_k = k.size(-2)
        if is_causal and self.window and t_k > self.window:
            # The band is causal too; keys past the window are hidden from every query.
            band = window_mask(t_q, t_k, self.window, device=q.device)
            mask = band if mask is None else mask & band
            is_causal = False

        # A causal query block that is as long as the keys is the plain lower
        # triangle: the fused kernel takes is_causal=True and builds no mask.
        # A single new query after a cache may see every key: no mask at all.
        # Otherwise the causal mask is explicit (offset by the cached length).
        fused_causal = is_causal and mask is None and t_q == t_k
        if is_causal and not fused_causal and t_q > 1:
            causal = causal_mask(t_q, t_k, device=q.device)
            mask = causal if mask is None else mask & causal

        store = self.store
        weights = None
        p = self.dropout if self.training else 0.0
        if store is None and not need_weights and self.fused:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=fused_causal, scale=self.score_scale
            )  # (B, H, Tq, d_head)
        else:
            if fused_causal:
                mask = causal_mask(t_q, t_k, device=q.device)
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.score_scale)
            if p > 0.0:
                out = F.dropout(weights, p) @ v  # (B, H, Tq, d_head)
            if store is not None:
                store.record(self.capture_name, weights.detach())
        out = out.transpose(1, 2).reshape(b, t_q, self.d_model)  # (B, Tq, d_model)
        return self.w_o(out), (weights if need_weights else None)
