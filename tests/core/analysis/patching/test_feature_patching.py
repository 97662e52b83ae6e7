"""An SAE's features as a patching site, against a hand computation: the corrupted run with
``(f_clean_i - f_corrupt_i) * W_dec[i]`` added at the hook (the linear decoder's share of
one feature), one forward pass per feature, on a decoder-only and an encoder-decoder run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.patching.feature_patching import feature_patch
from tui_lab.core.analysis.patching.patch_pair import PatchError, logit_diff, ready_pair
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.recipe import new_sae


@pytest.mark.parametrize(("run", "hook"), [("induction-run", "blocks.0.hook_resid_post"),
                                           ("learned-copy", "encoder.0.hook_resid_post")])
def test_each_feature_matches_the_hand_computation(run: str, hook: str) -> None:
    lab = open_model(DATA / run)
    pair = ready_pair(lab)
    sae = new_sae(int(lab.config.model.d_model), 48, "topk", 4, hook, run, 16, seed=3)
    with torch.no_grad():  # larger decoder rows than the init: effects well above the tolerance
        sae.W_dec.mul_(3.0)
    result = feature_patch(lab, pair, sae, max_rows=5)
    clean_ids, corrupt_ids = pair.ids()
    target = pair.target_ids(1)
    _, clean = lab.run_with_cache(clean_ids, names=[hook], target=target)
    _, corrupt = lab.run_with_cache(corrupt_ids, names=[hook], target=target)
    f_clean, f_corrupt = sae.encode(clean[hook]).detach(), sae.encode(corrupt[hook]).detach()
    assert result.rows == [hook] and len(result.cols) == len(set(result.cols)) > 3
    for col, got in zip(result.cols, result.raw[0], strict=True):
        i = int(col[1:])
        add = ((f_clean[..., i] - f_corrupt[..., i])[..., None] * sae.W_dec[i]).detach()
        with torch.no_grad():
            logits = lab.run_with_hooks(corrupt_ids, [(hook, lambda x, _n, add=add: x + add)], target=target)
        assert got == pytest.approx(float(logit_diff(logits, pair.answer, pair.wrong)[0]), abs=1e-4), col
    effects = [abs(v - result.corrupt) for v in result.raw[0]]
    assert effects == sorted(effects, reverse=True) and effects[0] > 1e-2  # largest first


def test_a_mismatched_sae_is_one_line(tmp_path: Path) -> None:
    lab = open_model(DATA / "induction-run")
    sae = new_sae(int(lab.config.model.d_model) + 1, 16, "topk", 2, "blocks.0.hook_resid_post", None, 16)
    with pytest.raises(PatchError, match="d_in="):
        feature_patch(lab, ready_pair(lab), sae)
