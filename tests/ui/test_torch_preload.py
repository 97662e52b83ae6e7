"""``torch_preload``: torch's C++ library mapped ahead of ``import torch``, torch untouched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tui_lab.ui import torch_preload

CHILD = r"""
import sys
from tui_lab.ui import torch_preload
thread = torch_preload.start()
thread.join(60)
maps = open("/proc/self/maps").read()
assert "libtorch_cpu.so" in maps, "the library is not mapped"
assert "torch" not in sys.modules, "torch itself was imported"
import torch
assert float(torch.ones(3).sum()) == 3.0
print("ok")
"""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps (Linux)")
def test_the_library_is_mapped_without_importing_torch_and_torch_then_imports() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_library_is_found_where_torch_lies() -> None:
    import torch

    path = torch_preload.library_path()
    assert path is not None and path.parent == Path(torch.__file__).parent / "lib"


def test_no_torch_means_nothing_to_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_preload.importlib.util, "find_spec", lambda name: None)
    assert torch_preload.library_path() is None
    assert torch_preload.start() is None
