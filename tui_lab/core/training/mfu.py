"""Model FLOPs utilisation: the model's FLOPs per second as a fraction of what this
machine's matrix multiply reaches.

The peak is measured, not looked up: a short probe times a few large fp32
matrix products (``PROBE_SIZE`` square, best of ``PROBE_REPEATS``; on a CPU by
its CPU time per thread where that is less than the wall time, so a machine
others load at that moment is not taken for a slower one) on the device with
the threads training uses, and keeps the best result in the user's
cache folder (``platformdirs``), keyed by the processor's model name, the
thread count, the device and the torch version. Each process probes once (a
fraction of a second) and the cache keeps the higher figure: a probe made while
other work held the cores (CPU time per thread still runs slow when a sibling
hyperthread is busy: 88 against 100 GFLOP/s here) cannot pin the peak low, which
would overstate every MFU after it. The model's FLOPs per token are the lab's own count
(``core/model/params.py``: training = 3 x inference, at the task's sequence
length), so MFU = tokens/s x FLOPs per token / peak. An encoder-decoder's count
is per source-and-target token pair, and its tokens/s counts both, hence the
halving. The figure is the model's useful work, as PaLM defines MFU: a
recomputation or a padded position the model did not need is not counted.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.params import parameter_report

PROBE_SIZE = 1024
PROBE_REPEATS = 5
CACHE_FILE = "matmul_peak.json"


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``'s on Linux), or what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def probe_key(device: torch.device) -> str:
    """What a measured peak depends on: the processor (or GPU), threads, device, torch."""
    if device.type == "cuda":
        what = torch.cuda.get_device_name(device)
    else:
        what = cpu_model()
    return f"{what} | {torch.get_num_threads()} threads | {device.type} | torch {torch.__version__}"


def measure_peak(device: torch.device, size: int = PROBE_SIZE, repeats: int = PROBE_REPEATS) -> float:
    """fp32 matmul FLOP/s on ``device``: the best of ``repeats`` timed ``size``-square products."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    torch.mm(a, b)  # the first call pays for the kernel's setup
    best = float("inf")
    threads = max(1, torch.get_num_threads())
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0, c0 = time.perf_counter(), time.process_time()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - t0
        # On a CPU others share, the product waits for cores: its CPU time spread over the
        # threads is what it took when it ran (never more than the wall time).
        cpu = (time.process_time() - c0) / threads if device.type == "cpu" else wall
        best = min(best, min(wall, cpu) if cpu > 0 else wall)
    return 2 * size**3 / best


def cache_path() -> Path:
    """The probe's cache file in the user's cache folder (``$TFX_LAB_CACHE`` overrides it)."""
    from platformdirs import user_cache_dir

    return Path(os.environ.get("TFX_LAB_CACHE") or user_cache_dir("tfx-lab")) / CACHE_FILE


def _read_cache(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}


# The machine keys this process has probed: later calls read the cache alone.
_PROBED: set[str] = set()


def matmul_peak(device: torch.device) -> float:
    """This machine's fp32 matmul FLOP/s on ``device``: the best the cache holds and, once per
    process, a fresh probe (the higher of the two is kept).

    A cache that cannot be written (a read-only home) only costs the probe again.
    """
    path, key = cache_path(), probe_key(device)
    known = _read_cache(path)
    cached = known.get(key, 0.0)
    if key in _PROBED and cached > 0:
        return cached
    _PROBED.add(key)
    peak = max(measure_peak(device), cached)
    if peak == cached:
        return peak
    known[key] = peak
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass
    return peak


def train_flops_per_token(config: LabConfig, vocab_size: int) -> int:
    """Training FLOPs per token the lab counts (params.py) at the task's sequence length."""
    context = min(config.sequence_length_needed(), config.model.max_len)
    return parameter_report(config.model, vocab_size, max(context, 1)).train_flops_per_token


def achieved_flops(config: LabConfig, flops_per_token: int, tokens_per_s: float) -> float:
    """Model FLOP/s at ``tokens_per_s`` (as the loop counts tokens: source and target)."""
    pairs = 2 if config.model.shape is Shape.ENCODER_DECODER else 1
    return flops_per_token * tokens_per_s / pairs


def mfu(config: LabConfig, flops_per_token: int, tokens_per_s: float, peak: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the measured peak."""
    return achieved_flops(config, flops_per_token, tokens_per_s) / peak if peak > 0 else 0.0
