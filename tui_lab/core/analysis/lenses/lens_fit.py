"""What fitting a tuned or Jacobian lens shares: how it reports progress, how it is told
to stop, and the report it returns (``FitReport``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tui_lab.core.errors import LabError

# (done, total, what) and "stop now?", as the verbs take them (core/verbs/verb.py)
FitProgress = Callable[[int, int, str], None]
FitCancelled = Callable[[], bool]


class LensFitStopped(LabError):
    """The caller's ``cancelled()`` said stop; no lens is returned."""


@dataclass
class FitReport:
    """How a fit went: steps (tuned) or prompts (Jacobian) done, seconds, the loss per step (tuned)."""

    done: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    data: str = ""  # what it was fitted on: the run's data, the text file, Python's help text

    def to_json(self) -> dict[str, object]:
        """``done``, ``seconds``, ``loss_first`` and ``loss_last`` (None for a Jacobian lens), ``data``."""
        first = round(self.losses[0], 6) if self.losses else None
        last = round(self.losses[-1], 6) if self.losses else None
        return {"done": self.done, "seconds": round(self.seconds, 3), "loss_first": first, "loss_last": last,
                "data": self.data}


def quiet(done: int, total: int, what: str) -> None:
    """The default progress: say nothing."""


def never() -> bool:
    """The default ``cancelled``: run to the end."""
    return False


def stop_if(cancelled: FitCancelled) -> None:
    """Raise ``LensFitStopped`` when the caller has asked the fit to stop."""
    if cancelled():
        raise LensFitStopped("stopped")
