"""Patching on a trained induction run (tests/data/induction-run: the shipped ``induction``
preset, 2 attention-only layers): ``z`` finds the atlas's induction heads as the strongest
in layer 1, and the layer-0 heads (which the atlas scores low) carry effect, through the
layer-1 heads: with those frozen at their corrupted outputs, a layer-0 head's patch moves
the metric far less. Numbers from trained weights are compared by order, never exactly."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.heads.head_scores import atlas_for
from tui_lab.core.analysis.patching.activation_patching import PatchingCancelled, activation_patch
from tui_lab.core.analysis.patching.patch_pair import logit_diff, ready_pair
from tui_lab.core.opening.model_in_hand import open_model


@pytest.fixture(scope="module")
def lab() -> Any:
    return open_model(DATA / "induction-run")


def test_z_finds_the_induction_heads_strongest_in_layer_1(lab: Any) -> None:
    pair = ready_pair(lab)
    assert pair.name == "induction"
    result = activation_patch(lab, pair, "z")
    assert result.clean > 0 > result.corrupt  # the clean run gives the answer, the corrupted one the wrong token
    values = torch.tensor(result.values)  # (layer, head)
    atlas = atlas_for(lab.model, lab.task, "decoder-only")
    induction = {s.head for s in atlas.heads if s.name == "decoder.1.self" and s.best == "induction"}
    strongest = int(values[1].argmax())
    assert strongest in induction
    assert float(values[1].max()) > float(values[0].abs().max())
    assert float(values[1].sum()) > 0.5  # together they bring back most of the answer


def test_layer_0_heads_carry_effect_through_layer_1(lab: Any) -> None:
    pair = ready_pair(lab)
    by_position = activation_patch(lab, pair, "z_pos")
    layer0 = torch.tensor(by_position.values[:4])  # L0H0..L0H3 x position
    assert float(layer0.abs().sum()) > 0.5
    clean_ids, corrupt_ids = pair.ids()
    with torch.no_grad():
        _, clean = lab.run_with_cache(clean_ids, names=["blocks.0.attn.hook_z"])
        _, corrupt = lab.run_with_cache(corrupt_ids, names=["blocks.1.attn.hook_z"])
    span = by_position.clean - by_position.corrupt

    def patched(h: int, freeze: bool) -> float:
        def put(z: torch.Tensor, _n: str) -> torch.Tensor:
            z = z.clone()
            z[:, :, h] = clean["blocks.0.attn.hook_z"][:, :, h]
            return z

        hooks = [("blocks.0.attn.hook_z", put)]
        if freeze:
            hooks.append(("blocks.1.attn.hook_z", lambda _z, _n: corrupt["blocks.1.attn.hook_z"]))
        with torch.no_grad():
            logits = lab.run_with_hooks(corrupt_ids, hooks)
        return (float(logit_diff(logits, pair.answer, pair.wrong)[0]) - by_position.corrupt) / span

    total = sum(abs(patched(h, False)) for h in range(4))
    direct = sum(abs(patched(h, True)) for h in range(4))
    assert total > 0.05
    assert direct < 0.5 * total


def test_progress_and_cancel(lab: Any) -> None:
    pair = ready_pair(lab)
    seen: list[tuple[int, int]] = []
    whole = activation_patch(lab, pair, "resid_pre")
    stepped = activation_patch(lab, pair, "resid_pre", progress=lambda d, t: seen.append((d, t)))
    torch.testing.assert_close(torch.tensor(stepped.raw), torch.tensor(whole.raw), atol=1e-5, rtol=0)
    cells = 2 * pair.length
    assert len(seen) >= 2 and seen[-1] == (cells, cells) and [d for d, _ in seen] == sorted({d for d, _ in seen})
    calls: list[int] = []

    def cancel_second() -> bool:
        calls.append(1)
        return len(calls) >= 2

    with pytest.raises(PatchingCancelled):
        activation_patch(lab, pair, "resid_pre", cancelled=cancel_second)
    assert len(calls) == 2
