"""A translator's head atlas: how sharply and how monotonically its cross-attention heads align.

A real translator has no task of the lab's to probe it with, so it is probed
on translation itself: the task's example sentences are translated greedily
(``generate``, the same path the Decode pane takes) and every head's weights
on the decoded pair are scored, averaged over the sentences.

Cross-attention heads (target query x source key), two scores:

- ``sharp``: the mean, over target tokens, of the largest weight a token puts
  on one source piece (1: each looks at one piece; a uniform head scores
  1 / source length, its chance);
- ``monotonic``: the mass on the source's diagonal band, the keys within one
  position of the target token's place scaled onto the source (token q of T
  at q (S-1)/(T-1)): 1 when the attention walks forward through the source
  as the translation does. A head parked on one piece (often the final
  ``</s>``, an attention sink) scores low; chance is the band's share of the
  keys (about 3 / S). A correlation of positions was tried first and
  rejected: it ignores how much weight moves, and near-uniform random heads
  reached 0.8 on it.

Self-attention heads (encoder and decoder) get the atlas's own patterns,
measured directly on the same sequences: ``diagonal`` (the query's own
position), ``previous`` and ``first`` (queries t >= 1). Chance for each is a
head spreading evenly over the keys it may see (all of the source; a causal
decoder's first t + 1). A pattern labels a head only above the floor
(``head_floor``), as in every atlas.
"""

from __future__ import annotations

import torch
from torch import nn

from tui_lab.core.analysis.heads.atlas import Atlas, HeadScore
from tui_lab.core.analysis.heads.head_floor import clears_floor
from tui_lab.core.decoding.decode import generate
from tui_lab.core.tasks.protocol import Task

PROBE = "translation"
NEW_TOKENS = 32


def sharpness(weights: torch.Tensor) -> torch.Tensor:
    """(H,) mean over queries of each row's largest weight; ``weights`` (H, Tq, Tk)."""
    return weights.amax(-1).mean(-1)


def diagonal_band(t_q: int, t_k: int) -> torch.Tensor:
    """(Tq, Tk) True where key k is within one position of query q's place scaled onto the source."""
    place = torch.arange(t_q, dtype=torch.float64) * (t_k - 1) / max(t_q - 1, 1)  # (Tq,)
    return (torch.arange(t_k, dtype=torch.float64)[None, :] - place[:, None]).abs() <= 1.0


def monotonicity(weights: torch.Tensor) -> tuple[torch.Tensor, float]:
    """((H,) mass on the source's scaled diagonal band, a uniform head's mass); ``weights`` (H, Tq, Tk)."""
    band = diagonal_band(weights.size(1), weights.size(2))
    scores = (weights * band.to(weights.dtype)).sum(-1).mean(-1)
    return scores, float(band.double().mean())


def self_patterns(weights: torch.Tensor, causal: bool) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """(pattern -> (H,) scores, pattern -> chance) of one self-attention matrix (H, T, T)."""
    t = weights.size(-1)
    idx = torch.arange(t)
    seen = (idx + 1).to(weights.dtype) if causal else torch.full((t,), float(t))  # keys each query sees
    scores = {"diagonal": weights[:, idx, idx].mean(-1)}
    chance = {"diagonal": float((1 / seen).mean())}
    if t > 1:
        later = idx[1:]
        scores["previous"] = weights[:, later, later - 1].mean(-1)
        scores["first"] = weights[:, later, 0].mean(-1)
        chance["previous"] = chance["first"] = float((1 / seen[1:]).mean())
    return scores, chance


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1).mean(-1)  # (H,)


def alignment_atlas(model: nn.Module, task: Task, sources: list[str] | None = None) -> Atlas:
    """Every head of a translator scored on greedy translations of ``sources`` (the task's examples)."""
    texts = sources if sources is not None else task.examples_for_display(5)
    sums: dict[str, dict[str, torch.Tensor]] = {}
    chances: dict[str, dict[str, float]] = {}
    entropies: dict[str, torch.Tensor] = {}
    for text in texts:
        result = generate(model, task, text, max_new_tokens=NEW_TOKENS)
        for name, w in result.attention.items():
            w = w.double()
            if name.endswith(".cross"):
                walk, walk_chance = monotonicity(w)
                scores = {"sharp": sharpness(w), "monotonic": walk}
                chance = {"sharp": 1.0 / w.size(-1), "monotonic": walk_chance}
            else:
                scores, chance = self_patterns(w, causal=name.startswith("decoder."))
            total = sums.setdefault(name, {})
            for k, v in scores.items():
                total[k] = total.get(k, torch.zeros_like(v)) + v / len(texts)
            seen = chances.setdefault(name, {})
            for k, c in chance.items():
                seen[k] = seen.get(k, 0.0) + c / len(texts)
            entropies[name] = entropies.get(name, torch.zeros(w.size(0), dtype=w.dtype)) + _entropy(w) / len(texts)
    heads = [
        _head(name, i, sums[name], chances[name], float(entropies[name][i]))
        for name in sums
        for i in range(entropies[name].numel())
    ]
    about = (
        f"{len(texts)} example sentences translated greedily (up to {NEW_TOKENS} tokens); cross heads: "
        "sharp = mean largest weight per target token, monotonic = mass within one source position "
        "of the scaled diagonal"
    )
    return Atlas(sorted(heads, key=lambda s: -s.best_score), {PROBE: about})


def _head(name: str, i: int, totals: dict[str, torch.Tensor], chance: dict[str, float], entropy: float) -> HeadScore:
    scores = {k: round(float(v[i]), 4) for k, v in totals.items()}
    chance = {k: round(c, 4) for k, c in chance.items() if k in scores}
    best = max(scores, key=lambda k: scores[k])
    pattern = best if clears_floor(scores[best], chance[best]) else None
    return HeadScore(name, i, scores, round(entropy, 4), best, scores[best], dict.fromkeys(scores, PROBE),
                     chance, pattern)
