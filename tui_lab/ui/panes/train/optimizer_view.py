"""The optimizer at work, as the Train pane shows it: no Textual here.

A run reports, every few steps, each parameter group's learning rate, gradient
norm and update-to-weight ratio, with its tokens per second and MFU
(``OptimizerEvent``). ``GroupSeries`` keeps them (appended from the training
thread, read by the UI); the chart beside the loss shows one of ``VIEWS``,
which a key cycles; ``lines`` gives the chosen view's lines, one per group;
``speed_text`` the status line's speed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tui_lab.core.runs.events import OptimizerEvent

# What the chart beside the loss shows, in the order the key cycles them.
VIEWS = ("loss", "lr", "grad_norm", "update_ratio")
TITLES = {
    "loss": "loss",
    "lr": "learning rate per group",
    "grad_norm": "gradient norm per group (before clipping)",
    "update_ratio": "update / weight norm per group",
}
# Each group's colour, by name (a group of another name takes the next spare one).
COLOURS = {"muon": "magenta", "embed": "cyan", "head": "orange", "decay": "cyan", "no_decay": "green"}
SPARE = ("blue", "red", "yellow", "white")


def next_view(view: str) -> str:
    """The view after ``view`` in ``VIEWS`` (round again after the last)."""
    return VIEWS[(VIEWS.index(view) + 1) % len(VIEWS)] if view in VIEWS else VIEWS[0]


@dataclass
class GroupSnapshot:
    """Copies of the series, safe on the UI thread: the measured steps, per group its
    figures at each of them, and the newest speed."""

    steps: list[int] = field(default_factory=list)
    groups: list[dict[str, dict[str, float]]] = field(default_factory=list)
    tokens_per_s: float | None = None
    mfu: float | None = None


class GroupSeries:
    """Thread-safe ``OptimizerEvent`` series of one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = GroupSnapshot()

    def clear(self) -> None:
        with self._lock:
            self._data = GroupSnapshot()

    def add(self, event: OptimizerEvent) -> None:
        """Append one measurement (any thread); a repeated step replaces the later ones."""
        with self._lock:
            d = self._data
            if d.steps and event.step <= d.steps[-1]:  # a resumed run repeats its last steps
                keep = next(i for i, s in enumerate(d.steps) if s >= event.step)
                del d.steps[keep:], d.groups[keep:]
            d.steps.append(event.step)
            d.groups.append(event.groups)
            d.tokens_per_s, d.mfu = event.tokens_per_s, event.mfu

    def snapshot(self) -> GroupSnapshot:
        with self._lock:
            d = self._data
            return GroupSnapshot(list(d.steps), list(d.groups), d.tokens_per_s, d.mfu)


def lines(view: str, data: GroupSnapshot) -> list[tuple[str, str, list[float], list[float]]]:
    """(group, colour, steps, values) per group for ``view`` (lr, grad_norm or update_ratio)."""
    names: list[str] = []
    for groups in data.groups:
        names += [n for n in groups if n not in names]
    spare = iter(SPARE)
    out = []
    for name in names:
        xs = [float(s) for s, g in zip(data.steps, data.groups, strict=True) if name in g]
        ys = [g[name].get(view, float("nan")) for g in data.groups if name in g]
        colour = COLOURS.get(name) or next(spare, "white")
        out.append((name, colour, xs, ys))
    return out


def speed_text(tokens_per_s: float | None, mfu: float | None) -> str:
    """``12.3k tok/s · MFU 2.1%``; empty before the first measurement."""
    if not tokens_per_s:
        return ""
    tps = f"{tokens_per_s / 1000:.1f}k" if tokens_per_s >= 1000 else f"{tokens_per_s:.0f}"
    return f"{tps} tok/s" + (f" · MFU {mfu:.1%}" if mfu is not None else "")
