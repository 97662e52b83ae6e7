"""The panes of ``pane_registry``, built: before the first frame, or after it behind a stand-in.

Only the Build pane (``first_frame``) is imported before the first frame; the others
(and plotext, which the Train pane needs) are imported and built after it: in the lab,
once torch (and a ``--model``) is loaded, or as soon as one is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import import_module
from typing import cast

from textual.widget import Widget

from tui_lab.ui.pane_registry import PANES, PaneSpec, PaneStart
from tui_lab.ui.widgets.pane_stand_in import PaneStandIn
from tui_lab.ui.widgets.pane_tabs import pane_widget_id


def pane_class(spec: PaneSpec) -> Callable[..., Widget]:
    """The pane's class, imported now (``spec.cls`` is "module:Class")."""
    module, name = spec.cls.split(":")
    return cast("Callable[..., Widget]", getattr(import_module(module), name))


def build_pane(spec: PaneSpec, start: PaneStart) -> Widget:
    """The pane itself, with its DOM id (importing its module)."""
    return spec.make(pane_class(spec), start, pane_widget_id(spec.id))


def panes_in_tab_order(start: PaneStart, held: bool = False) -> list[Widget]:
    """Every pane in tab order: the first-frame ones built, each other one as a stand-in
    that builds it after the first frame. ``held``: hidden stand-ins wait for
    ``PaneStandIn.release``."""
    return [
        build_pane(spec, start)
        if spec.first_frame
        else PaneStandIn(partial(build_pane, spec, start), id=pane_widget_id(spec.id), held=held)
        for spec in PANES
    ]
