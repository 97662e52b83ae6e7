"""The numbers behind one attention row, taken from the real model.

``collect_projections`` replays the decode that produced a ``DecodeResult``
and reads every attention module's q, k and v at its hook points (with the KV
cache each step brings only the new tokens: the steps are concatenated). ``walk`` then writes the formula out for one head and one
query row: raw scores ``q·k``, scaled by ``1/sqrt(d_head)`` (or the model's own
scale: GPT-Neo uses none), masked to the past (and to a local layer's window), the softmax, and
the weighted sum of the value rows; the weights are compared with those the
decode captured. Torch is imported only when these run (after the lab loaded it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor, nn

    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.tasks.protocol import Task


@dataclass
class Projections:
    """Full-sequence projections of one attention module, split into heads."""

    q: Tensor  # (H, Tq, d_head), after RoPE if the module uses it
    k: Tensor  # (H, Tk, d_head): with grouped-query attention, each query head's shared key head
    v: Tensor  # (H, Tk, d_head)
    causal: bool
    scale: float | None = None  # what multiplies q.k; None: 1/sqrt(d_head)
    window: int = 0  # > 0: a query sees only its last ``window`` keys


@dataclass
class WalkRow:
    """One query row written out."""

    name: str
    head: int
    row: int
    d_head: int
    query: str
    keys: list[str]
    raw: list[float]
    scaled: list[float]
    weights: list[float]
    masked: list[bool]
    output: list[float]
    captured: list[float]
    scale: float | None = None  # None: 1/sqrt(d_head)

    @property
    def scale_label(self) -> str:
        """How the scores were scaled, as a column head: ``/√16``, or ``×1`` (GPT-Neo: none)."""
        return f"/√{self.d_head}" if self.scale is None else f"×{self.scale:g}"

    @property
    def max_diff(self) -> float:
        """Largest difference from the weights the decode captured."""
        return max(
            (abs(a - b) for a, b in zip(self.weights, self.captured, strict=False)), default=0.0
        )


def collect_projections(
    model: nn.Module, task: Task, result: DecodeResult | FillMaskResult, options: dict[str, Any] | None
) -> dict[str, Projections]:
    """Replay ``result``'s decode (a fill-mask result: its one read); q/k/v of every attention
    module, by its lab name.

    Hooks on ``hook_q``, ``hook_k`` and ``hook_v`` record each call's (B, T,
    heads, d_head) tensors, after rotary (a cross-attention whose static cache
    is already filled brings queries only).
    """
    import torch

    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.model.attention import MultiHeadAttention
    from tui_lab.core.model.hook_points import using_hooks

    modules = {m.lab_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}
    seen: dict[str, list[Tensor]] = {}

    def record(x: Tensor, name: str) -> None:
        seen.setdefault(name, []).append(x[0].detach().float().transpose(0, 1))  # (heads, T, d_head)

    names = [n for m in modules.values() for n in (m.hook_names.q, m.hook_names.k, m.hook_names.v)]
    with using_hooks([(set(names).__contains__, record)]):
        if isinstance(result, FillMaskResult):  # a fill-mask decode: the one read its attention came from
            with torch.no_grad():
                model(torch.tensor([result.tokens], device=next(model.parameters()).device))
        else:
            generate(model, task, result.input, capture=False, **dict(options or {}))
    found: dict[str, Projections] = {}
    for name, module in modules.items():
        hooked = module.hook_names
        if hooked.q not in seen:
            continue
        q, k, v = (torch.cat(seen[n], dim=1) for n in (hooked.q, hooked.k, hooked.v))
        group = module.n_heads // k.size(0)  # query heads per key/value head
        if group > 1:
            k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        found[name] = Projections(
            q, k, v, causal=name.startswith("decoder") and name.endswith(".self"),
            scale=module.score_scale, window=module.window,
        )
    return found


def walk(proj: Projections, result: DecodeResult | FillMaskResult, name: str, head: int, row: int) -> WalkRow:
    """softmax(q k^T / sqrt(d)) v for one head and one query row, every intermediate kept."""
    import torch

    q = proj.q[head, row]  # (d_head,)
    k = proj.k[head]  # (Tk, d_head)
    v = proj.v[head]
    d_head = q.numel()
    n_keys = k.size(0)
    if proj.causal:
        # Query ``row`` sits at position row (the prompt and every fed token); a
        # local layer also hides the keys ``window`` or more positions back.
        far = row - proj.window if proj.window else -1
        masked = [j > row or j <= far for j in range(n_keys)]
    else:
        masked = [False] * n_keys
    raw = k @ q  # (Tk,)
    scaled = raw / math.sqrt(d_head) if proj.scale is None else raw * proj.scale
    allowed = torch.tensor([not m for m in masked])
    weights = torch.softmax(scaled.masked_fill(~allowed, float("-inf")), dim=-1)
    output = weights @ v  # (d_head,)
    captured_matrix = result.attention[name][head]
    captured = (
        [float(x) for x in captured_matrix[row, :n_keys]] if row < captured_matrix.size(0) else []
    )
    labels = result.labels  # a greedy decode's per capture; a fill's one per token
    q_labels, k_labels = labels.get(name, ([], [])) if isinstance(labels, dict) else (labels, labels)
    return WalkRow(
        name=name,
        head=head,
        row=row,
        d_head=d_head,
        query=q_labels[row] if row < len(q_labels) else str(row),
        keys=list(k_labels[:n_keys]),
        raw=[float(x) for x in raw],
        scaled=[float(x) for x in scaled],
        weights=[float(x) for x in weights],
        masked=masked,
        output=[float(x) for x in output],
        captured=captured,
        scale=proj.scale,
    )
