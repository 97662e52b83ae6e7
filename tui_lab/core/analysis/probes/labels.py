"""A user's label file: what to probe for when the task declares no such variable.

One example per line, ``TEXT<TAB>LABELS``: one label (the example's, read at its
last token) or one label per token of TEXT as the model tokenizes it (each read at
its token), separated by spaces. Blank lines and lines starting with ``#`` are
skipped. Every mistake is one line naming the file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tui_lab.core.errors import LabError

MIN_LINES = 4


@dataclass(frozen=True)
class LabelLine:
    """One example: its text, its labels and the line of the file it came from."""

    text: str
    labels: tuple[str, ...]
    line: int


def read_labels(path: str | Path) -> list[LabelLine]:
    """The examples of a label file; LabError (one line) for a file that cannot be one."""
    where = Path(path)
    try:
        raw = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabError(f"{where}: no such label file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"{where}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
    out: list[LabelLine] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        text, tab, labels = line.partition("\t")
        if not tab or not text:
            raise LabError(f"{where}:{number}: write TEXT<TAB>LABEL (or one label per token)")
        parts = tuple(labels.split())
        if not parts:
            raise LabError(f"{where}:{number}: no label after the tab")
        out.append(LabelLine(text, parts, number))
    if len(out) < MIN_LINES:
        raise LabError(f"{where}: {len(out)} labelled example(s); a probe needs at least {MIN_LINES}")
    if len({label for line in out for label in line.labels}) < 2:
        raise LabError(f"{where}: every label is the same: nothing to tell apart")
    return out


def check_lengths(path: str | Path, lines: list[LabelLine], count_tokens: Callable[[str], int]) -> None:
    """Each line has one label or one per token (``count_tokens`` of its text): else LabError
    (one line) naming the first line of the wrong length."""
    for line in lines:
        n = count_tokens(line.text)
        if len(line.labels) not in (1, n):
            raise LabError(f"{path}:{line.line}: {len(line.labels)} labels for {n} tokens of {line.text!r}: "
                           "give 1 (the example's) or one per token")
