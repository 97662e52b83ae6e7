"""Device choice, precision and thread count on this (CPU-only) machine."""

from __future__ import annotations

import contextlib
import os

import pytest
import torch

from tui_lab.core.errors import LabError
from tui_lab.core.model import device as dev
from tui_lab.core.model.device import (
    DeviceError,
    autocast_context,
    choose_device,
    default_threads,
    describe,
    resolve_precision,
    set_threads,
    threads_set_to,
)

needs_no_gpu = pytest.mark.skipif(
    torch.cuda.is_available() or dev._mps_available(), reason="machine has a GPU"
)


@needs_no_gpu
def test_auto_is_cpu_here() -> None:
    assert choose_device("auto") == torch.device("cpu")
    assert choose_device("cpu") == torch.device("cpu")


@needs_no_gpu
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "mps"])
def test_explicit_gpu_that_is_absent_is_a_one_line_error(name: str) -> None:
    with pytest.raises(DeviceError) as info:
        choose_device(name)
    message = str(info.value)
    assert "\n" not in message and name in message and "cpu" in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, LabError)


def test_auto_prefers_cuda_then_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dev, "_mps_available", lambda: True)
    assert choose_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert choose_device("auto") == torch.device("cuda", 0)


def test_unknown_device_name_is_refused() -> None:
    with pytest.raises(DeviceError, match="not one of"):
        choose_device("tpu")


def test_precision_on_cpu_is_fp32_unless_bf16_is_asked() -> None:
    cpu = torch.device("cpu")
    assert resolve_precision(cpu, "auto") == "fp32"
    assert resolve_precision(cpu, "fp32") == "fp32"
    assert resolve_precision(cpu, "bf16") == "bf16"
    assert isinstance(autocast_context(cpu, "auto"), contextlib.nullcontext)
    with autocast_context(cpu, "bf16"):
        out = torch.ones(2, 3) @ torch.ones(3, 2)
    assert out.dtype == torch.bfloat16
    with autocast_context(cpu, "auto"):
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32
    with pytest.raises(DeviceError):
        resolve_precision(cpu, "fp16")


def test_precision_auto_on_cuda_is_bf16_when_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_precision(torch.device("cuda", 0), "auto") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Old GPU")
    assert resolve_precision(torch.device("cuda", 0), "auto") == "fp32"
    with pytest.raises(DeviceError, match="Old GPU"):
        resolve_precision(torch.device("cuda", 0), "bf16")


def test_default_threads_is_within_the_cpu_count() -> None:
    n = default_threads()
    assert 1 <= n <= (os.cpu_count() or 1)


def test_set_threads_zero_uses_the_default_and_explicit_counts_stick() -> None:
    with threads_set_to(0) as n:
        assert n == default_threads() == torch.get_num_threads()
    with threads_set_to(1) as n:
        assert n == 1 == torch.get_num_threads()
    with pytest.raises(DeviceError):
        set_threads(-1)


def test_describe_labels() -> None:
    with threads_set_to(1):
        assert describe(torch.device("cpu")) == "cpu (1 thread)"
        assert describe(torch.device("cpu"), "bf16") == "cpu (1 thread) bf16"
    assert describe(torch.device("mps")) == "mps fp32"


def test_describe_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    assert describe(torch.device("cuda", 0)) == "cuda:0 NVIDIA H200 bf16"
