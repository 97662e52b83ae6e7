"""Why scores are divided by sqrt(d_k): variances and softmax entropies against the formulas.

For q, k with independent unit-variance entries var(q.k) = d_k, and var(q.k / sqrt(d_k)) = 1;
the entropy of a softmax row is -sum p log p with p = exp(s) / sum exp(s), written out here.
"""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from tui_lab.core.analysis.basics.basics_example import fresh_model, self_attention_modules
from tui_lab.core.analysis.basics.basics_scaling import (
    RANDOM_KEYS,
    measure,
    scaling_random,
    scaling_real,
)
from tui_lab.core.config.presets import load_preset


def _entropy_by_hand(scores: list[float]) -> float:
    exps = [math.exp(s) for s in scores]
    total = sum(exps)
    return -sum(e / total * math.log(e / total) for e in exps)


def test_a_small_case_by_hand() -> None:
    q = [[1.0, 2.0, 0.0, -1.0], [0.5, -0.5, 1.5, 1.0]]
    k = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, -1.0, 2.0], [2.0, 1.0, 0.0, 1.0]]
    row = measure("hand", torch.tensor(q), torch.tensor(k), torch.ones(1, 3, dtype=torch.bool))
    raw = [[sum(a * b for a, b in zip(qi, kj, strict=True)) for kj in k] for qi in q]
    flat = [s for r in raw for s in r]
    assert row.d_k == 4
    assert row.var_raw == pytest.approx(statistics.variance(flat), rel=1e-5)
    assert row.var_scaled == pytest.approx(statistics.variance([s / 2 for s in flat]), rel=1e-5)
    assert row.entropy_raw == pytest.approx(statistics.mean(_entropy_by_hand(r) for r in raw), rel=1e-5)
    assert row.entropy_scaled == pytest.approx(
        statistics.mean(_entropy_by_hand([s / 2 for s in r]) for r in raw), rel=1e-5
    )
    assert row.entropy_max == pytest.approx(math.log(3))


def test_random_q_k_as_d_k_grows() -> None:
    rows = scaling_random()
    assert [r.d_k for r in rows] == [16, 32, 64, 128, 256, 512, 1024]
    for r in rows:
        assert r.var_raw / r.d_k == pytest.approx(1.0, abs=0.15)  # var(q.k) ~ d_k
        assert r.var_scaled == pytest.approx(1.0, abs=0.15)  # ~ 1 once scaled
        assert r.entropy_max == pytest.approx(math.log(RANDOM_KEYS))
        # scaled rows keep most of the uniform row's entropy (log 16 = 2.77 nats)
        assert r.entropy_scaled > 2.0 > r.entropy_raw
    # unscaled, the softmax turns nearly one-hot as d_k grows
    assert rows[-1].entropy_raw < 0.3 < rows[0].entropy_raw


def test_real_q_k_of_every_self_attention() -> None:
    config = load_preset("copy").with_values({"model.d_model": 32, "model.n_heads": 2})
    model, task = fresh_model(config)
    rows = scaling_real(model, task, "encoder-decoder", text="123")
    names = {m.lab_name for m in self_attention_modules(model)}
    assert {r.name for r in rows} == names == {"encoder.0.self", "decoder.0.self"}
    for r in rows:
        assert r.d_k == 16
        assert r.var_scaled == pytest.approx(r.var_raw / 16, rel=1e-4)
        assert 0.0 < r.entropy_raw and 0.0 < r.entropy_scaled <= r.entropy_max + 1e-6
