"""Path patching is the exact patch of one head pair's edge, checked by hand; refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.core.analysis.edges import reference as R
from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_patching import path_patch
from tui_lab.core.analysis.patching.patch_pair import PatchPair


def test_path_patch_is_the_receivers_input_patched_by_hand(tiny: Any, pair: PatchPair) -> None:
    with torch.no_grad():
        clean = R.forward(tiny.model, pair.clean, pair.answer, pair.wrong)
        corrupt = R.forward(tiny.model, pair.corrupt, pair.answer, pair.wrong)
        for which in "qkv":
            delta = clean.writers["a0.h1"] - corrupt.writers["a0.h1"]
            want = R.forward(tiny.model, pair.corrupt, pair.answer, pair.wrong,
                             patch={("a0.h1", f"a1.h0<{which}>"): delta}).metric
            got = path_patch(tiny, pair, (0, 1), (1, 0), which)
            assert got.patched == pytest.approx(float(want), abs=1e-5)
            assert got.recovered == pytest.approx(
                float((want - corrupt.metric) / (clean.metric - corrupt.metric)), abs=1e-4)
    assert got.to_dict()["edge"] == "a0.h1->a1.h0<v>"


@pytest.mark.parametrize(("sender", "receiver", "which", "words"), [
    ((0, 5), (1, 0), "k", "no head a0.h5"),
    ((0, 0), (3, 0), "k", "no head a3.h0"),
    ((1, 0), (0, 1), "q", "must be in a later layer"),
    ((0, 0), (1, 1), "x", "q, k or v"),
])
def test_a_head_pair_out_of_range_is_one_line(tiny: Any, pair: PatchPair, sender: tuple[int, int],
                                              receiver: tuple[int, int], which: str, words: str) -> None:
    with pytest.raises(EdgeError, match=words) as caught:
        path_patch(tiny, pair, sender, receiver, which)
    assert "\n" not in str(caught.value)
