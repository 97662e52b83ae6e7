"""The fill-mask lens: each encoder layer's stream at each mask through the final norm and the
MLM head; the last layer's row is the model's own filler distribution (pre-LN: the lab's
mlm-char shape; post-LN: a BERT opened from files)."""

from __future__ import annotations

from pathlib import Path

import torch

from bench.hf_factory import save_masked_lm
from tui_lab.core.analysis.basics.basics_example import fresh_model
from tui_lab.core.analysis.lenses.logit_lens import fill_lens
from tui_lab.core.config.presets import load_preset
from tui_lab.core.decoding.fill_mask import fill_mask
from tui_lab.core.opening.from_files import open_files


def _check(model, task, text: str) -> None:  # type: ignore[no-untyped-def]
    result = fill_mask(model, task, text)
    lens = fill_lens(model, task, result)
    masks = [m.position for m in result.masks]
    with torch.no_grad():
        own = torch.softmax(model(torch.tensor([result.tokens]))[0, masks].float(), -1)
    assert lens.probs is not None and lens.probs.shape[:2] == (len(lens.layers), len(masks))
    torch.testing.assert_close(lens.probs[-1], own, atol=1e-5, rtol=0)
    assert [row[0].token for row in lens.rows][-1] == task.vocab.label(int(own[0].argmax()))
    assert float((lens.probs[0] - lens.probs[-1]).abs().max()) > 1e-3  # earlier layers say other things


def test_the_last_layer_is_the_models_own_fill_pre_ln() -> None:
    config = load_preset("mlm-char").with_values({"model.d_model": 32, "model.n_heads": 2, "model.d_ff": 64})
    model, task = fresh_model(config)
    assert config.model.norm == "pre" and model.encoder.norm is not None
    _check(model, task, "the c_t sat on _he mat")


def test_the_last_layer_is_the_models_own_fill_post_ln(tmp_path: Path) -> None:
    save_masked_lm(tmp_path, "bert", initializer_range=0.3)
    lab = open_files(str(tmp_path))
    assert lab.model.encoder.norm is None  # BERT's blocks are post-LN
    _check(lab.model, lab.task, "the cat sat on the [MASK] upon a [MASK]")
