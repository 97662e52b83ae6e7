"""The Attention pane's view: Textual-free (no textual, no torch on import), and the captures
grouped as the pane's k and l keys walk them."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.helpers import ROOT


def test_the_view_imports_neither_textual_nor_torch() -> None:
    code = ("import sys, tui_lab.ui.panes.attention.attention_view; "
            "print(sorted(m for m in ('textual', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_captures_are_grouped_by_kind_then_layer_in_number_order() -> None:
    from tui_lab.ui.panes.attention.attention_view import kinds_of

    names = ["decoder.10.self", "decoder.2.cross", "encoder.1.self", "decoder.2.self", "encoder.0.self",
             "decoder.0.cross", "something.else"]
    assert kinds_of(names) == [
        ("encoder self", ["encoder.0.self", "encoder.1.self"]),
        ("decoder self", ["decoder.2.self", "decoder.10.self"]),
        ("cross", ["decoder.0.cross", "decoder.2.cross"]),
    ]
    assert kinds_of([]) == []


def test_the_overview_keeps_the_last_tokens_of_a_long_text() -> None:
    import torch

    from tui_lab.ui.panes.attention.attention_view import OVERVIEW_TOKENS, overview_cut

    n = OVERVIEW_TOKENS + 6
    labels = [str(i) for i in range(n)]
    weights, rows, cols, title = overview_cut(torch.zeros(2, n, n), labels, labels, "decoder.0.self")
    assert tuple(weights.shape) == (2, OVERVIEW_TOKENS, OVERVIEW_TOKENS)
    assert rows == cols == labels[-OVERVIEW_TOKENS:]
    assert f"its last {OVERVIEW_TOKENS} of {n} tokens" in title
    short = torch.zeros(2, 3, 3)
    assert overview_cut(short, ["a", "b", "c"], ["a", "b", "c"], "x")[3] == "x"
