"""What the Attention pane draws, without Textual: a decode's captures grouped by kind and
layer, its header and cursor lines (Rich ``Text``), and the overview's cut of a long text.

The widget (``attention_pane.py``) keeps which kind, layer and head are on show and
puts these on screen.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.state.decoding import axis_labels

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult

    AnyDecode = DecodeResult | FillMaskResult

# The overview draws every head of a layer at once: beyond this many tokens it shows
# the last ones (a real model's long text), and the single-head map shows them all.
OVERVIEW_TOKENS = 24

KINDS = (
    ("encoder self", re.compile(r"^encoder\.(\d+)\.self$")),
    ("decoder self", re.compile(r"^decoder\.(\d+)\.self$")),
    ("cross", re.compile(r"^decoder\.(\d+)\.cross$")),
)


def model_arch(model: object, names: list[str]) -> str:
    """The decode's model's shape: its config's, else read from its capture names (an
    encoder-only model's self-attention is named ``encoder.{L}.self`` too)."""
    from tui_lab.core.model.models import EmbeddingsAndHead  # every lab model: its config

    if isinstance(model, EmbeddingsAndHead):
        return str(model.config.arch)
    return "encoder-decoder" if any(n.startswith("encoder.") for n in names) else "decoder-only"


def kinds_of(names: list[str]) -> list[tuple[str, list[str]]]:
    """The capture names by kind (encoder self, decoder self, cross), each kind's by layer;
    kinds with no capture left out."""
    kinds = []
    for kind, pattern in KINDS:
        layers = sorted(((int(m.group(1)), n) for n in names if (m := pattern.match(n))), key=lambda p: p[0])
        if layers:
            kinds.append((kind, [n for _, n in layers]))
    return kinds


def empty_header(config: LabConfig, stacks: str) -> Text:
    """The header before any decode: what the lab's model has (``stacks``: its layers, as
    the model summary says them)."""
    return Text(
        f"Attention · {config.name}: {config.model.arch}, {stacks}, "
        f"{config.model.n_heads} heads · nothing decoded yet",
        style="dim",
    )


def header(
    kinds: list[tuple[str, list[str]]], kind_index: int, layer: str, head: str, capture_name: str | None,
    ablated: str | None, result: AnyDecode,
) -> Text:
    """The header of a decode on show: the kinds (the one on show lit), ``layer`` and ``head``
    (``i/n`` or ``all``), the capture's name, the heads switched off and the input."""
    text = Text()
    for i, (kind, _) in enumerate(kinds):
        if i:
            text.append(" │ ", style="dim")
        text.append(kind, style="bold reverse" if i == kind_index else "dim")
    text.append("   layer ", style="dim")
    text.append(layer, style="bold")
    text.append("   head ", style="dim")
    text.append(head, style="bold")
    text.append(f"   {capture_name}", style="dim italic")
    if ablated is not None:  # before the input: the line is cut at the pane's width
        text.append(f"   ablated: {ablated}", style="bold magenta")
    text.append(f"   input {result.input!r} → {result.output!r}", style="dim")
    return text


def cursor_line(q: str, k: str, row: int, col: int, value: float) -> Text:
    """Which query/key pair is under the cursor, and its weight."""
    text = Text()
    text.append("query ", style="dim")
    text.append(f"{q!r}", style="bold")
    text.append(f" (row {row + 1}) → key ", style="dim")
    text.append(f"{k!r}", style="bold")
    text.append(f" (col {col + 1}): weight ", style="dim")
    text.append(f"{value:.4f}", style="bold yellow")
    return text


def labels(result: AnyDecode, name: str, weights: Tensor) -> tuple[list[str], list[str]]:
    """The query and key labels of capture ``name`` (weights (H, Tq, Tk)), numbered past
    the labels the decode kept."""
    rows, cols = axis_labels(result, name)
    n_q, n_k = int(weights.shape[1]), int(weights.shape[2])
    return (list(rows[:n_q]) + [str(i) for i in range(len(rows), n_q)],
            list(cols[:n_k]) + [str(j) for j in range(len(cols), n_k)])


def overview_cut(
    weights: Tensor, rows: list[str], cols: list[str], name: str
) -> tuple[Tensor, list[str], list[str], str]:
    """What the overview draws of (H, Tq, Tk) ``weights``: the last OVERVIEW_TOKENS tokens of a
    longer text, with a title that says so."""
    n_q, n_k = int(weights.shape[1]), int(weights.shape[2])
    if n_q <= OVERVIEW_TOKENS and n_k <= OVERVIEW_TOKENS:
        return weights, rows, cols, name
    title = f"{name} (its last {OVERVIEW_TOKENS} of {max(n_q, n_k)} tokens; a shows one head whole)"
    return (weights[:, -OVERVIEW_TOKENS:, -OVERVIEW_TOKENS:], rows[-OVERVIEW_TOKENS:],  # (H, <=N, <=N)
            cols[-OVERVIEW_TOKENS:], title)
