"""MFU: the char-lm preset's training FLOPs per token counted here by hand equal the
lab's count; MFU's arithmetic; the matmul peak probed once per process and machine key, the best kept in the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tui_lab.core.config.presets import load_preset
from tui_lab.core.training import mfu as mfu_module
from tui_lab.core.training.mfu import (
    achieved_flops,
    matmul_peak,
    measure_peak,
    mfu,
    train_flops_per_token,
)


def test_char_lm_flops_per_token_by_hand() -> None:
    cfg = load_preset("char-lm")
    d, f, layers, vocab, context = 128, 512, 4, 97, 64  # the preset (any vocabulary); windows of 64
    assert (cfg.model.d_model, cfg.model.d_ff, cfg.model.n_decoder_layers, cfg.task.block_size) == (d, f, layers, context)
    attention = 4 * d * d + 4 * d  # w_q, w_k, w_v, w_o with biases
    mlp = 2 * d * f + f + d  # up and down with biases
    norms = 2 * (2 * d)  # two LayerNorms (gain and shift)
    stack = layers * (attention + mlp + norms) + 2 * d  # and the final norm
    # Each weight costs 2 FLOPs (multiply, add) per token, the head too (tied or not),
    # and each layer's scores and weighted values 2 x 2 x context x d; training is 3x.
    forward = 2 * (stack + d * vocab) + 4 * context * d * layers
    assert train_flops_per_token(cfg, vocab) == 3 * forward


def test_mfu_is_achieved_over_peak_and_halves_source_target_pairs() -> None:
    lm = load_preset("char-lm")
    assert mfu(lm, 1_000, 2_000.0, 4e6) == pytest.approx(0.5)
    pairs = load_preset("addition")  # encoder-decoder: the count is per source-and-target pair
    assert achieved_flops(pairs, 1_000, 2_000.0) == pytest.approx(1e6)
    assert mfu(lm, 1_000, 2_000.0, 0.0) == 0.0


def test_the_peak_is_probed_once_per_machine_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(mfu_module, "_PROBED", set())
    probes: list[int] = []
    monkeypatch.setattr(mfu_module, "measure_peak", lambda device: probes.append(1) or 5e9)
    cpu = torch.device("cpu")
    assert matmul_peak(cpu) == 5e9 and matmul_peak(cpu) == 5e9
    assert len(probes) == 1 and (tmp_path / "matmul_peak.json").is_file()
    monkeypatch.setattr(mfu_module, "probe_key", lambda device: "another machine")
    assert matmul_peak(cpu) == 5e9 and len(probes) == 2


def test_the_cache_keeps_the_best_probe_of_each_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a probe made under load (low) cannot pin the peak: a later process's higher one replaces it,
    # a lower one leaves it
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    cpu = torch.device("cpu")
    for probed, kept in ((4e9, 4e9), (5e9, 5e9), (3e9, 5e9)):
        monkeypatch.setattr(mfu_module, "_PROBED", set())  # a new process
        monkeypatch.setattr(mfu_module, "measure_peak", lambda device, v=probed: v)
        assert matmul_peak(cpu) == kept
        cached = json.loads((tmp_path / "matmul_peak.json").read_text())
        assert cached[mfu_module.probe_key(cpu)] == kept


def test_the_probe_measures_a_plausible_rate() -> None:
    rate = measure_peak(torch.device("cpu"), size=128, repeats=2)
    assert 1e7 < rate < 1e14  # between a slow core under load and far more than a CPU does
