"""``open_files(lay_out_later=True)``: the model usable as stored, re-laid once by ``settle``.

The lab shows an opened model before its weights are re-laid for decoding and
re-lays them in the background; whatever runs meanwhile must compute the
reference's numbers, and whoever needs the final tensors (the parameter count,
a tied head once) waits for the one re-laying, which runs once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from bench.hf_factory import save_family
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.pretrained import relayout as layout
from tui_lab.core.pretrained.relayout import PendingLayout, preferred


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("gpt2") / "gpt2"
    return folder, save_family(folder, "gpt2")


def _linear_weights(model: nn.Module) -> list[torch.Tensor]:
    return [m.weight for m in model.modules() if isinstance(m, nn.Linear)]


@torch.no_grad()
def test_the_model_works_before_and_after_its_layout(gpt2: tuple[Path, Any]) -> None:
    folder, reference = gpt2
    loaded = open_files(str(folder), lay_out_later=True)
    model = loaded.model
    tokens = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    expected = reference(tokens).logits
    assert not all(preferred(w) for w in _linear_weights(model))  # as the file stores them
    torch.testing.assert_close(model(tokens), expected, atol=1e-4, rtol=0)

    copied = loaded.settle()
    assert copied > 0
    assert all(preferred(w) for w in _linear_weights(model))
    assert model.lm_head.weight is model.tgt_embed.weight  # tied still
    torch.testing.assert_close(model(tokens), expected, atol=1e-4, rtol=0)
    before = [id(p) for p in model.parameters()]
    assert loaded.settle() == copied  # once: a second call copies nothing more
    assert [id(p) for p in model.parameters()] == before


def test_open_model_lays_out_at_once_by_default(gpt2: tuple[Path, Any]) -> None:
    loaded = open_files(str(gpt2[0]))
    assert all(preferred(w) for w in _linear_weights(loaded.model))
    assert loaded.settle() is None  # nothing was left for later


def test_a_second_caller_waits_for_the_layout_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads ask at once: the layout runs once, and the second returns only after it."""
    started, finish = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow_lay_out(model: nn.Module, release: Any = None) -> int:
        calls.append(1)
        started.set()
        assert finish.wait(10)
        return 123

    monkeypatch.setattr(layout, "lay_out", slow_lay_out)
    pending = PendingLayout(nn.Linear(4, 4), None)
    results: dict[str, int] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", pending()))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.setdefault("second", pending()))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting on the layout in progress
    finish.set()
    first.join(10)
    second.join(10)
    assert results == {"first": 123, "second": 123} and calls == [1]
