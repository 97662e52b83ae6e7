"""Top-p (nucleus) and top-k cuts on hand-made distributions; seeded sampling repeats itself."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.decoding.decode import DecodeInputError, generate
from tui_lab.core.decoding.sampling import cut_mask, pick
from tui_lab.core.model.models import build_model
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD

# Probabilities 0.5, 0.3, 0.15, 0.05, shuffled so the cut must sort.
PROBS = torch.tensor([0.15, 0.5, 0.05, 0.3])
LOGITS = PROBS.log()


@pytest.mark.parametrize(
    ("top_p", "kept"),
    [
        (0.9, [True, True, False, True]),  # 0.5 + 0.3 = 0.8 < 0.9: 0.15 is needed too; 0.05 is not
        (0.6, [False, True, False, True]),  # 0.5 < 0.6: needs 0.3 too
        (0.45, [False, True, False, False]),  # the top token alone reaches 0.45
        (1.0, [True, True, True, True]),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, kept):
    assert cut_mask(LOGITS, 1.0, 0, top_p).tolist() == kept


def test_top_k_and_top_p_together_and_greedy():
    assert cut_mask(LOGITS, 1.0, 2, 0.9).tolist() == [False, True, False, True]
    assert cut_mask(LOGITS, 0.0, 0, 0.9).tolist() == [False, True, False, False]


def test_sampling_never_draws_a_cut_token():
    gen = torch.Generator().manual_seed(0)
    logits = LOGITS.expand(4000, 4)
    ids, keep = pick(logits, 1.0, 0, 0.9, gen)
    counts = torch.bincount(ids, minlength=4).float() / 4000
    assert counts[2] == 0  # the 0.05 token was cut
    # the three survivors are renormalised: 0.5/0.95, 0.3/0.95, 0.15/0.95
    assert counts.tolist() == pytest.approx([0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95], abs=0.03)


def _random_model():
    cfg = tiny_config()
    torch.manual_seed(0)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.3)  # a soft random model: sampling has real choices
    return model, task


def test_seeded_sampling_is_reproducible_and_the_steps_mark_the_cut():
    model, task = _random_model()
    kw = {"temperature": 1.0, "top_p": 0.9, "max_new_tokens": 8, "capture": False}
    a = generate(model, task, "31415", seed=7, **kw)
    b = generate(model, task, "31415", seed=7, **kw)
    assert a.tokens == b.tokens
    others = {tuple(generate(model, task, "31415", seed=s, **kw).tokens) for s in range(6)}
    assert len(others) > 1  # the seed matters
    for step in a.steps:
        assert len(step.kept) == len(step.top) and step.kept[0]  # the most likely always survives
        assert 1 <= step.n_kept <= len(task.vocab)
        assert step.kept.count(True) <= step.n_kept
    assert "kept" in a.to_json()["steps"][0]


def test_bad_top_p_is_one_line():
    model, task = _random_model()
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(DecodeInputError, match="top-p"):
            generate(model, task, "31", temperature=1.0, top_p=bad)
