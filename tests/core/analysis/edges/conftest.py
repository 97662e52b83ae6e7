"""A tiny decoder-only model with MLPs and random weights, in hand, and a pair over it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.patching.patch_pair import PatchPair
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.opening.model_in_hand import open_model


def tiny_lab(d_ff: int = 24, seed: int = 0) -> ModelInHand:
    """2 layers of 2 heads, d_model 16, pre-LN with learned positions (the induction run's
    config made smaller and given MLPs); weights drawn larger than the default so that
    effects stand well above float rounding."""
    base = open_model(DATA / "induction-run")
    config = dataclasses.replace(base.config.model, d_model=16, n_heads=2, d_ff=d_ff)
    torch.manual_seed(seed)
    net = build_model(config, len(base.task.vocab))
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.3)
    lab_config = dataclasses.replace(base.config, model=config)
    return ModelInHand(lab_config, base.task, net, 0, torch.device("cpu"), [])


@pytest.fixture(scope="module")
def tiny() -> Any:
    return tiny_lab()


@pytest.fixture(scope="module")
def pair() -> PatchPair:
    clean = [3, 7, 11, 5, 9, 13, 7]
    corrupt = [3, 8, 12, 5, 10, 13, 7]
    return PatchPair(clean, corrupt, 11, 12)
