"""The logit lens: its last layer is the model's own output; each layer uses its own norm statistics."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import tiny_config
from tui_lab.core.analysis.logit_lens import lens_probs, logit_lens
from tui_lab.core.decoding.decode import generate
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import BOS, PAD, SEP


def _model(arch: str, norm: str):
    cfg = tiny_config(model={"arch": arch, "norm": norm, "n_decoder_layers": 2, "max_len": 16})
    torch.manual_seed(1)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.4)
    return model, task


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_last_layer_row_is_the_models_own_output(arch, norm):
    model, task = _model(arch, norm)
    result = generate(model, task, "3141", max_new_tokens=6, capture=False)
    lens = logit_lens(model, task, result)
    assert lens.layers == ["decoder.0", "decoder.1"]
    ids = task.vocab.encode("3141")
    fed = result.tokens[:-1]
    with torch.no_grad():
        if arch == "decoder-only":
            logits = model(torch.tensor([[*ids, SEP, *fed]]))[0, len(ids):]
        else:
            logits = model(torch.tensor([ids]), torch.tensor([[BOS, *fed]]))[0]
    own = logits.float().softmax(-1)  # (steps, V)
    assert lens.probs is not None
    assert torch.allclose(lens.probs[-1], own, atol=1e-5)
    # and the decode's own (cached) step probabilities
    for s, step in enumerate(result.steps):
        assert lens.rows[-1][s].token == step.token
        assert lens.rows[-1][s].prob == pytest.approx(step.prob, abs=1e-5)


def test_each_layer_is_normalised_with_its_own_statistics():
    model, _ = _model("encoder-decoder", "pre")
    stream = torch.randn(3, 32) * 5 + 2  # far from unit scale: reused statistics would show
    norm = model.decoder.norm
    mean = stream.mean(-1, keepdim=True)
    var = stream.var(-1, unbiased=False, keepdim=True)
    by_hand = (stream - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    expected = F.softmax(by_hand @ model.lm_head.weight.T, dim=-1)
    assert torch.allclose(lens_probs(model, stream), expected, atol=1e-5)
