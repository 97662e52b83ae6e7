"""The schedule picture: the tutorials' Noam rate at three steps, and the config's curve's landmarks."""

from __future__ import annotations

import pytest

from tui_lab.core.analysis.basics.basics_schedule import noam_rate, sample_steps, schedule_picture
from tui_lab.core.config.presets import load_preset


def test_noam_rate_at_three_steps() -> None:
    # The paper's base model: d_model 512, warmup 4000.
    d, w = 512, 4000
    assert noam_rate(1, d, w) == pytest.approx(d**-0.5 * 1 * w**-1.5)  # warming up: 1.747e-7
    assert noam_rate(1, d, w) == pytest.approx(1.7469e-7, rel=1e-3)
    assert noam_rate(4000, d, w) == pytest.approx(d**-0.5 * 4000**-0.5)  # the peak
    assert noam_rate(4000, d, w) == pytest.approx(6.9877e-4, rel=1e-3)
    assert noam_rate(16000, d, w) == pytest.approx(d**-0.5 * 16000**-0.5)  # half the peak
    assert noam_rate(16000, d, w) == pytest.approx(noam_rate(4000, d, w) / 2)


def test_config_curve_beside_noam() -> None:
    config = load_preset("copy").with_values(
        {"model.d_model": 64, "model.n_heads": 2, "train.steps": 1000, "train.warmup_steps": 50,
         "train.lr": 0.002, "train.schedule": "cosine", "train.min_lr_ratio": 0.1}
    )
    picture = schedule_picture(config, points=101)
    assert picture.steps[0] == 1 and picture.steps[-1] == 1000 and 50 in picture.steps
    lr = dict(zip(picture.steps, picture.lr, strict=True))
    assert lr[1] == pytest.approx(0.002 / 50)  # linear warmup, 1/50 of the rate
    assert picture.lr_peak == (50, pytest.approx(0.002))
    assert lr[1000] == pytest.approx(0.002 * 0.1)  # cosine down to the floor
    noam = dict(zip(picture.steps, picture.noam, strict=True))
    assert noam[50] == pytest.approx(64**-0.5 * 50**-0.5)
    assert picture.noam_peak == (50, pytest.approx(64**-0.5 * 50**-0.5))
    assert noam[1000] == pytest.approx(64**-0.5 * 1000**-0.5)


def test_sample_steps() -> None:
    assert sample_steps(5, 2) == [1, 2, 3, 4, 5]
    steps = sample_steps(10_000, 123, points=50)
    assert steps[0] == 1 and steps[-1] == 10_000 and 123 in steps and len(steps) == 51
