"""``open_model``: one opener for a run folder, a run at a history step and a model folder,
each giving a ``ModelInHand`` that knows its shape; ``private_copy`` shares nothing; a bad
source is refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from bench.hf_factory import save_family, save_marian, save_masked_lm
from tui_lab.core import load_for_inference, open_model
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.opening.model_in_hand import ModelInHand

DATA = Path(__file__).resolve().parents[2] / "data"
TINY_MLM = Path(__file__).resolve().parents[2] / "ui" / "data" / "tiny-mlm.yaml"


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny masked-lm preset trained its few steps, with history snapshots."""
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    out = tmp_path_factory.mktemp("mlm") / "tiny-mlm"
    TrainingRun(load_preset(str(TINY_MLM)), out).run()
    return out


def _storages(lab: ModelInHand) -> set[int]:
    tensors = [*lab.model.parameters(), *lab.model.buffers()]
    return {t.untyped_storage().data_ptr() for t in tensors if t.numel()}


@pytest.mark.parametrize(
    ("run", "shape"), [("induction-run", Shape.DECODER_ONLY), ("learned-copy", Shape.ENCODER_DECODER)]
)
def test_a_run_folder_is_a_model_in_hand_of_its_shape(run: str, shape: Shape) -> None:
    lab = open_model(DATA / run)
    assert isinstance(lab, ModelInHand)
    assert lab.shape is shape and lab.config.model.shape is shape
    assert lab.card is None  # a lab run, not a model opened from files
    assert lab.step == load_for_inference(DATA / run).step > 0
    assert lab.device == torch.device("cpu") and not lab.model.training


def test_an_encoder_only_run_and_its_history(mlm_run: Path) -> None:
    last = open_model(mlm_run)
    assert last.shape is Shape.ENCODER_ONLY
    first = open_model(mlm_run, at_step=1)
    assert first.shape is Shape.ENCODER_ONLY and first.step == 1


def test_a_run_at_a_step_holds_that_snapshot() -> None:
    then = open_model(DATA / "learned-copy", at_step=16)
    now = open_model(DATA / "learned-copy")
    assert then.step == 16 and now.step > 16
    assert then.run_dir == now.run_dir == DATA / "learned-copy"  # where its history is read
    assert then.shape is Shape.ENCODER_DECODER
    changed = [not torch.equal(a, b) for a, b in zip(then.model.parameters(), now.model.parameters(), strict=True)]
    assert any(changed)


@pytest.mark.parametrize("shape", list(Shape))
def test_a_model_folder_is_a_model_in_hand_of_its_shape(tmp_path: Path, shape: Shape) -> None:
    if shape is Shape.DECODER_ONLY:
        save_family(tmp_path, "gpt2")
    elif shape is Shape.ENCODER_ONLY:
        save_masked_lm(tmp_path, "bert")
    else:
        save_marian(tmp_path)
    lab = open_model(tmp_path)
    assert isinstance(lab, ModelInHand)
    assert lab.shape is shape
    assert lab.card is not None and lab.card.folder == tmp_path
    assert lab.step == 0 and lab.run_dir is None
    assert lab.hook_names()  # the hook API works on every shape


def test_private_copy_shares_no_parameter_storage(tmp_path: Path) -> None:
    save_family(tmp_path, "gpt2")  # weights mapped from the files, laid out later
    for lab in (open_model(DATA / "induction-run"), open_model(tmp_path, lay_out_later=True)):
        mine = lab.private_copy()
        assert isinstance(mine, ModelInHand) and mine.model is not lab.model
        assert not _storages(mine) & _storages(lab)
        assert (mine.shape, mine.step, mine.task, mine.card, mine.run_dir) == (
            lab.shape, lab.step, lab.task, lab.card, lab.run_dir)
        text = "abcabc" if lab.card is None else "hello"
        assert torch.equal(mine.run_with_hooks(text), lab.run_with_hooks(text))
        with torch.no_grad():
            next(mine.model.parameters()).add_(1.0)  # the copy's change stays on the copy
        assert not torch.equal(mine.run_with_hooks(text), lab.run_with_hooks(text))


def test_a_bad_source_is_one_lab_error_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_text("not a model")
    shutil.copytree(DATA / "induction-run", tmp_path / "run")
    save_family(tmp_path / "gpt2", "gpt2")
    for source, kw in [
        (tmp_path / "nowhere", {}),
        (tmp_path / "empty", {}),
        (tmp_path / "a-file", {}),
        (tmp_path / "run", {"revision": "main"}),  # a revision is a hub model's
        (tmp_path / "gpt2", {"at_step": 3}),  # a history is a run's
        (tmp_path / "run", {"at_step": 7}),  # no snapshot of that step
    ]:
        with pytest.raises(LabError) as refused:
            open_model(source, **kw)  # type: ignore[arg-type]
        message = str(refused.value)
        assert message and "\n" not in message, (source, kw, message)
