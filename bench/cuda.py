"""Item 7 (CUDA only): a larger decoder-only model, fast path vs plain fp32.

Contenders, trained with the same step as items 1-2 on the same random batches:

- ``fp32``: fp32 weights and activations, attention written out (the explicit
  ``softmax(q k^T) v`` path, as ``train.fused_attention: false`` sets it),
  TF32 matmuls off (PyTorch's default);
- ``bf16``: bf16 autocast (``device.autocast_context``) and the fused
  ``F.scaled_dot_product_attention`` path (the lab's default);
- ``bf16+compile``: the same under ``torch.compile`` (optional: skipped with a
  note if compilation fails).

MFU = achieved model FLOPs / the GPU's dense bf16 peak, with model FLOPs per
token = 6 N (N = non-embedding parameters) + 12 L T d (attention scores and
weighted sums, forward + backward), the PaLM appendix formula.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import torch

from bench.common import Row, Section
from tui_lab.core.attention import MultiHeadAttention
from tui_lab.core.device import autocast_context
from tui_lab.core.models import build_model
from tui_lab.core.presets import load_preset
from tui_lab.core.schedule import make_optimizer

# Dense bf16 peak (TFLOP/s, no sparsity) by a substring of the device name.
PEAK_BF16_TFLOPS = {
    "H200": 989.0, "H100": 989.0, "H800": 989.0, "GH200": 989.0, "B200": 2250.0,
    "A100": 312.0, "A800": 312.0, "A10G": 70.0, "A10": 125.0, "L40S": 362.0, "L40": 181.0,
    "L4": 121.0, "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0, "T4": 65.0,
}

LARGE = {
    "model.d_model": 768, "model.n_heads": 12, "model.n_decoder_layers": 12, "model.d_ff": 3072,
    "model.dropout": 0.0, "model.positional": "rope", "model.max_len": 1024,
    "task.block_size": 1024, "train.batch_size": 16,
}
SMALL = {  # for checking the code path on a CPU (--cuda-section-on-cpu)
    "model.d_model": 64, "model.n_heads": 4, "model.n_decoder_layers": 2, "model.d_ff": 256,
    "model.dropout": 0.0, "model.max_len": 64, "task.block_size": 64, "train.batch_size": 4,
}


def _peak(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key in name:
            return tflops * 1e12
    return None


def _flops_per_token(model: torch.nn.Module, config: Any) -> float:
    n = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name)
    m = config.model
    return 6 * n + 12 * m.n_decoder_layers * config.task.block_size * m.d_model


def cuda_bench(quick: bool, device: str = "cuda") -> Section:
    sec = Section("cuda", "7. CUDA: larger decoder-only, bf16 + fused attention (+ compile) vs fp32")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sec.values = {"cuda": "skipped: no CUDA"}
        sec.rows.append(Row("CUDA section", "skipped: no CUDA", "", None, "runs only where torch.cuda.is_available()"))
        return sec
    config = load_preset("char-lm").with_values(LARGE if dev.type == "cuda" else SMALL)
    vocab = 128
    gen = torch.Generator().manual_seed(0)
    b, t = config.train.batch_size, config.task.block_size
    batches = []
    for _ in range(4):
        seq = torch.randint(5, vocab, (b, t + 1), generator=gen)
        batches.append(SimpleNamespace(tgt_in=seq[:, :-1].to(dev), tgt_out=seq[:, 1:].to(dev), src=None))
    steps = 10 if quick else 30

    def contender(precision: str, explicit: bool, compile_: bool) -> dict[str, Any]:
        torch.manual_seed(0)
        model = build_model(config.model, vocab).to(dev)
        if explicit:
            for mod in model.modules():
                if isinstance(mod, MultiHeadAttention):
                    mod.fused = False  # what train.fused_attention: false does
        fwd = torch.compile(model) if compile_ else model
        opt = make_optimizer(model, config.train)

        def step(batch: Any) -> None:
            with autocast_context(dev, precision):
                logits = fwd(batch.tgt_in)
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_out.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        for i in range(3):  # warm-up (and compilation)
            step(batches[i % len(batches)])
        _sync(dev)
        t0 = time.perf_counter()
        for i in range(steps):
            step(batches[i % len(batches)])
        _sync(dev)
        dt = time.perf_counter() - t0
        tps = steps * b * t / dt
        peak = _peak(dev)
        flops = _flops_per_token(model, config)
        return {"tokens_per_s": round(tps, 1), "mfu": None if peak is None else round(tps * flops / peak, 4)}

    results: dict[str, Any] = {}
    for name, args in (("fp32", ("fp32", True, False)), ("bf16_fused", ("bf16", False, False)),
                       ("bf16_fused_compile", ("bf16", False, True))):
        try:
            results[name] = contender(*args)
        except Exception as exc:  # noqa: BLE001 - compile is optional; report why it failed
            results[name] = {"error": str(exc).splitlines()[0][:200]}
    m = config.model
    sizes = f"d_model {m.d_model}, {m.n_heads} heads, {m.n_decoder_layers} layers, d_ff {m.d_ff}, batch {b} x {t}"
    base = results["fp32"].get("tokens_per_s")
    sec.values = {"cuda": results, "cuda_device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev),
                  "cuda_sizes": sizes}
    for name, r in results.items():
        if "error" in r:
            sec.rows.append(Row(f"{name}", "failed", "", None, r["error"]))
            continue
        speed = f"{r['tokens_per_s'] / base:.2f}x fp32" if base else ""
        mfu = "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}"
        sec.rows.append(Row(f"{name} tokens/s", f"{r['tokens_per_s']:,.0f}", "", None, f"{speed}; MFU {mfu}; {sizes}"))
    return sec


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
