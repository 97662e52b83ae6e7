"""Copy or share, decided once (``ui/state/model_copies.py``): a model opened from files is
shared (its weights never change here), any other run's model is copied whole for a worker."""

from __future__ import annotations

from pathlib import Path

import torch

from bench.hf_factory import save_family
from tui_lab.core import open_model
from tui_lab.core.opening.model_in_hand import ModelInHand
from tui_lab.ui.state.model_copies import in_hand, private_in_hand

RUN = Path(__file__).resolve().parents[2] / "data" / "induction-run"


def _storages(lab: ModelInHand) -> set[int]:
    return {p.untyped_storage().data_ptr() for p in lab.model.parameters()}


def test_a_model_in_hand_is_shared_as_it_is() -> None:
    lab = open_model(RUN)
    assert in_hand(lab) is lab


def test_a_run_s_model_is_copied_whole_for_a_worker() -> None:
    lab = open_model(RUN)
    mine = private_in_hand(lab)
    assert mine.model is not lab.model and not _storages(mine) & _storages(lab)
    assert (mine.shape, mine.step) == (lab.shape, lab.step)


def test_a_model_from_files_keeps_its_weights_shared_around_modules_of_its_own(tmp_path: Path) -> None:
    save_family(tmp_path, "gpt2")
    lab = open_model(tmp_path, lay_out_later=True)
    mine = private_in_hand(lab)
    assert mine.model is not lab.model and _storages(mine) == _storages(lab)  # no weight copied
    assert mine.card is lab.card
    assert torch.equal(mine.run_with_hooks("hello"), lab.run_with_hooks("hello"))
