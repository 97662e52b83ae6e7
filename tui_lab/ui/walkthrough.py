"""The numbers behind one attention row, taken from the real model.

``collect_projections`` replays the decode that produced a ``DecodeResult``
with forward hooks on every attention module's ``w_q``, ``w_k`` and ``w_v``
(the KV cache means each is called step by step: the outputs are
concatenated). ``walk`` then writes the formula out for one head and one
query row: raw scores ``q·k``, scaled by ``1/sqrt(d_head)``, the softmax, and
the weighted sum of the value rows; the weights are compared with those the
decode captured. Torch is imported only when these run (after the lab loaded it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Projections:
    """Full-sequence projections of one attention module, split into heads."""

    q: Any  # (H, Tq, d_head), after RoPE if the module uses it
    k: Any  # (H, Tk, d_head)
    v: Any  # (H, Tk, d_head)
    causal: bool


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

    @property
    def max_diff(self) -> float:
        """Largest difference from the weights the decode captured."""
        return max((abs(a - b) for a, b in zip(self.weights, self.captured)), default=0.0)


def collect_projections(model: Any, task: Any, result: Any, options: dict[str, Any] | None) -> dict[str, Projections]:
    """Replay ``result``'s decode with hooks; q/k/v of every attention module by capture name."""
    import torch

    from tui_lab.core.attention import MultiHeadAttention
    from tui_lab.core.decode import generate

    modules = {m.capture_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}
    outputs: dict[tuple[str, str], list[Any]] = {}
    handles = []
    for name, module in modules.items():
        for part in ("q", "k", "v"):
            linear = getattr(module, f"w_{part}")

            def hook(_mod: Any, _inp: Any, out: Any, key: tuple[str, str] = (name, part)) -> None:
                outputs.setdefault(key, []).append(out.detach())

            handles.append(linear.register_forward_hook(hook))
    try:
        opts = dict(options or {})
        generate(model, task, result.input, capture=False, **opts)
    finally:
        for h in handles:
            h.remove()
    found: dict[str, Projections] = {}
    for name, module in modules.items():
        parts = []
        for part in ("q", "k", "v"):
            chunks = outputs.get((name, part))
            if not chunks:
                break
            x = torch.cat(chunks, dim=1)[0].float()  # (T, d_model)
            x = x.view(x.size(0), module.n_heads, module.d_head).transpose(0, 1)  # (H, T, d_head)
            parts.append(x)
        if len(parts) != 3:
            continue
        q, k, v = parts
        if module.rope is not None:
            q, k = module.rope(q, 0), module.rope(k, 0)
        found[name] = Projections(q, k, v, causal=name.startswith("decoder") and name.endswith(".self"))
    return found


def walk(proj: Projections, result: Any, name: str, head: int, row: int) -> WalkRow:
    """softmax(q k^T / sqrt(d)) v for one head and one query row, every intermediate kept."""
    import torch

    q = proj.q[head, row]  # (d_head,)
    k = proj.k[head]  # (Tk, d_head)
    v = proj.v[head]
    d_head = q.numel()
    n_keys = k.size(0)
    if proj.causal:
        # Query ``row`` sits at position row (the prompt and every fed token).
        masked = [j > row for j in range(n_keys)]
    else:
        masked = [False] * n_keys
    raw = k @ q  # (Tk,)
    scaled = raw / math.sqrt(d_head)
    allowed = torch.tensor([not m for m in masked])
    weights = torch.softmax(scaled.masked_fill(~allowed, float("-inf")), dim=-1)
    output = weights @ v  # (d_head,)
    captured_matrix = result.attention[name][head]
    captured = [float(x) for x in captured_matrix[row, :n_keys]] if row < captured_matrix.size(0) else []
    q_labels, k_labels = result.labels.get(name, ([], []))
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
    )
