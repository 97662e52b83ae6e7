"""Matryoshka BatchTopK: every inner prefix's reconstruction is part of the objective, and the
nested dictionaries are prefixes of one another.

The loss is checked against a re-implementation written here (each prefix's
reconstruction summed by hand), and each prefix's term is shown to matter: the
gradient without it differs from the lab's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.core.sae.planted import D_IN, WIDTHS, fresh_sae, planted_rows, trained_sae
from tui_lab.core.errors import LabError
from tui_lab.core.sae.batchtopk import inference_sae
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.folder import load_sae, save_sae
from tui_lab.core.sae.losses import Coefficients, training_loss
from tui_lab.core.sae.matryoshka import prefix
from tui_lab.core.sae.sae import SparseAutoencoder


def _reference_terms(sae: SparseAutoencoder, x: torch.Tensor, f: torch.Tensor) -> list[torch.Tensor]:
    """‖x − (b_dec + Σ_{i<w} f_i W_dec,i)‖² summed over d_in, mean over rows, for each inner w."""
    terms = []
    for width in WIDTHS[:-1]:
        x_hat = sae.b_dec + f[:, :width] @ sae.W_dec[:width]
        terms.append(((x - x_hat) ** 2).sum(dim=1).mean())
    return terms


def _grads(loss: torch.Tensor, sae: SparseAutoencoder) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, [sae.W_enc, sae.W_dec, sae.b_dec], retain_graph=True))


def test_every_prefix_term_is_in_the_objective() -> None:
    sae = fresh_sae("matryoshka_batchtopk").train()
    x = planted_rows(128, seed=3)
    loss = training_loss(sae, x, Coefficients(), dead=None)
    _, f, _ = sae(x)  # the dense forward's features, with their gradient to the encoder
    terms = _reference_terms(sae, x, f)
    assert len(loss.inner) == len(WIDTHS) - 1
    for got, want in zip(loss.inner, terms, strict=True):
        assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    full = ((x - loss.x_hat) ** 2).sum(dim=1).mean()
    assert float(loss.total.detach()) == pytest.approx(float((full + sum(terms)).detach()), rel=1e-5)
    lab = _grads(loss.total, sae)
    for dropped in range(len(terms)):  # zeroing any one prefix's term changes the gradient
        without = full + sum(t for j, t in enumerate(terms) if j != dropped)
        ref = _grads(without, sae)
        assert any(not torch.allclose(a, b, atol=1e-6) for a, b in zip(lab, ref, strict=True))
    reference = _grads(full + sum(terms), sae)
    for a, b in zip(lab, reference, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_without_the_prefix_terms_it_trains_to_a_different_sae() -> None:
    """Same seed, data and steps: BatchTopK (no prefix terms) and Matryoshka part ways."""
    from tui_lab.core.sae.settings import TrainSettings
    from tui_lab.core.sae.trainer import SAETrainer

    settings = TrainSettings(tokens=20 * 64, batch_size=64, buffer_rows=1024, lr=3e-3, dead_window=5000)
    out = {}
    for arch in ("batchtopk", "matryoshka_batchtopk"):
        sae = fresh_sae(arch)
        SAETrainer(sae, settings).train(iter([planted_rows(2048, seed=4)]))
        out[arch] = sae.W_dec.detach().clone()
    assert not torch.allclose(out["batchtopk"], out["matryoshka_batchtopk"], atol=1e-4)


def test_the_small_prefix_reconstructs_better_than_a_batchtopk_prefix() -> None:
    """What the prefix terms buy: the first 8 features alone explain more of the data."""
    x = planted_rows(1024, seed=77)

    def prefix_error(arch: str) -> float:
        small = prefix(inference_sae(trained_sae(arch)), WIDTHS[0])
        with torch.no_grad():
            return float(((small.decode(small.encode(x)) - x) ** 2).sum(dim=1).mean())

    assert prefix_error("matryoshka_batchtopk") < 0.9 * prefix_error("batchtopk")


def test_nested_dictionaries_are_prefixes_of_one_another() -> None:
    sae = inference_sae(trained_sae("matryoshka_batchtopk"))
    small, middle = prefix(sae, WIDTHS[0]), prefix(sae, WIDTHS[1])
    for name in ("W_dec", "b_enc", "threshold"):
        a, b, c = (getattr(s, name).detach() for s in (small, middle, sae))
        assert torch.equal(a, b[: WIDTHS[0]]) and torch.equal(b, c[: WIDTHS[1]])
    assert torch.equal(small.W_enc, middle.W_enc[:, : WIDTHS[0]]) and torch.equal(small.b_dec, sae.b_dec)
    x = planted_rows(64, seed=5)
    with torch.no_grad():
        f = sae.encode(x)
        # a prefix's features are the full SAE's first ones (up to the matmul's rounding)
        torch.testing.assert_close(small.encode(x), f[:, : WIDTHS[0]], atol=1e-6, rtol=1e-5)
        by_hand = sae.b_dec + f[:, : WIDTHS[1]] @ sae.W_dec[: WIDTHS[1]]
        torch.testing.assert_close(middle.decode(middle.encode(x)), by_hand)


def test_written_with_its_widths_as_saelens_writes_them(tmp_path: Path) -> None:
    sae = trained_sae("matryoshka_batchtopk")
    save_sae(sae, tmp_path)
    meta = json.loads((tmp_path / "cfg.json").read_text())["metadata"]
    assert meta["training_architecture"] == "matryoshka_batchtopk"
    assert meta["training_architecture_details"]["matryoshka_widths"] == WIDTHS
    x = planted_rows(32, seed=6)
    with torch.no_grad():
        assert torch.equal(load_sae(tmp_path).encode(x), inference_sae(sae).encode(x))


@pytest.mark.parametrize("widths", [[8, 8, 64], [8, 24], [0, 64], [24, 8, 64]])
def test_bad_widths_are_one_line(widths: list[int]) -> None:
    with pytest.raises(LabError, match="matryoshka_widths") as info:
        SAEConfig(d_in=D_IN, d_sae=64, architecture="matryoshka_batchtopk", k=2, matryoshka_widths=widths)
    assert "\n" not in str(info.value)
