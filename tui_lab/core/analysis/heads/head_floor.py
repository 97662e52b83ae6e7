"""The floor a head's best score must clear before the atlas gives it a label.

A score alone is not enough: on a short probe a head that spreads its weight
evenly already puts 1/3 of it on the first token of a 3-token source, and on
a 64-token repeat probe the same head puts under 0.1 there. So the floor is
on the score's *lift* over chance, ``(score - chance) / (1 - chance)``, where
``chance`` is the score of a head that spreads every row evenly over the keys
it may see (the same targets, the same queries): 0 for such a head, 1 for a
head that attends only to the targets.

LABEL_FLOOR = 0.3 sits between what heads without the pattern reach and what
heads with it reach, measured here (lift of each head's best score):
- random-weight heads on the standard repeat probe (2 x 32 tokens, 16 rows;
  decoder-only, 4 layers x 4 heads, 50,257 ids, the lab's init and GPT-2's
  N(0, 0.02); seeds 0-2): at most 0.03;
- random-weight heads of every shipped preset on its own task probe (seeds
  0-2, 950 heads): at most 0.03 for the decoder-only presets; the
  encoder-decoder ones, on sources of 3 to 10 tokens, mostly under 0.15, but
  6 heads reach 0.34-0.49 on ``first`` (they do put 50-68% of their weight on
  the first of a few tokens: sinusoidal positions give a random head a
  positional bias);
- the one-layer induction control (``induction-1layer``, 2,000 steps), which
  cannot form an induction head: its four heads' best is induction at 0.18
  (lift 0.13) on its task's repeats, 0.23 (lift 0.20) on the standard probe;
- heads that do what their label says: the two-layer ``induction`` preset's
  layer-2 heads (1,710 steps, its 120 s limit), induction 0.67-0.77 (lift
  0.65-0.76); the learned copy model's cross-attention heads, alignment
  0.74-0.89 (lift 0.64-0.85).
The two-layer model's layer-1 heads put 0.19-0.31 of their weight on the
previous token (lift 0.12-0.24): below the floor, like the control, so they
are not called previous-token heads either; their scores are still shown.
"""

from __future__ import annotations

LABEL_FLOOR = 0.3


def lift(score: float, chance: float) -> float:
    """How far ``score`` is from chance toward 1: 0 at chance (or below), 1 at 1."""
    if chance >= 1.0 - 1e-9:  # every head must score 1: the pattern says nothing
        return 0.0
    return max(0.0, (score - chance) / (1.0 - chance))


def clears_floor(score: float, chance: float, floor: float = LABEL_FLOOR) -> bool:
    """Whether a pattern scoring ``score`` (chance level ``chance``) may label the head."""
    return lift(score, chance) >= floor
