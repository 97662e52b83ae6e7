"""The Attention pane's worker: the walkthrough's q, k and v, read by replaying the decode
on show with hooks (``core/analysis/basics/walkthrough.py``), posted as ``ProjectionsReady``.

The pane runs ``replay_projections`` with ``run_worker(..., thread=True)``; a failure is
one line in the message, never a traceback. The importance table has its own workers
(``importance_panel.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

from tui_lab.core.errors import one_line

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.basics.walkthrough import Projections
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.tasks.protocol import Task

NAMESPACE = "attention_pane"  # the pane's handler: on_attention_pane_projections_ready

Post = Callable[[Message], object]


class ProjectionsReady(Message, namespace=NAMESPACE):
    """The walkthrough's q/k/v arrived from the worker (``error``: why not, in one line)."""

    def __init__(
        self, result: DecodeResult | FillMaskResult, projections: dict[str, Projections] | None, error: str | None
    ) -> None:
        super().__init__()
        self.result = result
        self.projections = projections
        self.error = error


def replay_projections(
    post: Post, model: nn.Module, task: Task, result: DecodeResult | FillMaskResult,
    options: dict[str, object] | None,
) -> None:
    """Replay the decode with hooks to get every module's q, k and v (thread)."""
    from tui_lab.core.analysis.basics.walkthrough import collect_projections

    try:
        projections = collect_projections(model, task, result, options)
    except Exception as exc:  # noqa: BLE001 - show it, never crash the lab
        post(ProjectionsReady(result, None, one_line(exc)))
        return
    post(ProjectionsReady(result, projections, None))
