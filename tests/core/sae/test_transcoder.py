"""Transcoders: encode/decode/skip/forward against the formula worked by hand, and the set's hooks."""

from __future__ import annotations

import pytest
import torch

from tests.core.sae.transcoder_fixtures import hand_forward, random_set
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.transcoder import Transcoder, TranscoderSet

CASES = [("relu", False, None), ("relu", True, None), ("topk", False, 3), ("topk", True, 3),
         ("jumprelu", False, None), ("jumprelu", True, None)]


@pytest.mark.parametrize(("architecture", "skip", "k"), CASES)
def test_forward_is_the_formula_by_hand(architecture: str, skip: bool, k: int | None) -> None:
    tc = random_set(5, 7, 1, architecture, skip, k, seed=3)[0]
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    for row, f_got, y_got in zip(x, tc.encode(x), tc(x), strict=True):
        f, y = hand_forward(row.tolist(), tc)
        assert f_got.tolist() == pytest.approx(f, abs=1e-5)
        assert y_got.tolist() == pytest.approx(y, abs=1e-5)


def test_each_part_on_numbers_worked_out() -> None:
    """d_model 2, three features: every number below is worked by hand from the weights."""
    tc = Transcoder(2, 3, 0, "jumprelu", skip=True, seed=None)
    with torch.no_grad():
        tc.W_enc.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]]))
        tc.b_enc.copy_(torch.tensor([0.0, -1.0, 0.5]))
        tc.threshold.copy_(torch.tensor([0.5, 0.5, 0.5]))  # type: ignore[union-attr]
        tc.W_dec.copy_(torch.tensor([[1.0, 1.0], [0.0, 1.0], [2.0, 0.0]]))
        tc.b_dec.copy_(torch.tensor([0.1, 0.2]))
        tc.W_skip.copy_(torch.tensor([[0.0, 1.0], [3.0, 0.0]]))  # type: ignore[union-attr]
    x = torch.tensor([[1.0, 1.0]])
    # z = (1·1 + 0·1 + 0, 0·1 + 2·1 − 1, 1·1 − 1·1 + 0.5) = (1, 1, 0.5)
    assert tc.pre_acts(x).tolist() == [[1.0, 1.0, 0.5]]
    # 0.5 is not above θ = 0.5: it is cut
    assert tc.encode(x).tolist() == [[1.0, 1.0, 0.0]]
    # decode: 1·(1, 1) + 1·(0, 1) + (0.1, 0.2) = (1.1, 2.2)
    assert tc.decode(tc.encode(x))[0].tolist() == pytest.approx([1.1, 2.2])
    # skip: x · W_skipᵀ = (0·1 + 1·1, 3·1 + 0·1) = (1, 3): row d of W_skip makes output d
    assert tc.skip(x).tolist() == [[1.0, 3.0]]
    assert tc(x)[0].tolist() == pytest.approx([2.1, 5.2])


def test_no_skip_is_zeros_and_jumprelu_below_zero_is_circuit_tracers() -> None:
    tc = Transcoder(3, 4, 0, "jumprelu", seed=0)
    with torch.no_grad():
        tc.threshold.fill_(-1.0)  # type: ignore[union-attr]
    x = torch.randn(2, 3)
    assert torch.equal(tc.skip(x), torch.zeros(2, 3))
    z = tc.pre_acts(x)
    assert torch.equal(tc.encode(x), z * (z > -1.0))  # negative z above θ passes, as in circuit-tracer


def test_topk_keeps_k_per_row() -> None:
    tc = Transcoder(4, 10, 0, "topk", k=3, seed=0)
    with torch.no_grad():
        tc.b_enc.fill_(5.0)  # every z positive: exactly k survive
    assert ((tc.encode(torch.randn(6, 4)) != 0).sum(dim=-1) == 3).all()


def test_set_hooks_and_refusals() -> None:
    tset = random_set(4, 6, 2)
    assert (tset.d_model, tset.n_layers, len(tset)) == (4, 2, 2)
    assert tset.input_hook(1) == "blocks.1.ln2.hook_normalized"
    assert tset.output_hook(0) == "blocks.0.hook_mlp_out"
    with pytest.raises(SAEError, match="says it is for layer"):
        TranscoderSet([tset[1]])
    with pytest.raises(SAEError, match="k between 1"):
        Transcoder(4, 6, 0, "topk", k=7)
    with pytest.raises(SAEError, match="not one of"):
        Transcoder(4, 6, 0, "gelu")
