"""Direct logit attribution as bars: each head's, MLP's, the embeddings' and the biases'
direct share of the logit difference, then the residual stream accumulated layer by layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.direct_logit_attribution import DlaResult

BAR = 24  # characters of the longest bar on each side of 0


def signed_bar(value: float, limit: float, width: int = BAR) -> Text:
    """A bar left of the axis (red) for a negative value, right of it (blue) for a positive one."""
    n = round(width * min(abs(value) / limit, 1.0)) if limit > 0 else 0
    out = Text(no_wrap=True)
    if value < 0:
        out.append(" " * (width - n) + "█" * n, style="red")
        out.append("│" + " " * width, style="dim")
    else:
        out.append(" " * width + "│", style="dim")
        out.append("█" * n + " " * (width - n), style="blue")
    return out


def dla_text(dla: DlaResult, width: int = BAR) -> Text:
    """The whole bar view: a header with the sum and the model's own value, the parts, the
    accumulated residual stream."""
    parts = [(str(c["name"]), float(c["value"])) for c in dla.components]
    stages = [(str(a["name"]).replace("blocks.", "").replace(".hook_resid_pre", " resid_pre"),
               float(a["value"])) for a in dla.accumulated]
    limit = max((abs(v) for _, v in parts + stages), default=0.0) or 1.0
    name_w = max((len(n) for n, _ in parts + stages), default=4)
    what = f"{dla.answer!r} − {dla.wrong!r}" if dla.wrong is not None else repr(dla.answer)
    out = Text(no_wrap=True, overflow="crop")
    out.append("Direct logit attribution", style="bold")
    out.append(f" of {what} at the last position · parts sum to {dla.total:+.3f}, "
               f"the model's own {dla.model:+.3f}\n", style="dim")
    for name, value in parts:
        out.append(f"{name:>{name_w}} ")
        out.append_text(signed_bar(value, limit, width))
        out.append(f" {value:+.3f}\n")
    out.append("\naccumulated residual stream (through the frozen final norm)\n", style="bold")
    for name, value in stages:
        out.append(f"{name:>{name_w}} ")
        out.append_text(signed_bar(value, limit, width))
        out.append(f" {value:+.3f}\n")
    return out
