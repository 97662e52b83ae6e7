"""BatchTopK and Matryoshka files round-trip with SAELens itself, and SAEBench's core evaluation
equals the lab's, where their throwaway venvs exist (never the project's dependencies):

    python3 -m venv /tmp/ref-saelens && /tmp/ref-saelens/bin/pip install torch==2.13.0 sae-lens==6.54.12
    python3 -m venv /tmp/ref-saebench && /tmp/ref-saebench/bin/pip install torch==2.13.0 sae-bench==0.6.0
    /tmp/ref-saebench/bin/pip uninstall -y torchvision   # the one it pulls does not load with torch 2.13

Each test skips, saying why, when its venv is absent; ``test_batchtopk.py``,
``test_matryoshka.py`` and ``test_saebench.py`` guard the same maths with
references written in the tests. The other side runs in a subprocess
(``saelens_side.py``, ``saebench_side.py``); files pass between them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.core.sae.planted import planted_rows, trained_sae
from tui_lab.core.sae.folder import load_sae, save_sae
from tui_lab.core.sae.losses import Coefficients, training_loss

SAELENS = Path("/tmp/ref-saelens/bin/python")
SAEBENCH = Path("/tmp/ref-saebench/bin/python")
HERE = Path(__file__).parent


def _needs(python: Path, what: str) -> None:
    if not python.exists():
        pytest.skip(f"{what} is not installed in {python.parent.parent} (see this module's docstring)")


def _run(python: Path, script: str, *args: str) -> None:
    proc = subprocess.run([str(python), str(HERE / script), *args], capture_output=True, text=True, timeout=600,
                          cwd=str(HERE.parents[2]))
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def saelens_round_trip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    """The lab's trained BatchTopK and Matryoshka files, then SAELens's side run over them."""
    _needs(SAELENS, "SAELens 6.54.12")
    work = tmp_path_factory.mktemp("saelens")
    save_file({"x": planted_rows(64, seed=11)}, str(work / "x.safetensors"))
    save_sae(trained_sae("batchtopk"), work / "lab_btk")
    save_sae(trained_sae("matryoshka_batchtopk"), work / "lab_mat")
    _run(SAELENS, "saelens_side.py", str(work))
    return work, load_file(str(work / "saelens.safetensors"))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)


def test_lab_files_encode_the_same_in_saelens(saelens_round_trip: tuple[Path, dict[str, torch.Tensor]]) -> None:
    work, theirs = saelens_round_trip
    x = planted_rows(64, seed=11)
    for name in ("lab_btk", "lab_mat"):
        sae = load_sae(work / name)
        f = sae.encode(x)
        assert int((f != 0).sum()) > 0
        _close(theirs[f"{name}_enc"], f)
        _close(theirs[f"{name}_dec"], sae.decode(f))


def test_saelens_files_encode_the_same_in_the_lab(saelens_round_trip: tuple[Path, dict[str, torch.Tensor]]) -> None:
    work, theirs = saelens_round_trip
    x = planted_rows(64, seed=11)
    inference = load_sae(work / "sl_btk")
    assert inference.cfg.architecture == "jumprelu"
    assert inference.cfg.metadata.extra["training_architecture"] == "batchtopk"
    _close(theirs["sl_btk_enc"], inference.encode(x))
    _close(theirs["sl_btk_dec"], inference.decode(inference.encode(x)))
    training = load_sae(work / "sl_btk_train")  # its checkpoint: BatchTopK, the decoder norms unfolded
    assert training.cfg.architecture == "batchtopk" and training.cfg.rescale_acts_by_decoder_norm
    _close(theirs["sl_btk_enc"], training.encode(x))  # eval: its running threshold
    _close(theirs["sl_btk_train_features"], training.train()(x)[1])  # training: the same batch top-k


def test_matryoshka_objective_equals_saelens(saelens_round_trip: tuple[Path, dict[str, torch.Tensor]]) -> None:
    work, _ = saelens_round_trip
    theirs = json.loads((work / "losses.json").read_text())
    sae = load_sae(work / "sl_mat_train").train()
    assert sae.cfg.matryoshka_widths == [4, 8, 16]
    loss = training_loss(sae, planted_rows(64, seed=11), Coefficients(), dead=None)
    assert float(loss.mse) == pytest.approx(theirs["mse_loss"], rel=1e-5)
    assert [float(t) for t in loss.inner] == pytest.approx([theirs["inner_mse_loss_4"], theirs["inner_mse_loss_8"]],
                                                           rel=1e-5)
    assert float(loss.total) == pytest.approx(theirs["total"], rel=1e-5)


def test_core_metrics_equal_saebench(tmp_path: Path) -> None:
    """SAEBench's run_evals over the lab's model (wrapped as TransformerLens's API) and the lab's SAE."""
    _needs(SAEBENCH, "SAEBench 0.6.0")
    from tests.core.sae.saebench_case import lab_core, make_case

    make_case(tmp_path)
    _run(SAEBENCH, "saebench_side.py", str(tmp_path))
    theirs = json.loads((tmp_path / "saebench.json").read_text())
    numbers, features = lab_core(tmp_path)
    compared = 0
    for category, values in theirs["metrics"].items():
        for key, value in values.items():
            assert numbers[key] == pytest.approx(value, rel=1e-4, abs=1e-5), (category, key)
            compared += 1
    assert compared == 26  # every field of the seven categories
    for key, values in theirs["feature_metrics"].items():
        np.testing.assert_allclose(np.array(features[key], dtype=float), np.array(values, dtype=float),
                                   rtol=1e-4, atol=1e-5, err_msg=key)
