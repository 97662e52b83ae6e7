"""A plotext plot that rebuilds only when its data, size or theme change; whole-number ticks.

``PlotextPlot.render`` rebuilds the whole plot on every repaint (about 10 ms
each); a ``CachedPlot`` keeps the last build. plotext transforms a figure's stored
data in place when it builds (``yscale("log")`` takes log10 of it), so a subclass
replays its whole figure from ``self._data`` right before every build.
"""

from __future__ import annotations

from typing import Any, Generic

from textual.app import RenderResult
from textual.geometry import Size
from textual_plotext import PlotextPlot
from typing_extensions import TypeVar

# What a subclass plots; unnamed (a subclass that says nothing), it is left unchecked.
Data = TypeVar("Data", default=Any)


def integer_ticks(last: int, count: int = 5) -> list[int]:
    """Up to ``count`` whole-number step ticks from 0 to ``last``."""
    if last <= 0:
        return [0]
    step = max(1, round(last / (count - 1)))
    ticks = list(range(0, last + 1, step))
    if ticks[-1] != last and last - ticks[-1] > step // 2:
        ticks.append(last)
    return ticks


class CachedPlot(PlotextPlot, Generic[Data]):
    """A plot whose built text is reused until ``draw`` changes the data.

    Subclasses set up the figure in ``_figure`` from ``self._data``; it runs
    afresh before every build, never on a figure that was built already.
    """

    _version = 0
    _cached: tuple[tuple[int, Size, str], RenderResult] | None = None
    _data: Data | None = None

    def render(self) -> RenderResult:
        """The plot, rebuilt only when the data, size or theme changed."""
        key = (self._version, self.size, self.app.theme)
        if self._cached is None or self._cached[0] != key:
            self.plt.clear_figure()
            self._figure()
            self._cached = (key, super().render())
        return self._cached[1]

    def _figure(self) -> None:
        raise NotImplementedError

    def _set(self, data: Data) -> None:
        """Keep the data to plot and rebuild at the next repaint."""
        self._data = data
        self._version += 1
        self.refresh()
