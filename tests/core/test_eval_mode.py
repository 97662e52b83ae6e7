"""``evaluating``: eval mode inside the block, the model's own mode after, even on an error."""

from __future__ import annotations

import pytest
from torch import nn

from tui_lab.core.eval_mode import evaluating


@pytest.mark.parametrize("training", [True, False])
def test_eval_inside_and_the_mode_it_was_in_after_even_on_an_error(training: bool) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with evaluating(model) as inside:
        assert inside is model and not model.training and not model[1].training
    assert model.training is training and model[1].training is training
    with pytest.raises(RuntimeError), evaluating(model):
        raise RuntimeError("a decode failed")
    assert model.training is training
