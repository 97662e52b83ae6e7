"""Shared fixtures: tiny presets that train in seconds on a CPU."""

from __future__ import annotations

import pytest

from tui_lab.core.config.lab_config import LabConfig, from_dict


def tiny_config(**sections: dict) -> LabConfig:
    """A small copy model; pass model=/task=/train= dicts to change it."""
    data = {
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64},
        "task": {"name": "copy", "min_len": 1, "max_len": 5},
        "train": {"steps": 30, "batch_size": 16, "eval_every": 10, "eval_examples": 32,
                  "warmup_steps": 5, "device": "cpu", "threads": 1},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return from_dict(data, source="<tiny>", name="tiny")


@pytest.fixture
def tiny() -> LabConfig:
    return tiny_config()
