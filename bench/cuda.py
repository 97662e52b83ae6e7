"""The ``cuda`` item of ``python -m bench`` (CUDA only): a larger decoder-only model, fast path vs plain fp32.

Contenders, trained with the same step as the two training-speed items on the same random batches:

- ``fp32``: fp32 weights and activations, attention written out (the explicit
  ``softmax(q k^T) v`` path, as ``train.fused_attention: false`` sets it),
  TF32 matmuls off (PyTorch's default);
- ``fp32_fused`` and ``bf16_explicit``: one change each, to show which of the
  two (kernel or precision) the speed-up comes from;
- ``bf16_fused``: bf16 autocast (``device.autocast_context``) and the fused
  ``F.scaled_dot_product_attention`` path (the lab's default on CUDA);
- ``bf16_fused_compile``: the same under ``torch.compile`` (optional: a failure
  is reported, not raised; not tried on the CPU, where it would only cost time).

MFU = achieved model FLOPs / the GPU's dense bf16 peak (the spec sheet's, no
sparsity: 989 TFLOP/s on an H100/H200), with model FLOPs per token = 6 N
(N = non-embedding parameters) + 12 L T d (attention scores and weighted sums,
forward + backward, causal masking not discounted), the PaLM appendix formula.
The bf16 matrix-product rate this GPU reaches (8192^3 products) is measured
and reported beside it, so the MFU can also be read against what is attainable.

The module is also a command for ``bench/gpu_check.sh`` (``python -m bench.cuda``):

- ``decode-compare --run DIR [--device cuda]``: greedy decoding with the KV
  cache of a run's model on the device against the same weights on the CPU
  (and against decoding without the cache), on held-out inputs;
- ``ddp --out DIR [--device cuda] [--steps N]``: run under
  ``torchrun --nproc_per_node=1``; trains through the lab's own
  ``TrainingRun`` with DistributedDataParallel switched on at world size 1 (the
  lab turns DDP on only from 2 processes, and NCCL refuses two ranks on one
  GPU), so NCCL initialisation, DDP's gradient all-reduce and the lab's
  ``any_rank`` collective all run on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Any

import torch

from bench.common import Row, Section
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.device import autocast_context
from tui_lab.core.model.models import build_model
from tui_lab.core.training.schedule import make_optimizer

# Dense bf16 peak (TFLOP/s, no sparsity) by a substring of the device name; first match wins.
PEAK_BF16_TFLOPS = {
    "H200": 989.0, "H100": 989.0, "H800": 989.0, "GH200": 989.0, "B200": 2250.0,
    "A100": 312.0, "A800": 312.0, "A10G": 70.0, "A10": 125.0, "L40S": 362.0, "L40": 181.0,
    "L4": 121.0, "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0, "T4": 65.0,
}
SPEEDUP_GOAL = 2.0  # bf16 + fused at least this many times fp32 explicit

LARGE = {
    "model.d_model": 768, "model.n_heads": 12, "model.n_decoder_layers": 12, "model.d_ff": 3072,
    "model.dropout": 0.0, "model.positional": "rope", "model.max_len": 1024,
    "task.block_size": 1024, "train.batch_size": 16,
}
SMALL = {  # for checking the code path on a CPU (--cuda-section-on-cpu)
    "model.d_model": 64, "model.n_heads": 4, "model.n_decoder_layers": 2, "model.d_ff": 256,
    "model.dropout": 0.0, "model.max_len": 64, "task.block_size": 64, "train.batch_size": 4,
}
# name -> (precision, explicit attention, torch.compile); fp32 is the reference.
CONTENDERS = {
    "fp32": ("fp32", True, False),
    "fp32_fused": ("fp32", False, False),
    "bf16_explicit": ("bf16", True, False),
    "bf16_fused": ("bf16", False, False),
    "bf16_fused_compile": ("bf16", False, True),
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


def matmul_tflops(device: torch.device, n: int = 8192, reps: int = 10) -> float:
    """The bf16 matrix-product rate this GPU reaches (n x n x n, random data), TFLOP/s."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


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
    min_steps = 10 if quick else 30
    min_seconds = 0.0 if dev.type != "cuda" else (1.0 if quick else 3.0)
    peak = _peak(dev)

    def contender(precision: str, explicit: bool, compile_: bool) -> dict[str, Any]:
        torch.manual_seed(0)
        model = build_model(config.model, vocab).to(dev)
        if explicit:
            for mod in model.modules():
                if isinstance(mod, MultiHeadAttention):
                    mod.fused = False  # what train.fused_attention: false does
        fwd = torch.compile(model) if compile_ else model
        opt = make_optimizer(model, config.train)
        losses: list[torch.Tensor] = []

        def step(batch: Any) -> None:
            with autocast_context(dev, precision):
                logits = fwd(batch.tgt_in)
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_out.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.detach())

        t_first = time.perf_counter()
        for i in range(3):  # warm-up (and compilation)
            step(batches[i % len(batches)])
        _sync(dev)
        warmup_s = time.perf_counter() - t_first
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        steps = 0
        while steps < min_steps or (time.perf_counter() - t0 < min_seconds and steps < 500):
            step(batches[steps % len(batches)])
            steps += 1
            if steps >= min_steps and min_seconds:
                _sync(dev)  # the clock must see finished work before it decides to stop
        _sync(dev)
        dt = time.perf_counter() - t0
        tps = steps * b * t / dt
        flops = _flops_per_token(model, config)
        last = float(losses[-1])
        out: dict[str, Any] = {
            "tokens_per_s": round(tps, 1),
            "mfu": None if peak is None else round(tps * flops / peak, 4),
            "model_tflops": round(tps * flops / 1e12, 2),
            "steps": steps,
            "warmup_s": round(warmup_s, 2),
            "final_loss": round(last, 4),
        }
        if last != last or last in (float("inf"), float("-inf")):
            out["error"] = f"loss not finite ({last})"
        if dev.type == "cuda":
            out["peak_mem_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 2)
        return out  # model, optimizer and compiled graph go with this frame

    results: dict[str, Any] = {}
    for name, (precision, explicit, compile_) in CONTENDERS.items():
        if compile_ and dev.type != "cuda":
            results[name] = {"skipped": "torch.compile is tried on CUDA only"}
            continue
        try:
            results[name] = contender(precision, explicit, compile_)
        except Exception as exc:  # noqa: BLE001 - compile is optional, OOM is a finding; report why
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            results[name] = {"error": f"{type(exc).__name__}: {first}"}
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    m = config.model
    with torch.device("meta"):
        n_params = sum(p.numel() for p in build_model(m, vocab).parameters())
    sizes = (f"d_model {m.d_model}, {m.n_heads} heads, {m.n_decoder_layers} layers, d_ff {m.d_ff}, "
             f"batch {b} x {t}, {n_params / 1e6:.1f} M params")
    base = results["fp32"].get("tokens_per_s")
    for r in results.values():
        if base and "tokens_per_s" in r:
            r["speedup_vs_fp32"] = round(r["tokens_per_s"] / base, 2)
    measured_peak = None
    if dev.type == "cuda":
        try:
            measured_peak = round(matmul_tflops(dev), 1)
        except Exception:  # noqa: BLE001 - informational only
            measured_peak = None
    sec.values = {
        "cuda": results,
        "cuda_device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev),
        "cuda_sizes": sizes,
        "cuda_peak_bf16_tflops": None if peak is None else peak / 1e12,
        "cuda_matmul_bf16_tflops_measured": measured_peak,
        "cuda_torch": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cuda_fp32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    peak_note = ("no dense bf16 peak known for this device" if peak is None else
                 f"MFU vs {peak / 1e12:.0f} TFLOP/s dense bf16 peak"
                 + (f" (8192^3 bf16 matmul measured here: {measured_peak} TFLOP/s)" if measured_peak else ""))
    for name, r in results.items():
        if "skipped" in r:
            sec.rows.append(Row(name, "skipped", "", None, r["skipped"]))
            continue
        if "error" in r and "tokens_per_s" not in r:
            sec.rows.append(Row(name, "failed", "", None, r["error"]))
            continue
        speed = f"{r['speedup_vs_fp32']:.2f}x fp32" if "speedup_vs_fp32" in r else ""
        mfu = "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}"
        goal, ok = "", None
        if name == "bf16_fused" and "speedup_vs_fp32" in r and dev.type == "cuda":
            goal, ok = f">= {SPEEDUP_GOAL:.0f}x fp32", r["speedup_vs_fp32"] >= SPEEDUP_GOAL
        extra = f"; {r['error']}" if "error" in r else ""
        sec.rows.append(Row(f"{name} tokens/s", f"{r['tokens_per_s']:,.0f}", goal, ok,
                            f"{speed}; MFU {mfu}{extra}"))
    sec.rows.append(Row("model and peak", "", "", None, f"{sizes}; {peak_note}"))
    return sec


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


# ---- helpers for bench/gpu_check.sh ----------------------------------------------------


def _load_run(run_dir: str, device: str) -> Any:
    """A run's model and task on ``device``: config and weights only (as ``tfx-lab decode``)."""
    from tui_lab.core.opening.from_run import load_for_inference

    return load_for_inference(run_dir, device)


def decode_compare(run_dir: str, device: str = "cuda", n: int = 20, seed: int = 1234) -> dict[str, Any]:
    """Greedy decoding (KV cache) of one run on ``device`` vs on the CPU, on held-out inputs.

    Besides the outputs, each input's first-step logits are compared, and the
    smallest top-1/top-2 probability gap on the CPU is reported: a mismatch at
    a near tie is rounding, a mismatch at a wide gap is a bug.
    """
    from tui_lab.core.decoding.decode import generate

    cpu = _load_run(run_dir, "cpu")
    dev = _load_run(run_dir, device)
    task = cpu.task
    if task.is_lm:
        inputs = task.examples_for_display(n=min(n, 5), seed=seed)
    else:
        inputs = [p[0] for p in task.held_out(n, seed)]
    rows = []
    for text in inputs:
        a = generate(cpu.model, task, text, capture=False)
        g = generate(dev.model, task, text, capture=False)
        g_nocache = generate(dev.model, task, text, capture=False, use_cache=False)
        gaps = [s.top[0][1] - s.top[1][1] for s in a.steps if len(s.top) > 1]
        prob_diff = max((abs(x.prob - y.prob) for x, y in zip(a.steps, g.steps, strict=False)), default=0.0)
        rows.append({
            "input": text, "cpu": a.output, "device": g.output, "device_no_cache": g_nocache.output,
            "same": a.output == g.output, "cache_same": g.output == g_nocache.output,
            "answer_ok": None if task.is_lm else a.output == task.solve(text),
            "min_top_gap_cpu": round(min(gaps), 4) if gaps else None,
            "max_prob_diff": round(prob_diff, 6),
        })
    same = sum(r["same"] for r in rows)
    return {
        "run": run_dir,
        "device": str(dev.device),
        "inputs": len(rows),
        "same_as_cpu": same,
        "cache_same_as_no_cache": sum(r["cache_same"] for r in rows),
        "cpu_exact_match": None if task.is_lm else sum(bool(r["answer_ok"]) for r in rows) / len(rows),
        "max_prob_diff": max(r["max_prob_diff"] for r in rows),
        "ok": same == len(rows) and all(r["cache_same"] for r in rows),
        "rows": rows,
    }


def ddp_check(out_dir: str, device: str = "cuda", steps: int = 60, preset: str = "copy") -> dict[str, Any]:
    """The lab's data-parallel path under torchrun, forced on at world size 1 (see the module docstring)."""
    import torch.distributed as dist

    from tui_lab.core.training import distributed
    from tui_lab.core.training.train import TrainingRun

    class _Forced(distributed.DistInfo):
        @property
        def enabled(self) -> bool:  # the lab enables DDP from world size 2; force it at 1
            return True

    real_from_env, real_init = distributed.from_environment, distributed.init
    seen: dict[str, Any] = {}

    def from_environment() -> distributed.DistInfo:
        info = real_from_env()
        return _Forced(info.rank, info.world_size, info.local_rank)

    def init(info: distributed.DistInfo, dev: torch.device) -> torch.device:
        dev = real_init(info, dev)
        seen["backend"] = dist.get_backend() if dist.is_initialized() else None
        seen["world_size"] = dist.get_world_size() if dist.is_initialized() else None
        return dev

    info = real_from_env()
    if info.world_size != 1 or "RANK" not in os.environ:
        raise SystemExit("ddp: run this under torchrun --nproc_per_node=1")
    distributed.from_environment, distributed.init = from_environment, init
    try:
        config = load_preset(preset).with_values({"train.steps": steps, "train.device": device})
        events: list[Any] = []
        run = TrainingRun(config, out_dir, on_event=events.append)
        seen["ddp_wrapped"] = type(run.train_model).__name__
        summary = run.run()
    finally:
        distributed.from_environment, distributed.init = real_from_env, real_init
    losses = [e.loss for e in events if type(e).__name__ == "StepEvent"]
    done = [e for e in events if type(e).__name__ == "DoneEvent"]
    finite = all(x == x and abs(x) != float("inf") for x in losses)
    result = {
        **seen,
        "device": str(run.device),
        "steps": run.step,
        "first_loss": round(losses[0], 4) if losses else None,
        "last_loss": round(losses[-1], 4) if losses else None,
        "done": done[-1].reason if done else None,
        "summary_reason": summary.get("reason") if isinstance(summary, dict) else None,
        "process_group_closed": not dist.is_initialized(),
    }
    want_backend = "nccl" if run.device.type == "cuda" else "gloo"
    result["ok"] = bool(
        losses and finite and result["backend"] == want_backend
        and result["ddp_wrapped"] == "DistributedDataParallel"
        and result["done"] in ("finished", "target") and result["process_group_closed"]
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cuda", description="GPU-check helpers (bench/gpu_check.sh)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("decode-compare", help="greedy decoding on a device vs the CPU")
    s.add_argument("--run", required=True)
    s.add_argument("--device", default="cuda")
    s.add_argument("--n", type=int, default=20)
    s = sub.add_parser("ddp", help="the lab's DDP path at world size 1 (under torchrun)")
    s.add_argument("--out", required=True)
    s.add_argument("--device", default="cuda")
    s.add_argument("--steps", type=int, default=60)
    s.add_argument("--preset", default="copy")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # these models are tiny; the CPU side must not crowd the machine
    if args.cmd == "decode-compare":
        result = decode_compare(args.run, args.device, args.n)
    else:
        result = ddp_check(args.out, args.device, args.steps, args.preset)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
