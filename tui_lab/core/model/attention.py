"""Scaled dot-product attention, masks and multi-head attention.

Attention lets every query position take a weighted average of the value
vectors, weighted by how well its query matches each key:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two code paths compute it, chosen in one place (``attend``):

- ``scaled_dot_product_attention`` below writes the formula out and returns the
  weights, so they can be shown, hooked and tested;
- ``torch.nn.functional.scaled_dot_product_attention`` (the fused kernel),
  whenever nobody asks for the weights or the scores. It never materialises
  the (Tq, Tk) matrix and is markedly faster.

Masks are boolean and **True means "may attend"** (the convention of
``F.scaled_dot_product_attention``; the opposite of ``nn.MultiheadAttention``'s
``key_padding_mask``).

Options real checkpoints need: fewer key/value heads than query heads
(grouped-query attention: query head i reads key/value head i // (H / H_kv)),
another score scale than 1/sqrt(d_k) (GPT-Neo uses none), a local window (each
query sees only its last w keys), and projections without biases.

Hook points (``hook_points.py``), under the module's ``hook_prefix``
(``blocks.0.attn.``): ``hook_q``, ``hook_k``, ``hook_v`` (B, T, H or H_kv,
d_head) after rotary and before the key/value heads are repeated;
``hook_attn_scores`` (B, H, Tq, Tk), scaled and masked with -inf;
``hook_pattern`` (B, H, Tq, Tk); ``hook_z`` (B, Tq, H, d_head), the heads'
outputs before ``w_o``. A hook on the scores or the pattern switches the
module to the explicit path for that call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.model.hook_points import HookSet, active_hooks, fire
from tui_lab.core.model.kv_cache import KVCache, stacked
from tui_lab.core.model.positions import RotaryEmbedding

__all__ = [
    "KVCache", "MultiHeadAttention", "attend", "causal_mask", "padding_mask",
    "scaled_dot_product_attention", "window_mask",
]


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    *,
    hooks: HookSet | None = None,
    hook_prefix: str = "",
    softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, written out so the weights can be returned.

    Shapes: ``q`` (..., Tq, d_k), ``k`` (..., Tk, d_k), ``v`` (..., Tk, d_v) with
    any (broadcastable) leading dims; ``mask`` boolean, broadcastable to
    (..., Tq, Tk), True where attending is allowed. Returns ``(output (..., Tq,
    d_v), weights (..., Tq, Tk))``.

    A query row whose keys are all masked has nothing to attend to; softmax
    over only ``-inf`` would be NaN, so such rows get zero weights and a zero
    output instead (matching the fused kernel on CPU). ``scale`` replaces
    1/sqrt(d_k) when given; ``softcap`` c bounds the scaled scores to (-c, c) as
    ``c * tanh(scores / c)`` (Gemma 2). ``hooks``: the scores and the weights pass
    through ``{hook_prefix}hook_attn_scores`` and ``{hook_prefix}hook_pattern``.
    """
    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)
    scores = scores / math.sqrt(q.size(-1)) if scale is None else scores * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        # torch.where(mask, x, c) is masked_fill(~mask, c) without building ~mask.
        scores = torch.where(mask, scores, float("-inf"))
    scores = fire(hooks, hook_prefix + "hook_attn_scores", scores)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # Masked entries are already exactly 0, except in fully masked rows where
        # softmax produced NaN: this zeroes those without touching the others.
        weights = torch.where(mask, weights, 0.0)
    weights = fire(hooks, hook_prefix + "hook_pattern", weights)
    return weights @ v, weights


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    explicit: bool = False,
    hooks: HookSet | None = None,
    hook_prefix: str = "",
    softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The one place the kernel is chosen: the fused one unless ``explicit`` (the
    weights are wanted, hooked, soft-capped or the fused path is switched off).

    ``is_causal`` (only with ``mask`` None and Tq == Tk): the plain lower triangle.
    ``k`` and ``v`` may have fewer heads than ``q`` (grouped key/value heads, H a
    multiple of H_kv): the fused kernel reads each group's head in place, which
    saves copying the whole cache per layer and token; the explicit path repeats them.
    Returns (output (B, H, Tq, d_head), weights (B, H, Tq, Tk) or None).
    """
    group = q.size(-3) // k.size(-3)
    # CUDA's float32 kernel (memory-efficient) takes no groups and would fall back to
    # the plain one: there, as on the explicit path, the heads are repeated.
    kernel_groups = q.device.type == "cpu" or q.dtype in (torch.float16, torch.bfloat16)
    if group > 1 and (explicit or not kernel_groups):
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    if not explicit:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
            enable_gqa=q.size(-3) != k.size(-3),
        )
        return out, None
    if is_causal:
        mask = causal_mask(q.size(-2), k.size(-2), device=q.device)
    out, weights = scaled_dot_product_attention(
        q, k, v, mask, scale, hooks=hooks, hook_prefix=hook_prefix, softcap=softcap
    )
    if dropout_p > 0.0:
        out = F.dropout(weights, dropout_p) @ v  # (B, H, Tq, d_head)
    return out, weights


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


class AttentionHookNames(NamedTuple):
    """The hook names of one attention module, worked out once (not per call)."""

    q: str
    k: str
    v: str
    scores: str
    pattern: str
    z: str

    @classmethod
    def under(cls, prefix: str) -> AttentionHookNames:
        return cls(*(prefix + n for n in ("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z")))


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
      with the stacked weights the cache keeps (``KVCache.packed_weights``).
    - ``rope``: a shared ``RotaryEmbedding`` applied to q and k (self-attention);
      ``rope_angles``, its ``angles(offset, Tq)`` when the caller has them.
    - ``n_kv_heads`` < ``n_heads``: ``w_k``/``w_v`` project to ``n_kv_heads``
      heads (the cache keeps those), each shared by ``n_heads / n_kv_heads``
      consecutive query heads; weights are still (B, n_heads, Tq, Tk).
    - ``score_scale``: multiplies q.k instead of 1/sqrt(d_head); ``window`` > 0:
      a causal query sees only its last ``window`` keys (with or without cache).
    - ``head_dim``: heads of another width than d_model / n_heads (``w_q`` then
      projects to n_heads * head_dim, which ``w_o`` maps back to d_model).
    - ``qk_norm``: ``norm(width)`` applied to the queries and keys before rotary,
      per head (``"head"``: Qwen3, Gemma 3) or over the whole projection
      (``"full"``: OLMo-2); ``softcap``: scores soft-capped (Gemma 2).

    Names, set by the model that builds it: ``lab_name`` (the lab's name of its
    heads, ``decoder.0.self``, ``decoder.0.cross``) and ``hook_prefix``
    (``blocks.0.attn.``, ``decoder.0.cross_attn.``) for its hook points.
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
        head_dim: int | None = None,
        qk_norm: str = "none",
        norm: Callable[[int], nn.Module] | None = None,
        softcap: float | None = None,
    ) -> None:
        super().__init__()
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        kv_heads = n_kv_heads or n_heads
        if n_heads % kv_heads:
            raise ValueError(f"n_kv_heads={kv_heads} does not divide n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = kv_heads
        self.d_head = head_dim or d_model // n_heads
        self.d_attn = n_heads * self.d_head  # the concatenated heads' width
        self.dropout = dropout
        self.score_scale = score_scale
        self.window = window
        self.softcap = softcap
        d_kv = kv_heads * self.d_head
        self.w_q = nn.Linear(d_model, self.d_attn, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_kv, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_kv, bias=qkv_bias)
        self.w_o = nn.Linear(self.d_attn, d_model, bias=out_bias)
        self.qk_norm = qk_norm
        self.q_norm: nn.Module | None = None
        self.k_norm: nn.Module | None = None
        if qk_norm != "none":
            if norm is None:
                raise ValueError("qk_norm needs a norm to make")
            per_head = qk_norm == "head"
            self.q_norm = norm(self.d_head if per_head else self.d_attn)
            self.k_norm = norm(self.d_head if per_head else d_kv)
        self.rope = rope
        self.lab_name = "attention"
        self._hook_prefix = "attn."
        self.hook_names = AttentionHookNames.under(self._hook_prefix)
        # False forces the explicit path everywhere (train.fused_attention: false),
        # e.g. to compare kernels or rule the fused one out when debugging.
        self.fused: bool = True

    @property
    def hook_prefix(self) -> str:
        return self._hook_prefix

    @hook_prefix.setter
    def hook_prefix(self, prefix: str) -> None:
        self._hook_prefix = prefix
        self.hook_names = AttentionHookNames.under(prefix)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_head, self.d_head).transpose(1, 2)  # (B, H, T, d_head)

    def packed_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``w_q``, ``w_k`` and ``w_v`` stacked into one (D + 2 D_kv, D) projection and its bias.

        A decoded token is bound by per-op overhead: one GEMM where three cost three.
        (In training the three GEMMs are as fast, and stacking the weights each step
        costs more than it saves: bench/RESULTS.md.) The parameters stay separate
        (checkpoint names unchanged); the stack is a view when they already lie back
        to back (GPT-2's fused ``c_attn``).
        """
        q_b, k_b, v_b = self.w_q.bias, self.w_k.bias, self.w_v.bias
        return (
            stacked((self.w_q.weight, self.w_k.weight, self.w_v.weight)),
            None if q_b is None or k_b is None or v_b is None else stacked((q_b, k_b, v_b)),
        )

    def project_packed(
        self, x: torch.Tensor, packed: tuple[torch.Tensor, torch.Tensor | None]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v (B, H or H_kv, T, d_head) of self-attention over ``x`` (B, T, d_model)."""
        b, t, _ = x.shape
        qkv = F.linear(x, *packed)  # (B, T, D_attn + 2 D_kv)
        if self.n_kv_heads == self.n_heads and self.q_norm is None:
            q, k, v = qkv.view(b, t, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).unbind(0)
            return q, k, v  # (B, H, T, d_head) each
        d_kv = self.n_kv_heads * self.d_head
        q, k, v = qkv.split((self.d_attn, d_kv, d_kv), dim=-1)
        return self.heads(q, self.q_norm), self.heads(k, self.k_norm), self.split_heads(v)

    def heads(self, x: torch.Tensor, norm: nn.Module | None) -> torch.Tensor:
        """A projection (B, T, width) as heads (B, heads, T, d_head), through its q/k norm."""
        if norm is not None and self.qk_norm == "full":
            x = norm(x)
        x = self.split_heads(x)
        return norm(x) if norm is not None and self.qk_norm == "head" else x

    def _project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cache: KVCache | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """q, k, v (B, heads, T, d_head), and whether k and v are new (not a static cache's)."""
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            return self.heads(self.w_q(query), self.q_norm), cache.k, cache.v, False
        if query is key is value and cache is not None and not torch.is_grad_enabled():
            # Decoding: one packed projection, stacked once per decode (the cache keeps it).
            return (*self.project_packed(query, cache.packed_weights(self)), True)
        q = self.heads(self.w_q(query), self.q_norm)  # (B, H, Tq, d_head)
        k = self.heads(self.w_k(key), self.k_norm)  # (B, H_kv, Tk_new, d_head)
        return q, k, self.split_heads(self.w_v(value)), True

    def _hook_qkv(
        self, hooks: HookSet, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, new_kv: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (and new k, v) through their hooks, seen as (B, T, heads, d_head)."""
        names = self.hook_names
        pairs = [(names.q, q), (names.k, k), (names.v, v)] if new_kv else [(names.q, q)]
        out = [
            hooks.fire(name, x.transpose(1, 2)).transpose(1, 2) if hooks.wants(name) else x
            for name, x in pairs
        ]
        return (out[0], out[1], out[2]) if new_kv else (out[0], k, v)

    def _mask(
        self, mask: torch.Tensor | None, is_causal: bool, t_q: int, t_k: int, device: torch.device
    ) -> tuple[torch.Tensor | None, bool]:
        """The mask to apply, and whether the fused kernel may build the causal one itself."""
        if is_causal and self.window and t_k > self.window:
            # The band is causal too; keys past the window are hidden from every query.
            band = window_mask(t_q, t_k, self.window, device=device)
            mask = band if mask is None else mask & band
            is_causal = False
        # A causal query block that is as long as the keys is the plain lower
        # triangle: the fused kernel takes is_causal=True and builds no mask.
        # A single new query after a cache may see every key: no mask at all.
        # Otherwise the causal mask is explicit (offset by the cached length).
        fused_causal = is_causal and mask is None and t_q == t_k
        if is_causal and not fused_causal and t_q > 1:
            causal = causal_mask(t_q, t_k, device=device)
            mask = causal if mask is None else mask & causal
        return mask, fused_causal

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
        hooks = active_hooks()
        b, t_q, _ = query.shape
        offset = 0 if cache is None or cache.static else cache.length
        q, k, v, new_kv = self._project(query, key, value, cache)
        if self.rope is not None:
            # Self-attention: the new keys sit at the queries' positions, so one
            # pair of angle rows serves both.
            cos, sin = rope_angles if rope_angles is not None else self.rope.angles(offset, t_q)
            q = self.rope.rotate(q, cos, sin)
            if new_kv:
                if k.size(-2) != t_q:
                    cos, sin = self.rope.angles(offset, k.size(-2))
                k = self.rope.rotate(k, cos, sin)
        if hooks is not None:
            q, k, v = self._hook_qkv(hooks, q, k, v, new_kv)
        if new_kv and cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, Tk, d_head)
        mask, fused_causal = self._mask(mask, is_causal, t_q, k.size(-2), q.device)
        names = self.hook_names
        explicit = need_weights or not self.fused or self.softcap is not None or (
            hooks is not None and (hooks.wants(names.scores) or hooks.wants(names.pattern))
        )
        out, weights = attend(
            q, k, v, mask, is_causal=fused_causal, scale=self.score_scale,
            dropout_p=self.dropout if self.training else 0.0, explicit=explicit,
            hooks=hooks, hook_prefix=self._hook_prefix, softcap=self.softcap,
        )
        z = out.transpose(1, 2)  # (B, Tq, H, d_head)
        if hooks is not None:
            z = hooks.fire(names.z, z)
        return self.w_o(z.reshape(b, t_q, self.d_attn)), (weights if need_weights else None)
