"""Scratch prototypes of fixes for the missed decoding goals (not used by ``python -m bench``).

Each fix is applied to one model *instance* (bound methods and swapped
sub-modules), so the patched and the shipped model can be timed side by side
in one process. None of this edits ``tui_lab``; it shows what a change in the
core would buy. Run the comparison with

    .venv/bin/python -m bench.prototypes [--reps N]

Fixes prototyped (each maps to a small change in ``tui_lab/core``):

1. ``inference_mode``: decode under ``torch.inference_mode()`` instead of
   ``torch.no_grad()`` (no view/version tracking per op). In the core, the
   RoPE and sinusoid tables that grow during decoding must then be built under
   ``torch.inference_mode(False)``, or a later training step would meet
   inference tensors.
2. ``preallocated KV cache``: ``KVCache.update`` writes into a buffer that
   grows geometrically instead of ``torch.cat`` of the whole history each step.
3. ``rope once per step``: the cos/sin slices for an offset are computed once
   and shared by every layer's q and k (the core slices and casts them 8 times
   per token for a 4-layer model).
4. ``no dropout calls in eval``: ``nn.Dropout`` modules are skipped when not
   training (each is still a dispatched op).
5. ``packed q/k/v``: self-attention projects q, k and v with one ``F.linear``
   on concatenated weights (cached while the weights do not change).
6. ``capture after``: attention for display is computed by one full forward
   pass over the decoded sequence after fast (fused, cached) decoding, instead
   of taking the explicit path at every step. ``generate`` already does this
   for ``use_cache=False``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core import decode as D
from tui_lab.core.attention import KVCache, MultiHeadAttention
from tui_lab.core.capture import capture_attention
from tui_lab.core.models import DecoderCache
from tui_lab.core.positions import RotaryEmbedding
from tui_lab.core.vocab import BOS, SEP


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

    @property
    def filled(self) -> bool:
        return self.k is not None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.static:
            return super().update(k, v)
        n = k.size(-2)
        end = self._len + n
        if self._kbuf is None or end > self._kbuf.size(-2):
            cap = max(64, 2 * end)
            b, h, _, d = k.shape
            kb = k.new_empty(b, h, cap, d)
            vb = v.new_empty(b, h, cap, d)
            if self._kbuf is not None:
                kb[:, :, : self._len] = self._kbuf[:, :, : self._len]
                vb[:, :, : self._len] = self._vbuf[:, :, : self._len]
            self._kbuf, self._vbuf = kb, vb
        self._kbuf[:, :, self._len : end] = k
        self._vbuf[:, :, self._len : end] = v
        self._len = end
        self.k = self._kbuf[:, :, :end]  # views: (B, H, T, d_head)
        self.v = self._vbuf[:, :, :end]
        return self.k, self.v

    def reset(self) -> None:
        super().reset()
        self._kbuf = self._vbuf = None
        self._len = 0


def _rope_forward(self: RotaryEmbedding, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """RoPE with the (offset, T) cos/sin slices cached across the layers of one step."""
    t = x.size(-2)
    key = (offset, t, x.dtype)
    memo = self.__dict__.get("_memo")
    if memo is None or memo[0] != key:
        end = offset + t
        if end > self.cos.size(0):
            with torch.inference_mode(False):
                self.cos, self.sin = self._tables(max(end, 2 * self.cos.size(0)))
        half = self.d_head // 2
        cos = self.cos[offset:end].to(x.dtype)
        sin = self.sin[offset:end]
        sin_signed = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1).to(x.dtype)
        memo = (key, cos, sin_signed)
        self.__dict__["_memo"] = memo
    _, cos, sin_signed = memo
    # rotate_half(x) * sin == flip halves of x, times sin with the first half negated
    return x * cos + x.roll(self.d_head // 2, dims=-1) * sin_signed


def _packed_weights(self: MultiHeadAttention, names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenated weights/biases of the named projections, rebuilt when any of them changes."""
    mods = [getattr(self, n) for n in names]
    versions = tuple(m.weight._version for m in mods) + tuple(m.bias._version for m in mods)
    key = ("_packed", *names)
    memo = self.__dict__.get(key)
    if memo is None or memo[0] != versions or torch.is_grad_enabled():
        w = torch.cat([m.weight for m in mods])
        b = torch.cat([m.bias for m in mods])
        memo = (versions, w, b)
        if not torch.is_grad_enabled():  # keep only for inference (training re-cats each forward)
            self.__dict__[key] = memo
    return memo[1], memo[2]


def _packed_forward(
    self: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    need_weights: bool = False,
    cache: KVCache | None = None,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One packed projection for q/k/v (self) or k/v (cross); capture falls back to the shipped path."""
    if key is not value or self.store is not None or need_weights:
        return MultiHeadAttention.forward(self, query, key, value, mask, need_weights, cache, is_causal)
    b_, t_q, _ = query.shape
    offset = 0 if cache is None or cache.static else cache.length
    if query is key:
        w, b = _packed_weights(self, ("w_q", "w_k", "w_v"))
        qkv = F.linear(query, w, b).view(b_, t_q, 3, self.n_heads, self.d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, T, d_head) each
    else:
        q = self.w_q(query).view(b_, t_q, self.n_heads, self.d_head).transpose(1, 2)
        if cache is not None and cache.static and cache.filled:
            k = v = None
        else:
            w, b = _packed_weights(self, ("w_k", "w_v"))
            t_k = key.size(1)
            kv = F.linear(key, w, b).view(b_, t_k, 2, self.n_heads, self.d_head)
            k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)
    if self.rope is not None:
        q = self.rope(q, offset)
    if k is None:
        k, v = cache.k, cache.v
    else:
        if self.rope is not None:
            k = self.rope(k, offset)
        if cache is not None:
            k, v = cache.update(k, v)
    t_k = k.size(-2)
    fused_causal = is_causal and mask is None and t_q == t_k
    if is_causal and not fused_causal and t_q > 1:
        from tui_lab.core.attention import causal_mask

        c = causal_mask(t_q, t_k, device=q.device)
        mask = c if mask is None else mask & c
    p = self.dropout if self.training else 0.0
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=fused_causal)
    out = out.transpose(1, 2).reshape(b_, t_q, self.d_model)
    return self.w_o(out), None


class _EvalDropout(nn.Dropout):
    """Dropout that is not called at all when it would do nothing (eval, or p == 0)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) if self.training and self.p > 0 else x


def patch(model: nn.Module, which: set[str]) -> nn.Module:
    """Apply the chosen prototype fixes to ``model`` in place (instance level)."""
    if "kv" in which:
        def new_cache(self: Any) -> DecoderCache:
            n = len(self.decoder.layers)
            cross = [BufferKVCache(static=True) for _ in range(n)] if hasattr(self, "encode") else []
            return DecoderCache(self_attn=[BufferKVCache() for _ in range(n)], cross_attn=cross)

        model.new_cache = types.MethodType(new_cache, model)
    for mod in list(model.modules()):
        if "rope" in which and isinstance(mod, RotaryEmbedding):
            mod.forward = types.MethodType(_rope_forward, mod)
        if "qkv" in which and isinstance(mod, MultiHeadAttention):
            mod.forward = types.MethodType(_packed_forward, mod)
        if "dropout" in which:
            for name, child in list(mod.named_children()):
                if type(child) is nn.Dropout:
                    setattr(mod, name, _EvalDropout(child.p))
    return model


def generate_fast(model: nn.Module, task: Any, text: str, *, capture: bool, inference: bool, **kw: Any) -> Any:
    """``decode.generate`` under inference_mode, with capture done in one pass afterwards."""
    body = D.generate.__wrapped__  # the undecorated function
    ctx = torch.inference_mode() if inference else torch.no_grad()
    with ctx:
        result = body(model, task, text, capture=False, **kw)
        if capture:
            ids = task.vocab.encode(result.input)
            decoder_only = D.is_decoder_only(model)
            prompt = (ids if task.is_lm else [*ids, SEP]) if decoder_only else [BOS]
            device = next(model.parameters()).device
            src = torch.tensor([ids], device=device)
            fed = torch.tensor([[*prompt, *result.tokens[:-1]]], device=device)
            was = model.training
            model.eval()
            try:
                with capture_attention(model) as store:
                    if decoder_only:
                        model(fed)
                    else:
                        model.decode(fed, model.encode(src), src)
            finally:
                model.train(was)
            D._attach_attention(result, store, task.vocab, ids, prompt, result.tokens)
    return result


def main(argv: list[str] | None = None) -> None:
    from bench.decoding import NEW_TOKENS, PROMPT, _model, lm_config
    from tui_lab.core.presets import load_preset
    from tui_lab.core.tasks import make_task

    parser = argparse.ArgumentParser(prog="python -m bench.prototypes")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    config, _ = lm_config()
    task = make_task(config.task)
    shipped = _model(config, task)
    fixed = patch(_model(config, task), {"kv", "rope", "dropout", "qkv"})
    gen = D.generate

    def run(model: nn.Module, fast: bool, cache: bool, capture: bool) -> Any:
        kw = dict(max_new_tokens=NEW_TOKENS, use_cache=cache)
        if fast:
            return generate_fast(model, task, PROMPT, capture=capture, inference=True, **kw)
        return gen(model, task, PROMPT, capture=capture, **kw)

    # Identity checks: every variant decodes the same tokens and the same attention.
    base = run(shipped, False, True, True)
    for cache in (True, False):
        assert run(fixed, True, cache, False).tokens == base.tokens, "patched decode differs"
    fast_cap = run(fixed, True, True, True)
    for name, w in base.attention.items():
        torch.testing.assert_close(fast_cap.attention[name], w, atol=1e-5, rtol=1e-4)

    variants = {
        "shipped cache": lambda: run(shipped, False, True, False),
        "shipped no-cache": lambda: run(shipped, False, False, False),
        "shipped cache+capture": lambda: run(shipped, False, True, True),
        "fixed cache": lambda: run(fixed, True, True, False),
        "fixed no-cache": lambda: run(fixed, True, False, False),
        "fixed cache+capture": lambda: run(fixed, True, True, True),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(args.reps):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)

    def med_ratio(a: str, b: str) -> str:
        med = statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))
        med_cpu = statistics.median(x / y for x, y in zip(cpu[a], cpu[b], strict=True))
        best = min(times[a]) / min(times[b])
        return f"{med:.3f} (median of {len(times[a])} pairs; CPU time {med_cpu:.3f}; fastest runs {best:.3f})"

    for name in names:
        print(f"{name:24s} {statistics.median(cpu[name]) / NEW_TOKENS * 1000:7.3f} ms/token (median CPU time)")
    print(f"KV cache speedup: shipped {med_ratio('shipped no-cache', 'shipped cache')}, "
          f"fixed {med_ratio('fixed no-cache', 'fixed cache')}")
    print(f"  fixed no-cache vs shipped no-cache: {med_ratio('shipped no-cache', 'fixed no-cache')}")
    print(f"capture time / plain time: shipped {med_ratio('shipped cache+capture', 'shipped cache')}, "
          f"fixed {med_ratio('fixed cache+capture', 'fixed cache')}")
    print(f"shipped cache time / fixed cache time: {med_ratio('shipped cache', 'fixed cache')}")

    # The copy preset (encoder-decoder) for the capture change alone.
    copy = load_preset("copy")
    ctask = make_task(copy.task)
    cmodel = _model(copy, ctask)
    ct: dict[str, list[float]] = {"plain": [], "shipped capture": [], "capture after": []}
    cc: dict[str, list[float]] = {k: [] for k in ct}
    cv = {
        "plain": lambda: gen(cmodel, ctask, "3141592653", capture=False),
        "shipped capture": lambda: gen(cmodel, ctask, "3141592653", capture=True),
        "capture after": lambda: generate_fast(cmodel, ctask, "3141592653", capture=True, inference=False),
    }
    a, b = gen(cmodel, ctask, "3141592653", capture=True), cv["capture after"]()
    for name, w in a.attention.items():
        torch.testing.assert_close(b.attention[name], w, atol=1e-5, rtol=1e-4)
    for r in range(args.reps * 3):
        for name in (list(cv) if r % 2 == 0 else list(cv)[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            cv[name]()
            ct[name].append(time.perf_counter() - t0)
            cc[name].append(time.process_time() - c0)
    for name in ("shipped capture", "capture after"):
        ratio = statistics.median(x / y for x, y in zip(ct[name], ct["plain"], strict=True))
        rcpu = statistics.median(x / y for x, y in zip(cc[name], cc["plain"], strict=True))
        print(f"copy, {name}: overhead {ratio - 1:+.1%} (median of {len(ct[name])} pairs; CPU time {rcpu - 1:+.1%})")



def ablation(reps: int = 9, threads: int = 1) -> None:
    """Cached 256-token decode: each fix added on top of the previous ones."""
    from bench.decoding import NEW_TOKENS, PROMPT, _model, lm_config
    from tui_lab.core.tasks import make_task

    torch.set_num_threads(threads)
    config, _ = lm_config()
    task = make_task(config.task)
    steps = [("shipped", set(), False), ("+inference_mode", set(), True)]
    acc: set[str] = set()
    for fix in ("kv", "rope", "dropout", "qkv"):
        acc = acc | {fix}
        steps.append((f"+{fix}", set(acc), True))
    models = {name: patch(_model(config, task), fixes) for name, fixes, _ in steps}
    fast = {name: inf for name, _, inf in steps}
    ref = D.generate(models["shipped"], task, PROMPT, max_new_tokens=NEW_TOKENS, capture=False).tokens

    def run(name: str) -> Any:
        return generate_fast(models[name], task, PROMPT, capture=False, inference=fast[name],
                             max_new_tokens=NEW_TOKENS, use_cache=True)

    for name in models:
        assert run(name).tokens == ref, name
    times: dict[str, list[float]] = {k: [] for k in models}
    names = list(models)
    for r in range(reps):
        for name in names[r % len(names):] + names[: r % len(names)]:
            c0 = time.process_time()
            run(name)
            times[name].append(time.process_time() - c0)
    base = statistics.median(times["shipped"])
    for name in names:
        med = statistics.median(times[name])
        print(f"{name:18s} {med / NEW_TOKENS * 1000:6.3f} ms/token (median CPU time of {reps}), "
              f"{base / med:.2f}x the shipped speed")


def training_comparison(budget_s: float = 40.0) -> None:
    """Item 1's measurement with a third contender: the lab model with packed projections."""
    import random

    from bench.common import interleaved
    from bench.throughput import _contender, _models
    from tui_lab.core.models import build_model
    from tui_lab.core.presets import load_preset
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
        fixed = patch(build_model(config.model, len(task.vocab)), {"qkv", "dropout"})
        res = interleaved(
            [_contender("lab", lab, config, batches), _contender("torch", ref, config, batches),
             _contender("lab_packed", fixed, config, batches)],
            reference="torch", budget_s=budget_s,
        )
        for name in ("lab", "lab_packed"):
            r = res[name]
            print(f"{preset} {name:11s} vs torch: median of rounds {r['ratio']:.3f} "
                  f"(range {r['ratio_min']:.2f}-{r['ratio_max']:.2f}), best windows {r['ratio_best_windows']:.3f}; "
                  f"{res['rounds']} rounds, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["ablation"]:
        ablation()
    elif sys.argv[1:2] == ["training"]:
        torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
        training_comparison()
    else:
        main()

