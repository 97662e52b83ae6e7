"""The logit lens: its last layer is the model's own output; each layer uses its own norm statistics."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import tiny_config
from tui_lab.core.analysis.lenses.logit_lens import lens_probs, logit_lens
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


def _by_hand_lens(model, stream: torch.Tensor) -> torch.Tensor:
    """softmax(head(norm(stream))) with the final norm's scale and shift, this vector's own
    mean and variance; post-LN models have no final norm and go straight to the head."""
    norm = model.decoder.norm
    x = stream
    if norm is not None:
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    return (x @ model.lm_head.weight.T).softmax(-1)


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_every_layers_row_matches_its_own_residual_stream_read_by_hand(arch, norm):
    cfg = tiny_config(model={"arch": arch, "norm": norm, "n_decoder_layers": 3, "max_len": 16})
    torch.manual_seed(2)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.4)
    result = generate(model, task, "27182", max_new_tokens=6, capture=False)
    lens = logit_lens(model, task, result)
    assert lens.layers == ["decoder.0", "decoder.1", "decoder.2"]
    assert (model.decoder.norm is None) == (norm == "post")

    # Each layer's output, taken with hooks of this test's own over one teacher-forced pass.
    ids = task.vocab.encode("27182")
    fed = result.tokens[:-1]
    outputs: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda _m, _a, out: outputs.append(out[0]))
             for layer in model.decoder.layers]
    with torch.no_grad():
        if arch == "decoder-only":
            model(torch.tensor([[*ids, SEP, *fed]]))
            rows = slice(len(ids), len(ids) + len(result.tokens))  # from SEP on
        else:
            model(torch.tensor([ids]), torch.tensor([[BOS, *fed]]))
            rows = slice(0, len(result.tokens))
    for h in hooks:
        h.remove()
    assert len(outputs) == 3
    distinct = []
    for layer, stream in enumerate(outputs):
        expected = _by_hand_lens(model, stream[rows])  # (steps, V)
        assert torch.allclose(lens.probs[layer], expected, atol=1e-5), layer
        best = expected.max(-1)
        assert [c.prob for c in lens.rows[layer]] == pytest.approx(best.values.tolist(), abs=1e-5)
        assert [c.token for c in lens.rows[layer]] == [task.vocab.label(int(i)) for i in best.indices]
        distinct.append(expected)
    # The layers really say different things here, so a lens that repeated one layer would show.
    assert not torch.allclose(distinct[0], distinct[1], atol=1e-3)
    assert not torch.allclose(distinct[1], distinct[2], atol=1e-3)
