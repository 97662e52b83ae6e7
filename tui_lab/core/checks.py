"""The one-line refusals of numbers a user typed: NaN, infinity and values out of range.

Requests (``core/verbs``), presets and the lab's forms all check numbers here, so
``--coef nan`` and a NaN typed in a form are refused with the same words.
Imports nothing but ``errors``: every layer of the core may use it.
"""

from __future__ import annotations

import math

from tui_lab.core.errors import LabError


def finite(name: str, value: float) -> float:
    """``value`` if it is a finite number; LabError naming ``name`` if NaN or infinite."""
    if not math.isfinite(value):
        raise LabError(f"{name}: must be a finite number, got {value}")
    return value


def in_range(
    name: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` if finite and within [low, high] (an open end excludes its bound); else LabError."""
    finite(name, value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        raise LabError(f"{name}: must be {_bounds(low, high, low_open, high_open)}, got {value}")
    return value


def positive(name: str, value: float) -> float:
    """``value`` if finite and > 0; else LabError."""
    return in_range(name, value, 0, low_open=True)


def at_least(name: str, value: float, low: float) -> float:
    """``value`` if finite and >= ``low``; else LabError."""
    return in_range(name, value, low)


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"{'>' if low_open else '>='} {_num(low)}"
    if low is None:
        return f"{'<' if high_open else '<='} {_num(high)}"
    return f"in {'(' if low_open else '['}{_num(low)}, {_num(high)}{')' if high_open else ']'}"


def _num(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def check_context(n_tokens: int, limit: int, what: str = "input") -> None:
    """Refuse, before any model work, ``what`` of ``n_tokens`` tokens past a context of ``limit``."""
    if n_tokens > limit:
        raise LabError(f"{what} of {n_tokens} tokens: the model reads at most {limit}")
