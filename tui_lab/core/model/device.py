"""Where the model runs: device choice, mixed precision and CPU threads.

``auto`` picks the fastest thing present (CUDA, then Apple MPS, then CPU) so
the default preset runs anywhere; an explicit ``cuda`` or ``mps`` that this
machine cannot provide is a user mistake and gets a one-line ``DeviceError``
instead of a deep torch traceback on the first ``.to(device)``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import torch

from tui_lab.core.errors import LabError

B = TypeVar("B")  # a batch: whatever holds src, tgt_in and tgt_out tensors


class DeviceError(LabError):
    """A device or precision this machine cannot provide; ``str()`` is one line."""


def _mps_available() -> bool:
    return bool(torch.backends.mps.is_available())


def choose_device(name: str) -> torch.device:
    """Resolve ``auto``/``cpu``/``cuda``/``cuda:N``/``mps`` to a usable ``torch.device``.

    Checking availability here, once, means the rest of the lab can assume the
    device works.
    """
    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            why = (
                f"this torch build ({torch.__version__}) has no CUDA support"
                if torch.version.cuda is None
                else "no CUDA GPU is visible"
            )
            raise DeviceError(f"device {name!r} is not available: {why}; use auto or cpu")
        try:
            dev = torch.device(name)
        except RuntimeError:
            raise DeviceError(f"device {name!r}: not a device name (try cuda or cuda:0)") from None
        index = 0 if dev.index is None else dev.index
        count = torch.cuda.device_count()
        if index >= count:
            raise DeviceError(
                f"device {name!r} is not available: this machine has {count} CUDA GPU(s); "
                f"use cuda:0 to cuda:{count - 1}"
            )
        return torch.device("cuda", index)
    if name == "mps":
        if not _mps_available():
            raise DeviceError(
                "device 'mps' is not available: Apple Metal (MPS) is not present; use auto or cpu"
            )
        return torch.device("mps")
    raise DeviceError(f"device {name!r}: not one of auto, cpu, cuda, cuda:N, mps")


def resolve_precision(device: torch.device, precision: str) -> str:
    """``"bf16"`` or ``"fp32"``: what ``precision`` means on ``device``.

    ``auto`` is bf16 only on CUDA GPUs that support it: there it roughly
    doubles matmul throughput at no cost in accuracy for models this size.
    On CPU and MPS bf16 autocast is usually slower than fp32, so it is used
    only when asked for by name.
    """
    if precision not in ("auto", "fp32", "bf16"):
        raise DeviceError(f"precision {precision!r}: not one of auto, fp32, bf16")
    if precision == "fp32":
        return "fp32"
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
        if precision == "bf16" and not supported:
            raise DeviceError(
                f"precision 'bf16' is not supported by {torch.cuda.get_device_name(device)}; "
                "use auto or fp32"
            )
        return "bf16" if supported else "fp32"
    return "bf16" if precision == "bf16" else "fp32"


def autocast_context(
    device: torch.device, precision: str
) -> contextlib.AbstractContextManager[None]:
    """The context to run forward passes (and the loss) under.

    A ``nullcontext`` when the resolved precision is fp32, so the CPU default
    path has no autocast overhead; otherwise bf16 ``torch.autocast`` for the
    device type. Weights and optimizer state stay fp32 either way.
    """
    if resolve_precision(device, precision) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _affinity_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _physical_cores(cpus: list[int]) -> int | None:
    """Distinct (package, core) pairs among ``cpus``, from Linux sysfs; None elsewhere."""
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return None
        cores.add((package, core))
    return len(cores) or None


def _cgroup_cpu_limit() -> int | None:
    """CPUs a container's cgroup v2 quota allows (``cpu.max``), rounded up; None if unlimited."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def default_threads() -> int:
    """Physical cores this process may use, never more than ``os.cpu_count()``.

    Hyper-threads share one core's matmul units, so counting them makes
    torch's intra-op threads fight; a container quota or CPU affinity mask
    below the core count wins too, or threads would be descheduled mid-matmul.
    """
    cpus = _affinity_cpus()
    count = _physical_cores(cpus) or len(cpus)
    limit = _cgroup_cpu_limit()
    if limit is not None:
        count = min(count, limit)
    return max(1, min(count, os.cpu_count() or count))


# Below this many parameters a step is a chain of tiny matrix products that
# threads cannot split profitably; measured here, a second thread made the copy
# preset's step no faster alone and up to 6x slower when another process
# (the lab's UI thread, a second job) wanted the other core.
SMALL_MODEL_PARAMS = 2_000_000


def set_threads(n: int, n_params: int | None = None) -> int:
    """Set torch's intra-op thread count; returns it.

    ``0`` means automatic: one thread for small models, ``default_threads()``
    otherwise (or when the size is not known).
    """
    if n < 0:
        raise DeviceError(f"threads: must be >= 0, got {n}")
    small = n_params is not None and n_params < SMALL_MODEL_PARAMS
    count = n or (1 if small else default_threads())
    torch.set_num_threads(count)
    return count


def describe(device: torch.device, precision: str = "auto") -> str:
    """A short label for the metrics panel, e.g. ``cpu (2 threads)`` or ``cuda:0 NVIDIA H200 bf16``."""
    resolved = resolve_precision(device, precision)
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index} {torch.cuda.get_device_name(index)} {resolved}"
    if device.type == "cpu":
        n = torch.get_num_threads()
        text = f"cpu ({n} thread{'' if n == 1 else 's'})"
        return f"{text} bf16" if resolved == "bf16" else text
    return f"{device.type} {resolved}"


@contextlib.contextmanager
def threads_set_to(n: int) -> Iterator[int]:
    """Temporarily change torch's thread count (used by tests and benchmarks)."""
    before = torch.get_num_threads()
    try:
        yield set_threads(n)
    finally:
        torch.set_num_threads(before)


def bulk_threads(busy: bool = False) -> contextlib.AbstractContextManager[int]:
    """Every core for a long pass over many tokens (an SAE's training, a feature table),
    then back: a small model decodes on one thread (``set_threads``), but batches of
    thousands of tokens split well (measured here: a char-lm table over 200,000
    tokens took 6.6 s on two threads against 11.9 s on one). ``busy``: a training
    process wants the cores, so the pass keeps to one."""
    return threads_set_to(1 if busy else 0)


def to_device(batch: B, device: torch.device) -> B:
    """Move a batch's ``src``, ``tgt_in`` and ``tgt_out`` tensors to ``device`` (in place)."""
    if device.type == "cpu":
        return batch
    for name in ("src", "tgt_in", "tgt_out"):
        value = getattr(batch, name, None)
        if value is not None:
            setattr(batch, name, value.to(device, non_blocking=True))
    return batch
