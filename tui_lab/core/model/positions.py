"""Positional information: fixed sinusoids, a learned table, or rotary embeddings.

Attention by itself is blind to order (permute the tokens and every output is
permuted the same way), so the model must be told where each token sits.

- ``SinusoidalPositions`` adds the fixed table of "Attention Is All You Need"
  to the token embeddings. It has no parameters and grows when a longer
  sequence arrives.
- ``LearnedPositions`` adds a trained vector per position (GPT-2 style); it
  cannot go past ``max_len``.
- ``RotaryEmbedding`` (RoPE) rotates queries and keys inside attention by an
  angle proportional to their position, so the score ``q . k`` depends only on
  the distance between the two tokens.

Every module takes an ``offset``: during incremental decoding with a KV cache
the new tokens start at position ``offset`` rather than 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


def _on_meta(device: torch.device | None) -> bool:
    """True when tensors made on ``device`` (or the default device) have no data.

    On the meta device the tables are left empty: there is nothing to compute,
    and the first arithmetic op there imports torch._dynamo (about 2 s), which
    the params report, called on every keystroke, must not pay.
    """
    return torch.empty(0, device=device).is_meta


def sinusoid_table(
    length: int, d_model: int, device: torch.device | None = None, layout: str = "interleaved"
) -> torch.Tensor:
    """``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(...)``: (length, d_model).

    ``layout="halves"``: the same sines in columns ``0 .. ceil(d/2)-1`` and the
    cosines after them (Marian's ``MarianSinusoidalPositionalEmbedding``).
    """
    if _on_meta(device):
        return torch.empty(length, d_model, device=device)
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)  # (L, 1)
    # 1 / 10000^(2i/d) for 2i = 0, 2, 4, ...: computed in log space for accuracy.
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32, device=device)
        * (-math.log(10000.0) / d_model)
    )  # (ceil(d/2),)
    sines = torch.sin(position * div_term)  # (L, ceil(d/2))
    cosines = torch.cos(position * div_term[: d_model // 2])  # odd d_model: one cos fewer
    if layout == "halves":
        return torch.cat([sines, cosines], dim=1)
    table = torch.zeros(length, d_model, device=device)
    table[:, 0::2] = sines
    table[:, 1::2] = cosines
    return table


class SinusoidalPositions(nn.Module):
    """The fixed sine/cosine table, added to the (already scaled) token embeddings.

    The table is a non-persistent buffer: it is recomputed from the formula, so
    it is not stored in checkpoints and a checkpoint does not depend on
    ``max_len``. A sequence longer than the table extends it instead of failing.
    """

    pe: torch.Tensor  # buffer (max_len, d_model)

    def __init__(self, d_model: int, max_len: int = 512, layout: str = "interleaved") -> None:
        super().__init__()
        self.d_model = d_model
        self.layout = layout
        self.register_buffer("pe", sinusoid_table(max_len, d_model, layout=layout), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x`` (B, T, D) plus the encodings of positions ``offset .. offset+T-1``."""
        return x + self.vectors(offset, x.size(1), x.dtype)

    def vectors(self, offset: int, length: int, dtype: torch.dtype) -> torch.Tensor:
        """The (length, D) encodings of positions ``offset .. offset+length-1``."""
        end = offset + length
        if end > self.pe.size(0):
            # Grow geometrically so a long decode does not rebuild the table every step.
            # Decoding runs under inference_mode; a table made there would be an
            # inference tensor that a later training step could not use.
            with torch.inference_mode(False):
                self.pe = sinusoid_table(
                    max(end, 2 * self.pe.size(0)), self.d_model, self.pe.device, self.layout
                )
        pe = self.pe[offset:end]  # (T, D) broadcasts over B
        return pe if pe.dtype == dtype else pe.to(dtype)


class LearnedPositions(nn.Module):
    """One trained vector per position, ``weight`` of shape (max_len, d_model).

    The parameter lives directly on this module (not in a nested ``nn.Embedding``)
    so the model's parameter is called ``pos.weight``.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        if not self.weight.is_meta:  # nothing to fill on meta (and normal_ there is slow)
            nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x`` (B, T, D) plus the learned vectors of positions ``offset .. offset+T-1``."""
        return x + self.vectors(offset, x.size(1))  # (T, D) broadcasts over B

    def vectors(self, offset: int, length: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The (length, D) learned vectors of positions ``offset .. offset+length-1``
        (in ``dtype`` when given)."""
        end = offset + length
        if end > self.max_len:
            raise ValueError(
                f"sequence reaches position {end}, past the learned table's max_len={self.max_len}"
            )
        table = self.weight[offset:end]
        return table if dtype is None or table.dtype == dtype else table.to(dtype)


@dataclass(frozen=True)
class RopeScaling:
    """How a checkpoint stretches its rotary frequencies (``ModelConfig.rope_scaling``)."""

    kind: str  # "linear" or "llama3"
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_len: int = 8192

    def apply(self, inv_freq: torch.Tensor) -> torch.Tensor:
        if self.kind == "linear":
            return inv_freq / self.factor
        # llama3: wavelengths longer than original / low_freq_factor are slowed by the
        # factor, those shorter than original / high_freq_factor kept, the band between
        # blended linearly in original / wavelength.
        wavelen = 2 * math.pi / inv_freq
        low, high = self.original_max_len / self.low_freq_factor, self.original_max_len / self.high_freq_factor
        scaled = torch.where(wavelen > low, inv_freq / self.factor, inv_freq)
        smooth = (self.original_max_len / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        blended = (1 - smooth) * scaled / self.factor + smooth * scaled
        medium = (wavelen >= high) & (wavelen <= low)
        return torch.where(medium, blended, scaled)


class RotaryEmbedding(nn.Module):
    """RoPE (Su et al. 2021), "rotate half" layout as in GPT-NeoX and Llama.

    Dimension pairs ``(j, j + d/2)`` of a query or key at position ``p`` are
    rotated by the angle ``p * base^(-2j/d)``. Rotations compose, so
    ``rot(p) q . rot(s) k = q . rot(s - p) k``: the score depends only on the
    relative position ``s - p``. No parameters; cos/sin tables are cached and
    extended on demand.

    The rotation of a pair ``(a, b)`` by ``theta`` is ``(a cos - b sin, b cos + a
    sin)``. Over the whole vector that is ``x * cos + rotate_half(x) * sin`` with
    ``rotate_half(x1, x2) = (-x2, x1)``; here it is computed as ``x * cos +
    roll(x, d/2) * sin_signed`` where ``roll`` swaps the halves and
    ``sin_signed`` is ``sin`` with its first half negated (the same numbers,
    fewer ops: a decoded token rotates q and k in every layer).

    ``angles(offset, length)`` gives the (cos, sin_signed) rows for a block of
    positions; a layer stack takes them once per forward and hands them to
    every layer (``rotate``), instead of slicing the tables 2 x n_layers times.

    ``fraction`` < 1 (GPT-NeoX's ``rotary_pct``) rotates only the first ``dims =
    int(d_head * fraction)`` dims of each head, rotate-half within them, with
    frequencies ``base^(-2j/dims)``; the other dims pass through unchanged.

    ``scaling`` stretches the frequencies for long contexts as the checkpoint was
    trained with: ``linear`` divides every one by ``factor`` (positions / factor);
    ``llama3`` divides the low frequencies by ``factor``, keeps the high ones and
    blends the band between (``rope_scaling`` of Llama 3.1 and 3.2).
    """

    # buffers: (dims/2,), then (max_len, dims) twice
    inv_freq: torch.Tensor
    cos: torch.Tensor
    sin_signed: torch.Tensor

    def __init__(
        self,
        d_head: int,
        base: float = 10000.0,
        max_len: int = 0,
        fraction: float = 1.0,
        scaling: RopeScaling | None = None,
    ) -> None:
        super().__init__()
        dims = int(d_head * fraction)
        if dims % 2 or dims < 2:
            raise ValueError(f"rotary embeddings need an even number of dims, got {dims} of {d_head}")
        self.d_head = d_head
        self.dims = dims
        self.base = base
        self.scaling = scaling
        if _on_meta(None):
            inv_freq = torch.empty(dims // 2)
        else:
            inv_freq = 1.0 / (base ** (torch.arange(0, dims, 2, dtype=torch.float32) / dims))
            if scaling is not None:
                inv_freq = scaling.apply(inv_freq)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (dims/2,)
        cos, sin_signed = self._tables(max_len)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, dims)
        self.register_buffer("sin_signed", sin_signed, persistent=False)

    def _tables(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.inv_freq.is_meta:
            empty = torch.empty(length, self.dims, device="meta")
            return empty, empty
        # Decoding runs under inference_mode; tables made there would be inference
        # tensors, which a later training step could not use.
        with torch.inference_mode(False):
            t = torch.arange(length, dtype=torch.float32, device=self.inv_freq.device)
            freqs = torch.outer(t, self.inv_freq)  # (L, d/2)
            cos, sin = freqs.cos(), freqs.sin()
            return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)  # (L, dims)

    def angles(self, offset: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin_signed), each (length, dims), for positions ``offset .. offset+length-1``."""
        end = offset + length
        if end > self.cos.size(0):
            self.cos, self.sin_signed = self._tables(max(end, 2 * self.cos.size(0)))
        return self.cos[offset:end], self.sin_signed[offset:end]

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (..., T, d_head) by ``angles`` rows (T, dims); keeps x's dtype.

        Rows narrower than the head (a rotary fraction) rotate its first dims only.
        """
        if cos.dtype != x.dtype:  # bf16 activations under autocast; the tables stay fp32
            cos, sin_signed = cos.to(x.dtype), sin_signed.to(x.dtype)
        dims = cos.size(-1)
        if dims != x.size(-1):
            rot, rest = x[..., :dims], x[..., dims:]
            return torch.cat((rot * cos + rot.roll(dims // 2, dims=-1) * sin_signed, rest), dim=-1)
        return x * cos + x.roll(dims // 2, dims=-1) * sin_signed

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate ``x`` (..., T, d_head) as if its rows sat at positions ``offset..offset+T-1``."""
        return self.rotate(x, *self.angles(offset, x.size(-2)))
