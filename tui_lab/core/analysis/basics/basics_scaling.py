"""The tutorials' "why divide by sqrt(d_k)" picture, on the model's own q and k and on random ones.

For q and k whose entries have unit variance, ``q . k`` is a sum of d_k
products and has variance d_k: the scores spread as d_k grows, softmax
saturates and a row's weights turn nearly one-hot (its entropy falls toward
0). Dividing by sqrt(d_k) brings the variance back to about 1 and keeps the
entropy up. ``scaling_real`` measures both ways on every self-attention module
of a model, on the padded example batch (over the query/key pairs its masks
allow); ``scaling_random`` does it for random unit-variance q, k as d_k goes
from 16 to 1024. Softmax is the core's ``scaled_dot_product_attention`` with
``scale=1`` (unscaled) and its default 1/sqrt(d_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.analysis.basics.basics_example import example_batch, self_attention_qk
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.attention import causal_mask, scaled_dot_product_attention, window_mask
from tui_lab.core.tasks.protocol import Task

RANDOM_D_K = (16, 32, 64, 128, 256, 512, 1024)
RANDOM_KEYS = 16  # keys per softmax row
RANDOM_ROWS = 256  # query rows per d_k


@dataclass(frozen=True)
class ScalingRow:
    """q.k's variance and the softmax rows' mean entropy (nats), unscaled and scaled."""

    name: str  # a module's capture name, or "random"
    d_k: int
    var_q: float
    var_k: float
    var_raw: float  # var(q . k)
    var_scaled: float  # var(q . k / sqrt(d_k))
    entropy_raw: float  # mean entropy of softmax(q . k) rows
    entropy_scaled: float  # mean entropy of softmax(q . k / sqrt(d_k)) rows
    entropy_max: float  # mean log(keys a row may see): the uniform row's entropy
    model_scale: float | None = None  # the module's own score scale (None: 1/sqrt(d_k))


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """-sum w log w over the last dim (0 log 0 = 0)."""
    return -torch.special.xlogy(weights, weights).sum(-1)


def measure(
    name: str, q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor, model_scale: float | None = None
) -> ScalingRow:
    """One row of the table for q (..., Tq, d), k (..., Tk, d) over the ``allowed`` (..., Tq, Tk)
    pairs (bool, broadcastable); rows with no allowed key are left out."""
    d_k = q.size(-1)
    allowed = allowed.expand(*q.shape[:-1], k.size(-2))
    raw = q @ k.transpose(-2, -1)  # (..., Tq, Tk)
    v = torch.zeros_like(k[..., :1])  # the output is not looked at
    _, w_raw = scaled_dot_product_attention(q, k, v, allowed, 1.0)
    _, w_scaled = scaled_dot_product_attention(q, k, v, allowed)
    rows = allowed.any(-1)  # (..., Tq) queries that see at least one key
    seen = allowed.sum(-1).clamp(min=1).float()
    return ScalingRow(
        name=name,
        d_k=d_k,
        var_q=float(q.var()),
        var_k=float(k.var()),
        var_raw=float(raw[allowed].var()),
        var_scaled=float((raw / math.sqrt(d_k))[allowed].var()),
        entropy_raw=float(_entropy(w_raw)[rows].mean()),
        entropy_scaled=float(_entropy(w_scaled)[rows].mean()),
        entropy_max=float(seen.log()[rows].mean()),
        model_scale=model_scale,
    )


def scaling_real(model: nn.Module, task: Task, arch: Shape | str, text: str | None = None) -> list[ScalingRow]:
    """Every self-attention module of ``model`` on the example batch (decoder's first)."""
    batch = example_batch(task, arch, text)
    rows = []
    for qk in self_attention_qk(model, batch):
        t = qk.q.size(2)
        lengths = batch.lengths if qk.causal or batch.src_lengths is None else batch.src_lengths
        real = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        allowed = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T) real pairs
        if qk.causal:
            allowed = allowed & (window_mask(t, t, qk.window) if qk.window else causal_mask(t))
        rows.append(measure(qk.name, qk.q, qk.k, allowed, qk.score_scale))
    return rows


def scaling_random(
    d_ks: tuple[int, ...] = RANDOM_D_K, n_keys: int = RANDOM_KEYS, n_rows: int = RANDOM_ROWS, seed: int = 0
) -> list[ScalingRow]:
    """The same for q, k with independent N(0, 1) entries, one row per d_k (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for d_k in d_ks:
        q = torch.randn(n_rows, 1, d_k, generator=gen)  # (rows, 1 query, d_k)
        k = torch.randn(n_rows, n_keys, d_k, generator=gen)  # (rows, keys, d_k)
        out.append(measure("random", q, k, torch.ones(1, 1, n_keys, dtype=torch.bool)))
    return out
