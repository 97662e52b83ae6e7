"""Decoding: the KV cache changes nothing but speed; bad input gets one clear line."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.config.presets import load_preset
from tui_lab.core.decoding.decode import DecodeInputError, batch_greedy, generate
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD


def _untrained(cfg, seed=0):
    torch.manual_seed(seed)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    return model, task


def _smaller(name: str):
    """A shipped preset at a size that keeps the test fast, architecture unchanged."""
    cfg = load_preset(name)
    return cfg.with_values({"model.d_model": 32, "model.n_heads": 2, "model.d_ff": 64})


@pytest.mark.parametrize("preset", ["copy", "reverse", "sort", "addition", "char-lm", "seed-mini"])
def test_cache_equals_no_cache_on_presets(preset):
    cfg = _smaller(preset)
    model, task = _untrained(cfg)
    text = "The model" if task.is_lm else task.examples_for_display(1)[0]
    for seed in range(3):
        torch.manual_seed(seed)
        for p in model.parameters():
            p.data.normal_(0, 0.5)  # a sharp random model makes long, varied outputs
        a = generate(model, task, text, max_new_tokens=24, use_cache=True)
        b = generate(model, task, text, max_new_tokens=24, use_cache=False)
        assert a.tokens == b.tokens
        assert a.output == b.output
        for name in a.attention:
            assert torch.allclose(a.attention[name], b.attention[name], atol=1e-5)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_cache_equals_no_cache_every_position_kind(arch, positional):
    cfg = tiny_config(model={"arch": arch, "positional": positional, "max_len": 16})
    model, task = _untrained(cfg)
    for p in model.parameters():
        p.data.normal_(0, 0.5)
    a = generate(model, task, "31415", use_cache=True)
    b = generate(model, task, "31415", use_cache=False)
    assert a.tokens == b.tokens


def test_batch_greedy_matches_one_by_one():
    for arch in ("encoder-decoder", "decoder-only"):
        cfg = tiny_config(model={"arch": arch, "max_len": 16})
        model, task = _untrained(cfg, seed=3)
        for p in model.parameters():
            p.data.normal_(0, 0.5)
        inputs = ["1", "31415", "27", "9999", "500"]
        batched = batch_greedy(model, task, inputs, max_new_tokens=8)
        single = [generate(model, task, t, max_new_tokens=8, capture=False).output for t in inputs]
        assert batched == single


def test_result_has_topk_and_labelled_attention():
    cfg = tiny_config()
    model, task = _untrained(cfg)
    r = generate(model, task, "314", max_new_tokens=4, report_k=3)
    assert len(r.steps) == len(r.tokens) <= 4
    for s in r.steps:
        probs = [p for _, p in s.top]
        assert len(probs) == 3 and probs == sorted(probs, reverse=True)
        assert s.prob <= probs[0] + 1e-6
    names = set(r.attention)
    assert {"encoder.0.self", "decoder.0.self", "decoder.0.cross"} <= names
    heads = cfg.model.n_heads
    enc = r.attention["encoder.0.self"]
    assert enc.shape == (heads, 3, 3)
    q, k = r.labels["decoder.0.cross"]
    assert k == ["3", "1", "4"] and len(q) == r.attention["decoder.0.cross"].shape[1]
    assert torch.allclose(r.attention["decoder.0.self"].sum(-1), torch.ones(heads, len(q)), atol=1e-5)


def test_sampling_is_seeded():
    cfg = tiny_config()
    model, task = _untrained(cfg)
    a = generate(model, task, "314", temperature=1.0, top_k=3, seed=7)
    b = generate(model, task, "314", temperature=1.0, top_k=3, seed=7)
    assert a.tokens == b.tokens


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("   ", "empty"),
    ("12a4", "outside the vocabulary"),
    ("1" * 40, "long"),
])
def test_bad_input_is_one_clear_line(text, fragment):
    model, task = _untrained(tiny_config())
    with pytest.raises(DecodeInputError) as err:
        generate(model, task, text)
    msg = str(err.value)
    assert fragment in msg and "\n" not in msg


def test_control_characters_are_removed_visibly():
    model, task = _untrained(tiny_config())
    r = generate(model, task, "31\x1b[2J4\x07")
    assert r.input == "314"
    assert any("control" in n for n in r.notes)


def test_wrong_task_shape_addition_without_plus():
    cfg = tiny_config(task={"name": "addition", "max_digits": 2}, model={"max_len": 16})
    model, task = _untrained(cfg)
    with pytest.raises(DecodeInputError):
        generate(model, task, "1234")


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_training_after_decoding_and_decoding_after_training(arch):
    # Decoding runs under inference_mode with a packed q/k/v copy in its cache:
    # the same model must train afterwards, and the next decode must use the
    # updated weights (the uncached decode has no packed copy to go stale).
    cfg = tiny_config(model={"arch": arch, "positional": "rope", "max_len": 16})
    model, task = _untrained(cfg)
    generate(model, task, "31415")
    batch_greedy(model, task, ["314", "15"], max_new_tokens=6)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    src, tgt = torch.tensor([[6, 7, 8]]), torch.tensor([[1, 6, 7]])
    logits = model(src, tgt) if arch == "encoder-decoder" else model(tgt)
    logits.sum().backward()
    opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    for p in model.parameters():
        p.data.normal_(0, 0.5)  # a very different model
    a = generate(model, task, "31415", use_cache=True)
    b = generate(model, task, "31415", use_cache=False)
    assert a.tokens == b.tokens
    assert model.training  # generate puts back the mode it found


def test_attention_returned_by_generate_is_an_ordinary_tensor():
    model, task = _untrained(tiny_config())
    r = generate(model, task, "314")
    for w in r.attention.values():
        assert not w.is_inference()
        w.mul_(1.0)  # an inference tensor would refuse this outside inference_mode
