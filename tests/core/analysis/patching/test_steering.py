"""Steering: the vector is the two sets' mean difference; a coefficient of 0 changes nothing;
a steered continuation is greedy decoding, step by step without a cache, with the vector
added at the hook."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.cli.helpers import DATA
from tui_lab.core.analysis.patching.patch_pair import PatchError
from tui_lab.core.analysis.patching.steering import steer, steering_hooks, steering_vector
from tui_lab.core.opening.model_in_hand import open_model

HOOK = "blocks.1.hook_resid_pre"
POSITIVE, NEGATIVE = ["abcabc", "abab"], ["xyzxyz", "xyxy"]


@pytest.fixture(scope="module")
def lab() -> Any:
    return open_model(DATA / "induction-run")


def test_vector_is_the_mean_difference(lab: Any) -> None:
    def mean(prompts: list[str]) -> torch.Tensor:
        return torch.stack([lab.run_with_cache(p, names=[HOOK])[1][HOOK][0].mean(0) for p in prompts]).mean(0)

    torch.testing.assert_close(steering_vector(lab, HOOK, POSITIVE, NEGATIVE), mean(POSITIVE) - mean(NEGATIVE))


def test_coefficient_zero_changes_nothing(lab: Any) -> None:
    vector = steering_vector(lab, HOOK, POSITIVE, NEGATIVE)
    result = steer(lab, "tdkywbzxtdk", HOOK, vector, 0.0)
    assert result.steered == result.plain and len(result.plain) == 20
    with torch.no_grad():
        plain = lab.run_with_hooks("tdkywbzxtdk")
        steered = lab.run_with_hooks("tdkywbzxtdk", steering_hooks(HOOK, vector, 0.0))
    torch.testing.assert_close(steered, plain, atol=0, rtol=0)


def test_steered_continuation_is_hooked_greedy_decoding(lab: Any) -> None:
    vector = steering_vector(lab, HOOK, POSITIVE, NEGATIVE)
    result = steer(lab, "tdkywbzxtdk", HOOK, vector, 4.0, max_new_tokens=8)
    ids = lab.to_tokens("tdkywbzxtdk")
    with torch.no_grad():
        for _ in range(8):
            logits = lab.run_with_hooks(ids, steering_hooks(HOOK, vector, 4.0))
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert result.steered == lab.task.vocab.decode(ids[0, 11:].tolist())
    assert result.steered != result.plain[:8]


def test_bad_hooks_are_one_line(lab: Any) -> None:
    with pytest.raises(PatchError, match="no hook point"):
        steering_vector(lab, "blocks.9.hook_resid_pre", POSITIVE, NEGATIVE)
    with pytest.raises(PatchError, match="attention weights"):
        steering_vector(lab, "blocks.0.attn.hook_pattern", POSITIVE, NEGATIVE)
