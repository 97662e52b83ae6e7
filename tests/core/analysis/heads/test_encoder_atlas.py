"""The atlas's encoder patterns on hand-made attention: each pattern's head gets its label,
an even head is broad, and a weak pattern stays below the floor."""

from __future__ import annotations

import torch

from tui_lab.core.analysis.heads.atlas import NO_PATTERN
from tui_lab.core.analysis.heads.head_scores import encoder_patterns, head_scores
from tui_lab.core.analysis.heads.head_targets import offset_targets


def _labels(weights: torch.Tensor, valid: torch.Tensor, sep: torch.Tensor | None) -> list[str]:
    found, queries = encoder_patterns(weights, valid, sep, "text")
    return [h.shown for h in head_scores("encoder.0.self", found, torch.zeros(weights.size(1)))]


def test_each_pattern_labels_its_head() -> None:
    t = 8
    valid = torch.ones(1, t, dtype=torch.bool)
    valid[0, 6:] = False  # two padded positions at the end
    sep = torch.zeros(1, t, dtype=torch.bool)
    sep[0, 5] = True  # the last real token is [SEP]
    keys = valid[:, None, :].float()
    even = keys.expand(1, t, t) / keys.sum(-1, keepdim=True)
    heads = []
    for offset in (0, 1, -1):  # self, previous, next (rows without such a key: even)
        target = offset_targets(1, t, t, offset).float() * keys
        has = target.sum(-1, keepdim=True) > 0
        heads.append(torch.where(has, target, even))
    first = torch.zeros(1, t, t)
    first[..., 0] = 1.0
    to_sep = sep[:, None, :].float().expand(1, t, t)
    weak = 0.2 * heads[1] + 0.8 * first  # mostly first, a little previous
    noisy = 0.9 * even + 0.1 * heads[0]
    weights = torch.stack([*heads, first, to_sep, even[0][None].expand(1, t, t), weak, noisy], dim=1)
    labels = _labels(weights, valid, sep)
    assert labels[:6] == ["self", "previous", "next", "first", "separator", "broad"]
    assert labels[6] == "first" and labels[7] == "broad"


def test_no_separator_pattern_without_one_and_a_sharp_head_is_not_broad() -> None:
    t = 6
    valid = torch.ones(2, t, dtype=torch.bool)
    w = torch.zeros(2, 1, t, t)
    w[..., 3] = 0.5
    w[..., 4] = 0.5  # two fixed keys: neither a positional pattern nor broad
    found, _ = encoder_patterns(w, valid, None, "text")
    assert "separator" not in found
    (head,) = head_scores("encoder.0.self", found, torch.zeros(1))
    assert head.shown == NO_PATTERN
