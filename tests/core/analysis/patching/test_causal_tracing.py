"""Causal tracing: without noise every restored run is the clean run (1 everywhere); with
noise, a batched trace equals restoring one (token, layer) by hand in each of the same
noisy samples; the trace is seeded."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.patching.causal_tracing import causal_trace, embedding_std, subject_span
from tui_lab.core.opening.model_in_hand import open_model

TEXT = "tdkywbzxtdk"


@pytest.fixture(scope="module")
def lab() -> Any:
    return open_model(DATA / "induction-run")


def test_no_noise_gives_one_everywhere(lab: Any) -> None:
    ids = lab.to_tokens(TEXT)
    result = causal_trace(lab, ids, (0, 3), lab.task.vocab.encode("y")[0], noise=0.0, samples=2)
    assert result.corrupt == pytest.approx(result.clean, abs=1e-6)
    for kind in ("resid", "attn"):  # attention-only: no MLP to restore
        values = torch.tensor(result.values[kind])
        assert values.shape == (len(TEXT), 2)
        torch.testing.assert_close(values, torch.ones_like(values), atol=1e-5, rtol=0)
    assert "mlp" not in result.values


def test_a_cell_equals_restoring_it_by_hand(lab: Any) -> None:
    ids = lab.to_tokens(TEXT)
    start, end = subject_span(lab, ids[0].tolist(), "tdk")
    assert (start, end) == (8, 11)  # the last occurrence
    answer = lab.task.vocab.encode("y")[0]
    result = causal_trace(lab, ids, (0, 3), answer, samples=4, seed=3, max_rows=9)
    again = causal_trace(lab, ids, (0, 3), answer, samples=4, seed=3)
    assert result.probs == again.probs  # seeded, and chunking changes nothing
    assert result.corrupt < 0.5 * result.clean

    g = torch.Generator().manual_seed(3)
    noise = torch.randn(4, 3, 64, generator=g) * 3.0 * embedding_std(lab)
    _, clean = lab.run_with_cache(ids, names=["blocks.0.hook_resid_post", "blocks.1.hook_attn_out"])

    def noisy(x: torch.Tensor, _n: str) -> torch.Tensor:
        x = x.clone()
        x[:, 0:3] += noise
        return x

    for name, kind, p, layer in (("blocks.0.hook_resid_post", "resid", 3, 0), ("blocks.1.hook_attn_out", "attn", 10, 1)):
        def restore(x: torch.Tensor, _n: str, name: str = name, p: int = p) -> torch.Tensor:
            x = x.clone()
            x[:, p] = clean[name][0, p]
            return x

        with torch.no_grad():
            logits = lab.run_with_hooks(ids.repeat(4, 1), [("hook_embed", noisy), (name, restore)])
        want = float(torch.softmax(logits[:, -1], -1)[:, answer].mean())
        assert result.probs[kind][p][layer] == pytest.approx(want, abs=1e-5)
    # The last token's state after the last layer is all the answer reads: fully restored.
    assert result.values["resid"][-1][-1] == pytest.approx(1.0, abs=1e-5)
