"""Prototypes measured and not merged (not used by ``python -m bench``).

The decoding fixes prototyped here before (inference_mode, RoPE angles once
per step, no dropout calls in eval, packed q/k/v for decoding, attention
captured by one pass after decoding) are now in ``tui_lab/core``. What is left
are the two that did not pay, kept so the figures in ``bench/RESULTS.md`` can
be reproduced:

1. ``kv-buffer``: ``KVCache.update`` writing into a geometrically grown buffer
   instead of ``torch.cat`` of the whole history each step.
2. ``training``: q/k/v packed into one projection during training as well
   (the core packs only while decoding).

Each is applied to one model *instance*, next to an unpatched one, and timed
side by side in one process:

    .venv/bin/python -m bench.prototypes kv-buffer [REPS]
    .venv/bin/python -m bench.prototypes training [THREADS]
"""

from __future__ import annotations

import statistics
import sys
import time
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.model.attention import KVCache, MultiHeadAttention
from tui_lab.core.model.hook_points import active_hooks
from tui_lab.core.model.models import DecoderCache


class BufferKVCache(KVCache):
    """KVCache that appends into a preallocated, geometrically grown buffer."""

    def __init__(self, static: bool = False) -> None:
        super().__init__(static)
        self._kbuf: torch.Tensor | None = None
        self._vbuf: torch.Tensor | None = None
        self._len = 0

    @property
    def length(self) -> int:
        return self._len if not self.static else super().length

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.static:
            return super().update(k, v)
        end = self._len + k.size(-2)
        if self._kbuf is None or self._vbuf is None or end > self._kbuf.size(-2):
            b, h, _, d = k.shape
            cap = max(64, 2 * end)
            kb, vb = k.new_empty(b, h, cap, d), v.new_empty(b, h, cap, d)
            if self._kbuf is not None and self._vbuf is not None:
                kb[:, :, : self._len] = self._kbuf[:, :, : self._len]
                vb[:, :, : self._len] = self._vbuf[:, :, : self._len]
            self._kbuf, self._vbuf = kb, vb
        self._kbuf[:, :, self._len : end] = k
        self._vbuf[:, :, self._len : end] = v
        self._len = end
        self.k, self.v = self._kbuf[:, :, :end], self._vbuf[:, :, :end]  # views: (B, H, T, d_head)
        return self.k, self.v

    def reset(self) -> None:
        super().reset()
        self._kbuf = self._vbuf = None
        self._len = 0


def _packed_training_forward(
    self: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    need_weights: bool = False,
    cache: KVCache | None = None,
    is_causal: bool = False,
    rope_angles: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Self-attention over a whole sequence with one packed (3D, D) projection, re-stacked every call."""
    if not (query is key is value) or cache is not None or need_weights or active_hooks() is not None:
        return MultiHeadAttention.forward(self, query, key, value, mask, need_weights, cache, is_causal, rope_angles)
    b, t, _ = query.shape
    w = torch.cat((self.w_q.weight, self.w_k.weight, self.w_v.weight))  # (3D, D), differentiable
    bias = torch.cat((self.w_q.bias, self.w_k.bias, self.w_v.bias))
    qkv = F.linear(query, w, bias).view(b, t, 3, self.n_heads, self.d_head)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, T, d_head) each
    if self.rope is not None:
        cos, sin = rope_angles if rope_angles is not None else self.rope.angles(0, t)
        q, k = self.rope.rotate(q, cos, sin), self.rope.rotate(k, cos, sin)
    p = self.dropout if self.training else 0.0
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal and mask is None)
    return self.w_o(out.transpose(1, 2).reshape(b, t, self.d_model)), None


def kv_buffer_comparison(reps: int = 9) -> None:
    """Cached 256-token char-lm decode: the shipped KVCache vs BufferKVCache (CPU time, alternating)."""
    from bench.decoding import NEW_TOKENS, PROMPT, _model, lm_config
    from tui_lab.core.decoding.decode import generate
    from tui_lab.core.tasks import make_task

    config, _ = lm_config()
    task = make_task(config.task)
    shipped, buffered = _model(config, task), _model(config, task)

    def new_cache(self: Any) -> DecoderCache:
        return DecoderCache(self_attn=[BufferKVCache() for _ in self.decoder.layers])

    buffered.new_cache = types.MethodType(new_cache, buffered)
    models = {"shipped": shipped, "buffer": buffered}

    def run(name: str) -> list[int]:
        return generate(models[name], task, PROMPT, max_new_tokens=NEW_TOKENS, capture=False).tokens

    assert run("shipped") == run("buffer"), "the buffered cache decodes differently"
    times: dict[str, list[float]] = {k: [] for k in models}
    for r in range(reps):
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            c0 = time.process_time()
            run(name)
            times[name].append(time.process_time() - c0)
    for name, ts in times.items():
        print(f"{name:8s} {statistics.median(ts) / NEW_TOKENS * 1000:6.3f} ms/token (median CPU time of {reps})")
    ratio = statistics.median(s / b for s, b in zip(times["shipped"], times["buffer"], strict=True))
    print(f"buffer speed / shipped speed: {ratio:.3f} (median of pairs)")


def training_comparison(budget_s: float = 40.0) -> None:
    """The training-speed items' measurement with a third contender: the lab model with packed projections."""
    import random

    from bench.common import interleaved
    from bench.throughput import _contender, _models
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.model.models import build_model
    from tui_lab.core.tasks import make_task

    for preset in ("copy", "char-lm"):
        config = load_preset(preset).with_values({"model.dropout": 0.0})
        if preset == "char-lm":
            config = config.with_values({"model.positional": "sinusoidal"})
        task = make_task(config.task)
        rng = random.Random(0)
        batches = [task.batch(rng, config.train.batch_size, config.model.arch) for _ in range(16)]
        lab, ref = _models(config, len(task.vocab))
        torch.manual_seed(0)
        packed: nn.Module = build_model(config.model, len(task.vocab))
        for mod in packed.modules():
            if isinstance(mod, MultiHeadAttention):
                mod.forward = types.MethodType(_packed_training_forward, mod)  # type: ignore[method-assign]
        res = interleaved(
            [_contender("lab", lab, config, batches), _contender("torch", ref, config, batches),
             _contender("lab_packed", packed, config, batches)],
            reference="torch", budget_s=budget_s,
        )
        for name in ("lab", "lab_packed"):
            r = res[name]
            print(f"{preset} {name:11s} vs torch: median of rounds {r['ratio']:.3f} "
                  f"(range {r['ratio_min']:.2f}-{r['ratio_max']:.2f}), best windows {r['ratio_best_windows']:.3f}; "
                  f"{res['rounds']} rounds, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    what, arg = (sys.argv[1:2] or [""])[0], sys.argv[2:3]
    if what == "kv-buffer":
        torch.set_num_threads(1)
        kv_buffer_comparison(int(arg[0]) if arg else 9)
    elif what == "training":
        torch.set_num_threads(int(arg[0]) if arg else 1)
        training_comparison()
    else:
        sys.exit(__doc__)
