"""The tuned lens: a translator per layer, fitted on the KL to the output.

References are independent of the code under test: the model's own forward pass for
the output, ``F.kl_div`` for the KL, the identity for a model whose blocks write nothing.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.core.analysis.lenses.lens_models import silence_blocks, tiny_in_hand
from tui_lab.core.analysis.lenses.lens_data import lens_batches
from tui_lab.core.analysis.lenses.lens_file import open_lens, save_lens
from tui_lab.core.analysis.lenses.lens_readout import (
    LogitLensMap,
    held_out_scores,
    kl_and_agreement,
    layer_logits,
    lens_readout,
)
from tui_lab.core.analysis.lenses.logit_lens import layer_streams
from tui_lab.core.analysis.lenses.tuned_lens import TunedLens
from tui_lab.core.analysis.lenses.tuned_lens_training import fit_tuned_lens
from tui_lab.core.errors import LabError


def test_a_translator_fitted_on_an_identity_like_model_recovers_the_identity():
    # Blocks that write nothing (post-LN with plain norms: no final norm, the head reads the
    # stream itself): every layer's output is the final residual, so the one translator
    # that gives KL 0 is the identity on the data (d_model 8 < vocabulary 16: the head is
    # injective, and the loss is convex in A and b). It starts far from it.
    model = tiny_in_hand(layers=2, d_model=8, seed=3, norm="post")
    silence_blocks(model)
    start = TunedLens(8, 2)
    torch.manual_seed(0)
    with torch.no_grad():
        start.translator(0).weight.normal_(0, 0.3)
        start.translator(0).bias.normal_(0, 0.3)
    batch = lens_batches(model, None, 1, 64, seed=7)[0]
    with torch.no_grad():
        streams = layer_streams(model.model, lambda: batch.forward(model.model))
        assert torch.allclose(streams[0], streams[1], atol=1e-5)  # the toy is identity-like
        h = streams[0][batch.mask]  # (N, 8)

        def off(lens: TunedLens) -> torch.Tensor:
            return ((lens.translate(0, h) - h).norm(dim=-1) / h.norm(dim=-1)).max()

        assert off(start) > 0.5
    lens, report = fit_tuned_lens(model, lens=start, steps=300, lr=0.3, batch_size=32)
    with torch.no_grad():
        assert off(lens) < 1e-3
    assert report.losses[-1] < 1e-4 * report.losses[0]


def test_the_last_layers_tuned_lens_is_the_models_output():
    model = tiny_in_hand(layers=3)
    lens, _ = fit_tuned_lens(model, steps=5)
    batch = lens_batches(model, None, 1, 4, seed=1)[0]
    with torch.no_grad():
        streams = layer_streams(model.model, lambda: batch.forward(model.model))
        own = model.model(batch.tokens)  # the model's own logits, (B, T, V)
        read = layer_logits(model.model, lens, streams)[-1]
    assert torch.allclose(read, own, atol=1e-5)
    assert lens.translate(2, streams[2]) is streams[2]  # the last layer has no translator


def test_the_readouts_kl_and_agreement_match_kl_div_by_hand():
    model = tiny_in_hand(layers=2)
    out = lens_readout(model, "3141", None, top_k=16)  # the logit lens; every token listed
    assert out.kind == "logit" and out.table.layers == ["decoder.0", "decoder.1"]
    probs = [torch.tensor([[dict(step)[model.task.vocab.label(v)] for v in range(16)] for step in layer])
             for layer in out.top]  # (steps, V) per layer, rebuilt from the JSON-able top lists
    expected = F.kl_div(probs[0].log(), probs[1].log(), log_target=True, reduction="none").sum(-1).mean()
    assert out.scores[0].kl == pytest.approx(float(expected), abs=1e-4)
    agree = (probs[0].argmax(-1) == probs[1].argmax(-1)).float().mean()
    assert out.scores[0].agreement == pytest.approx(float(agree))
    assert out.scores[1].kl == pytest.approx(0.0, abs=1e-6) and out.scores[1].agreement == 1.0


def test_kl_and_agreement_of_equal_and_of_opposite_distributions():
    a = torch.tensor([[2.0, 0.0, -1.0]])
    kl, agree = kl_and_agreement(a, a)
    assert float(kl) == pytest.approx(0.0, abs=1e-7) and bool(agree)
    b = torch.tensor([[-1.0, 0.0, 2.0]])
    p, q = a.softmax(-1), b.softmax(-1)
    kl, agree = kl_and_agreement(a, b)
    assert float(kl) == pytest.approx(float((p * (p / q).log()).sum()), rel=1e-5) and not bool(agree)


@pytest.mark.parametrize("arch", ["decoder-only", "encoder-decoder"])
def test_a_fitted_tuned_lens_reads_early_layers_closer_to_the_output_than_the_logit_lens(arch):
    model = tiny_in_hand(arch, layers=3, seed=1)
    lens, _ = fit_tuned_lens(model, steps=80, batch_size=32)
    fresh = lens_batches(model, None, 2, 32, seed=12345)
    tuned = held_out_scores(model, lens, fresh)
    logit = held_out_scores(model, LogitLensMap(), fresh)
    assert tuned[0].kl < 0.6 * logit[0].kl
    assert tuned[-1].kl == pytest.approx(0.0, abs=1e-6) and logit[-1].kl == pytest.approx(0.0, abs=1e-6)


def test_a_saved_tuned_lens_reopens_to_the_same_map(tmp_path):
    model = tiny_in_hand(layers=3)
    lens, report = fit_tuned_lens(model, steps=3)
    save_lens(lens, tmp_path / "lens", model, report.to_json())
    again = open_lens(tmp_path / "lens", model)
    h = torch.randn(5, 16)
    assert isinstance(again, TunedLens)
    for layer in range(3):
        assert torch.equal(again.translate(layer, h), lens.translate(layer, h))


def test_a_lens_file_for_another_model_is_refused_in_one_line(tmp_path):
    small = tiny_in_hand(layers=2, d_model=8)
    lens, _ = fit_tuned_lens(small, steps=1)
    save_lens(lens, tmp_path / "lens", small)
    other = tiny_in_hand(layers=3, d_model=16)
    with pytest.raises(LabError) as err:
        open_lens(tmp_path / "lens", other)
    message = str(err.value)
    assert "\n" not in message and "another model" in message and "d_model 8" in message
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "lens.json").write_text("{not json")
    with pytest.raises(LabError) as err:
        open_lens(tmp_path / "junk", other)
    assert "\n" not in str(err.value) and "unreadable" in str(err.value)
    with pytest.raises(LabError, match="no lens.json"):
        open_lens(tmp_path / "nowhere", other)


def test_the_lens_functions_from_the_face_take_a_source(tmp_path):
    from pathlib import Path

    from tui_lab.core import fit_jacobian_lens, fit_tuned_lens, lens_readout, open_model

    learned = Path(__file__).resolve().parents[3] / "data" / "learned-copy"
    tuned, report = fit_tuned_lens(str(learned), steps=3)
    jacobian, _ = fit_jacobian_lens(learned, prompts=1)
    assert report.done == 3 and jacobian.matrices.shape == (1, 32, 32)
    model = open_model(learned)
    for lens in (None, tuned, jacobian):
        out = lens_readout(model, "3141", lens)
        assert out.output == "3141" and out.scores[-1].agreement == 1.0


def test_an_encoder_only_model_is_refused_in_one_line():
    from tests.conftest import tiny_config
    from tui_lab.core.model.models import build_model
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks import make_task

    cfg = tiny_config(model={"arch": "encoder-only", "n_encoder_layers": 2},
                      task={"name": "masked-lm"})
    task = make_task(cfg.task)
    model = ModelInHand(cfg, task, build_model(cfg.model, vocab_size=len(task.vocab)), 0, torch.device("cpu"), [])
    for fit in (fit_tuned_lens, lens_readout):
        with pytest.raises(LabError) as err:
            fit(model) if fit is fit_tuned_lens else fit(model, "ab_")
        assert "\n" not in str(err.value) and "encoder-only" in str(err.value)
