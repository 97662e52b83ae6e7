"""``WidgetOptions``: the keyword arguments every Textual widget takes, for ``**kwargs``.

A widget of the lab that adds its own arguments passes the rest on to Textual's
``Widget.__init__``; ``**kwargs: Unpack[WidgetOptions]`` lets mypy check the
names and types of those (``id``, ``classes``...) at each call.
"""

from __future__ import annotations

from typing import TypedDict


class WidgetOptions(TypedDict, total=False):
    """``Widget.__init__``'s keyword arguments that the lab's widgets pass through."""

    name: str | None
    id: str | None
    classes: str | None
    disabled: bool
