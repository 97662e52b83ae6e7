"""The line under the Patch pane's heatmap: the cell under the cursor, its value, the metric
before (the corrupted run) and after (this cell patched), and its head's atlas label."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.panes.patch.patch_view import Atlas, head_name

if TYPE_CHECKING:
    from tui_lab.core.analysis.patching.activation_patching import PatchResult


def cell_readout(result: PatchResult, row: int, col: int, atlas: Atlas) -> Text:
    """What the cursor is on, in two lines."""
    r_label, c_label = result.rows[row], result.cols[col]
    value, raw = result.values[row][col], result.raw[row][col]
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{r_label} · {c_label}", style="bold")
    out.append(f"  {value:+.3f}", style="bold")
    out.append(" of the way from corrupted (0) to clean (1)", style="dim")
    out.append("\nlogit diff ", style="dim")
    out.append(f"corrupted {result.corrupt:.3f} → patched {raw:.3f}")
    out.append(f"  (clean {result.clean:.3f})", style="dim")
    head = head_name(result.site, r_label, c_label)
    if head is None:
        out.append("  ·  a position: no single head", style="dim")
    elif head in atlas:
        label, score = atlas[head]
        out.append("  ·  atlas: ", style="dim")
        out.append(f"{head} {label} {score:.2f}", style="bold")
    else:
        out.append(f"  ·  atlas: {head} not scored yet", style="dim")
    return out
