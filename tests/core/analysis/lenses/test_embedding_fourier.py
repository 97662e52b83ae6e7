"""The embedding's Fourier spectrum, on embeddings built by hand from known frequencies."""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.analysis.lenses.embedding_fourier import FourierError, model_spectrum, spectrum
from tui_lab.core.config.lab_config import ModelConfig, TaskConfig
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import N_SPECIALS


def waves(p: int, freqs: list[int], amplitude: list[float] | None = None) -> torch.Tensor:
    """(p, 2 * len(freqs)): cos and sin of 2 pi k a / p for each frequency k."""
    a = torch.arange(p, dtype=torch.float64)[:, None]
    amplitude = amplitude or [1.0] * len(freqs)
    cols = []
    for k, amp in zip(freqs, amplitude, strict=True):
        cols += [amp * torch.cos(2 * math.pi * k * a / p), amp * torch.sin(2 * math.pi * k * a / p)]
    return torch.cat(cols, dim=1)


def test_frequencies_5_and_17_are_the_key_ones_and_hold_all_the_power():
    s = spectrum(waves(59, [5, 17]))
    assert s.p == 59 and len(s.power) == 30  # frequencies 0..29
    assert s.key_frequencies == [5, 17]
    assert s.top8_share == pytest.approx(1.0, abs=1e-9)
    assert s.power[5] == pytest.approx(0.5, abs=1e-9) and s.power[17] == pytest.approx(0.5, abs=1e-9)
    assert sum(s.power) == pytest.approx(1.0, abs=1e-9)


def test_shares_follow_the_amplitudes_squared_and_mix_with_a_constant():
    # amplitudes 1 and 2: powers 1 : 4 (each wave p/2 per column, cos and sin); a constant column
    # of 1 adds p, the same as one unit wave's two columns together.
    rows = torch.cat([waves(11, [1, 3], [1.0, 2.0]), torch.ones(11, 1, dtype=torch.float64)], dim=1)
    s = spectrum(rows)
    assert s.power[0] == pytest.approx(1 / 6, abs=1e-9)
    assert s.power[1] == pytest.approx(1 / 6, abs=1e-9)
    assert s.power[3] == pytest.approx(4 / 6, abs=1e-9)
    # 6 frequencies, mean share 1/6: a key frequency holds more than 2/6 (frequency 1 does not)
    assert s.key_frequencies == [3]


def test_even_p_counts_the_nyquist_frequency_once():
    alternating = torch.tensor([[(-1.0) ** a] for a in range(8)])
    s = spectrum(torch.cat([alternating, waves(8, [1])], dim=1))
    assert len(s.power) == 5
    # (-1)^a has power 8; cos and sin of frequency 1 have 4 each, both halves counted.
    assert s.power[4] == pytest.approx(0.5, abs=1e-9) and s.power[1] == pytest.approx(0.5, abs=1e-9)


def test_a_random_embedding_has_no_key_frequency():
    s = spectrum(torch.randn(59, 64, generator=torch.Generator().manual_seed(0)))
    assert s.key_frequencies == []
    assert s.top8_share < 0.5


def test_model_spectrum_reads_the_residue_rows_of_the_input_embedding():
    task = make_task(TaskConfig(name="modular-addition", p=13))
    model = build_model(ModelConfig(arch="decoder-only", n_encoder_layers=0, n_decoder_layers=1,
                                    d_model=4, n_heads=2, d_ff=16, max_len=4), len(task.vocab))
    with torch.no_grad():
        model.tgt_embed.weight.normal_()  # specials: noise that must not count
        model.tgt_embed.weight[N_SPECIALS:] = waves(13, [6, 4]).float()
    s = model_spectrum(model, task)
    assert s.key_frequencies == [4, 6] and s.top8_share == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(FourierError, match="modular-addition"):
        model_spectrum(model, make_task(TaskConfig(name="copy")))


def test_a_large_constant_is_counted_in_the_power_but_never_named_a_key_frequency():
    rows = torch.cat([waves(59, [5]), 3.0 * torch.ones(59, 1, dtype=torch.float64)], dim=1)
    s = spectrum(rows)
    # the constant column holds 9 x 59, the wave's cos and sin 59 together
    assert s.power[0] == pytest.approx(0.9, abs=1e-9) and s.power[5] == pytest.approx(0.1, abs=1e-9)
    assert s.key_frequencies == [5]
    assert s.top8_share == pytest.approx(1.0, abs=1e-9)
