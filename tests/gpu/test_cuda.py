"""The CUDA path on a real GPU: bf16 training, fused attention, KV-cache decoding, checkpoints.

Skipped wherever torch sees no CUDA GPU (CI, laptops); ``bench/gpu_check.sh``
runs them on the device machine. Each test is small: the whole file takes
seconds on a GPU, plus one ``torch.compile`` of a tiny model.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.attention import MultiHeadAttention, padding_mask
from tui_lab.core.model.device import autocast_context, choose_device, resolve_precision
from tui_lab.core.model.models import build_model
from tui_lab.core.runs import checkpoint as ckpt
from tui_lab.core.runs.events import DoneEvent, StepEvent
from tui_lab.core.training.train import TrainingRun

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[2]


def _train(cfg, out: Path | None) -> tuple[TrainingRun, list]:
    events: list = []
    run = TrainingRun(cfg, out, on_event=events.append)
    run.run()
    return run, events


def _cuda_config(**train):
    return tiny_config(train={"device": "cuda", **train})


def test_bf16_autocast_training_is_finite(tmp_path):
    cfg = _cuda_config(steps=20, eval_every=10)
    dev = choose_device("cuda")
    assert resolve_precision(dev, cfg.train.precision) == "bf16"  # auto means bf16 on CUDA
    run, events = _train(cfg, tmp_path / "run")
    assert run.device.type == "cuda" and run.device_name.endswith("bf16")
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) == 20
    assert all(math.isfinite(e.loss) and math.isfinite(e.grad_norm) for e in steps)
    assert steps[-1].loss < steps[0].loss
    assert [e for e in events if isinstance(e, DoneEvent)][-1].reason == "finished"
    # Weights stay fp32; the forward pass runs in bf16.
    assert all(p.dtype == torch.float32 and p.is_cuda for p in run.model.parameters())
    src = torch.randint(5, 15, (4, 6), device=dev)
    with autocast_context(dev, "auto"):
        logits = run.model(src, src)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()


@pytest.mark.parametrize("kind", ["plain", "causal", "padding"])
def test_fused_and_explicit_attention_agree_on_cuda(kind):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    mha = MultiHeadAttention(64, 4).to(dev).eval()
    x = torch.randn(3, 11, 64, device=dev)
    mask = None
    if kind == "padding":
        tokens = torch.randint(5, 9, (3, 11), device=dev)
        tokens[1, 7:] = 0
        tokens[2, 3:] = 0
        mask = padding_mask(tokens, 0)  # (B, 1, 1, T)
    causal = kind == "causal"
    with torch.no_grad():
        explicit, weights = mha(x, x, x, mask, need_weights=True, is_causal=causal)
        fused, _ = mha(x, x, x, mask, is_causal=causal)
        assert weights is not None
        torch.testing.assert_close(fused, explicit, atol=1e-4, rtol=1e-4)  # fp32, TF32 off
        # The same module on the CPU gives the same numbers.
        cpu = MultiHeadAttention(64, 4).eval()
        cpu.load_state_dict({k: v.cpu() for k, v in mha.state_dict().items()})
        on_cpu, _ = cpu(x.cpu(), x.cpu(), x.cpu(), None if mask is None else mask.cpu(), is_causal=causal)
        torch.testing.assert_close(on_cpu, explicit.cpu(), atol=1e-4, rtol=1e-4)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            fused_bf16, _ = mha(x, x, x, mask, is_causal=causal)
            explicit_bf16, _ = mha(x, x, x, mask, need_weights=True, is_causal=causal)
        assert fused_bf16.dtype == torch.bfloat16
        torch.testing.assert_close(fused_bf16.float(), explicit.float(), atol=5e-2, rtol=5e-2)
        torch.testing.assert_close(explicit_bf16.float(), explicit.float(), atol=5e-2, rtol=5e-2)


def test_causal_self_attention_can_use_the_flash_kernel():
    """The lab's causal training call (is_causal, no mask) is one FlashAttention accepts in bf16."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    mha = MultiHeadAttention(128, 4).cuda().eval()
    x = torch.randn(2, 64, 128, device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        reference, _ = mha(x, x, x, need_weights=True, is_causal=True)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # raises if flash cannot take the call
            flash, _ = mha(x, x, x, is_causal=True)
    torch.testing.assert_close(flash.float(), reference.float(), atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_kv_cache_greedy_decoding_on_gpu_matches_the_cpu(arch):
    model_cfg = {"arch": arch, "d_model": 64, "n_heads": 4, "d_ff": 128}
    if arch == "decoder-only":
        model_cfg.update(n_decoder_layers=2, positional="rope")
    cfg = tiny_config(model=model_cfg, train={"device": "cuda", "steps": 400, "eval_every": 400,
                                              "lr": 3e-3, "batch_size": 64})
    run, _ = _train(cfg, None)
    cpu_model = build_model(cfg.model, vocab_size=len(run.vocab)).eval()
    cpu_model.load_state_dict({k: v.cpu() for k, v in run.model.state_dict().items()})
    pairs = run.task.held_out(20, 99)
    clear = 0
    for text, _answer in pairs:
        on_cpu = generate(cpu_model, run.task, text, capture=False)
        on_gpu = generate(run.model, run.task, text, capture=False)
        no_cache = generate(run.model, run.task, text, capture=False, use_cache=False)
        assert on_gpu.output == no_cache.output, text
        gaps = [s.top[0][1] - s.top[1][1] for s in on_cpu.steps if len(s.top) > 1]
        if min(gaps) < 1e-3:
            continue  # a near tie: fp32 rounding on either device may pick the other token
        clear += 1
        assert on_gpu.output == on_cpu.output, (text, on_cpu.output, on_gpu.output)
        for a, b in zip(on_cpu.steps, on_gpu.steps, strict=True):
            assert abs(a.prob - b.prob) < 1e-3
    assert clear >= 15


def test_gpu_saved_checkpoint_loads_and_decodes_on_the_cpu(tmp_path):
    out = tmp_path / "gpu-run"
    run, _ = _train(_cuda_config(steps=30, eval_every=30), out)
    cpu_model = build_model(run.config.model, vocab_size=len(run.vocab))
    ckpt.load_weights(out, cpu_model)
    for name, value in run.model.state_dict().items():
        assert torch.equal(cpu_model.state_dict()[name], value.cpu()), name
    expected = generate(run.model, run.task, "31415", capture=False).output
    # A process that sees no GPU at all, through the command line.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "tui_lab.cli", "decode", "--run", str(out), "--input", "31415", "--json"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["output"] == expected


def test_compiled_training_runs_on_cuda(tmp_path):
    """train.compile: true (opt-in) on a GPU: torch.compile of the lab's model trains."""
    run, events = _train(_cuda_config(steps=5, eval_every=5, compile=True), tmp_path / "run")
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) == 5 and all(math.isfinite(e.loss) for e in steps)
    assert [e for e in events if isinstance(e, DoneEvent)][-1].reason == "finished"
