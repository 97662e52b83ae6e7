"""The lens switch's words, Textual-free: which lens is on show, and its per-layer KL to
the output and top-1 agreement as three aligned lines under the lens table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.lens_readout import LayerScore

NAMES = {"logit": "logit lens", "tuned": "tuned lens", "jacobian": "Jacobian lens"}


def title(kind: str, following: str) -> str:
    """The lens table's title: the lens on show and what V switches to."""
    return f"{NAMES[kind]} (V: {NAMES[following]})"


def scores_text(kind: str, following: str, scores: list[LayerScore]) -> Text:
    """Three lines: the lens and the layers; KL(output || layer) in nats; top-1 agreement."""
    label = title(kind, following)
    head = max(len(label), len("top-1 agreement"))
    width = max([7, *(len(s.layer) for s in scores)])
    text = Text(f"{label:<{head}}", style="bold")
    text.append("".join(f"  {s.layer:>{width}}" for s in scores) + "\n")
    text.append(f"{'KL to the output':<{head}}" + "".join(f"  {s.kl:>{width}.3f}" for s in scores) + "\n")
    text.append(f"{'top-1 agreement':<{head}}" + "".join(f"  {s.agreement:>{width}.0%}" for s in scores))
    return text
