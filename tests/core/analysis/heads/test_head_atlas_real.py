"""The atlas on real families' models: the standard probe's scores against ``transformers``.

For each family, a random-weight ``save_pretrained`` folder (``hf_factory``) is
loaded into the lab and scored with ``score_atlas_on_repeats``; the reference
scores are worked out here, by plain indexing, from the reference model's own
``output_attentions`` on the same probe rows. The heads are sharpened first,
so a target off by one key would change the scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.hf_factory import read_config, save_family
from tui_lab.core.analysis.heads.head_probes import standard_probe
from tui_lab.core.analysis.heads.head_scores import score_atlas_on_repeats
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.files import open_tensors

FAMILIES = ("gpt2", "gpt_neox", "llama", "gpt_neo")
N, LENGTH, SPECIALS = 4, 32, [0]  # hf_factory's models: 64 positions, id 0 is <|endoftext|>
SHARPEN = 12.0


def reference_scores(attentions: Any, length: int) -> dict[str, dict[str, float]]:
    """label -> pattern -> score, from (B, H, T, T) weights per layer, by hand."""
    out: dict[str, dict[str, float]] = {}
    t = 2 * length
    for layer, w in enumerate(attentions):
        for h in range(w.size(1)):
            a = w[:, h]  # (B, T, T)
            out[f"decoder.{layer}.self:{h}"] = {
                "previous": sum(float(a[:, q, q - 1].mean()) for q in range(1, t)) / (t - 1),
                "first": sum(float(a[:, q, 0].mean()) for q in range(1, t)) / (t - 1),
                "duplicate": sum(float(a[:, q, q - length].mean()) for q in range(length, t)) / length,
                "induction": sum(float(a[:, q, q - length + 1].mean()) for q in range(length, t)) / length,
            }
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_standard_probe_scores_equal_the_references(family: str, tmp_path: Path) -> None:
    reference = save_family(tmp_path, family, seed=1, tokenizer=False)
    # Sharpen the random heads (larger query/key weights): near-uniform attention would
    # score about the same on any target, so a target off by one key would go unseen.
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if p.dim() == 2 and any(k in name for k in ("attn", "attention")):
                p.mul_(SHARPEN)
    reference.save_pretrained(tmp_path)
    _, model = build_pretrained(read_config(tmp_path), open_tensors(tmp_path))
    atlas = score_atlas_on_repeats(model, 300, SPECIALS, n=N, length=LENGTH, seed=0)
    tokens = standard_probe(300, SPECIALS, N, LENGTH, 0).tokens
    with torch.no_grad():
        want = reference_scores(reference(tokens, output_attentions=True).attentions, LENGTH)
    assert {h.label for h in atlas.heads} == set(want)  # every head of every layer: 2 x 4
    for head in atlas.heads:
        for pattern, value in want[head.label].items():
            assert head.scores[pattern] == pytest.approx(value, abs=2e-4), (head.label, pattern)
    spread = [max(h.scores.values()) - min(h.scores.values()) for h in atlas.heads]
    assert max(spread) > 0.05, spread  # the heads are far from uniform: targets matter
