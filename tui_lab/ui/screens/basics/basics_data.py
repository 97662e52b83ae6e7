"""What the basics screen shows, computed from the core without Textual (run it in a thread).

``BasicsSource`` is the model the lab holds (the run Decode uses) or, with none,
the lab's config with its model freshly built; ``compute`` asks the core's
``analysis/basics_*`` for all four pictures at once (well under a second on
the shipped presets but paper-base, whose model takes seconds to build) and
turns the matrices into the [0, 1] grids the heatmaps draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tui_lab.core.opening.model_handle import opened_from_files

if TYPE_CHECKING:  # torch loads only when compute() runs
    from collections.abc import Callable

    from torch import nn

    from tui_lab.core.analysis.basics.basics_masks import MaskPicture
    from tui_lab.core.analysis.basics.basics_positions import PositionPicture
    from tui_lab.core.analysis.basics.basics_scaling import ScalingRow
    from tui_lab.core.analysis.basics.basics_schedule import SchedulePicture
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.tasks.protocol import Task

LENGTH = 16  # positions shown
MAX_DIMS = 64  # table columns shown


@dataclass
class BasicsSource:
    """The lab's config and the run whose model Decode uses (None: build the config's, untrained)."""

    config: LabConfig
    run: Any = None  # a RemoteRun or a loaded model: ``.model``, ``.task``, ``.config``, ``.step``
    text: str | None = None  # the last decoded input, for the masks and scaling


@dataclass
class Grid:
    """A matrix scaled to [0, 1] for a heatmap, with its labels and what the shade spans."""

    values: list[list[float]]
    rows: list[str]
    cols: list[str]
    low: float = 0.0
    high: float = 1.0


@dataclass
class BasicsData:
    """The four pictures of one model (an error line in place of a picture that failed)."""

    label: str
    positions: PositionPicture | None = None
    masks: MaskPicture | None = None
    scaling: list[ScalingRow] = field(default_factory=list)
    random: list[ScalingRow] = field(default_factory=list)
    schedule: SchedulePicture | None = None
    errors: dict[str, str] = field(default_factory=dict)  # view -> one line
    text: str | None = None  # the typed input used, if any


def compute(source: BasicsSource) -> BasicsData:
    """All four pictures of ``source``'s model (thread)."""
    from tui_lab.core.analysis.basics.basics_masks import mask_picture
    from tui_lab.core.analysis.basics.basics_positions import position_picture
    from tui_lab.core.analysis.basics.basics_scaling import scaling_random, scaling_real
    from tui_lab.core.analysis.basics.basics_schedule import schedule_picture
    from tui_lab.core.errors import one_line

    run = source.run
    model = None if run is None else run.model  # a RemoteRun may fetch its weights here
    if run is not None and model is not None:
        config, task = run.config, run.task
        opened = opened_from_files(run)  # a real model opened from files
        label = f"{config.name} (opened from files)" if opened else f"{config.name} at step {run.step:,}"
    else:
        config = source.config
        model, task = _fresh(config)
        label = f"{config.name}, untrained: the initial weights of its model"
    data = BasicsData(label, schedule=schedule_picture(config))
    arch = config.model.arch
    text = source.text
    if text and task.validate_input(text) is not None:
        text = None  # an input of another task: the examples alone
    data.text = text
    steps: list[tuple[str, Callable[[], None]]] = [
        ("positions", lambda: setattr(data, "positions", position_picture(model, LENGTH))),
        ("masks", lambda: setattr(data, "masks", mask_picture(model, task, arch, text))),
        ("scaling", lambda: setattr(data, "scaling", scaling_real(model, task, arch, text))),
        ("random", lambda: setattr(data, "random", scaling_random())),
    ]
    for view, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - one picture failing leaves the others
            data.errors[view] = one_line(exc)
    return data


def is_encoder_picture(picture: MaskPicture) -> bool:
    """Whether ``picture`` is an encoder-only model's (its row read under padding alone)."""
    return picture.encoder


_built: list[tuple[LabConfig, nn.Module, Task]] = []  # (config, model, task): the last config's fresh model


def _fresh(config: LabConfig) -> tuple[nn.Module, Task]:
    """The config's untrained model, built once while the config stays the same
    (paper-base's takes seconds); only the screen's worker thread calls this."""
    from tui_lab.core.analysis.basics.basics_example import fresh_model

    if not _built or _built[0][0] != config:
        _built[:] = [(config, *fresh_model(config))]
    return _built[0][1], _built[0][2]


def scaled(rows: list[list[float]], low: float | None = None, high: float | None = None) -> tuple[list[list[float]], float, float]:
    """``rows`` mapped linearly to [0, 1] (from ``low``..``high``, default their range); an
    exact 0 is nudged up, since the heatmap draws 0 as masked."""
    flat = [v for row in rows for v in row]
    lo = min(flat, default=0.0) if low is None else low
    hi = max(flat, default=1.0) if high is None else high
    span = (hi - lo) or 1.0
    return [[max((v - lo) / span, 1e-6) for v in row] for row in rows], lo, hi


def position_grids(picture: PositionPicture) -> tuple[Grid, Grid]:
    """(the table, the dot products) as heatmap grids."""
    table = [row[:MAX_DIMS] for row in picture.table.tolist()]
    if picture.kind == "sinusoidal":
        values, lo, hi = scaled(table, -1.0, 1.0)
    elif picture.kind == "rope":
        values, lo, hi = scaled(table, 0.0, 2 * math.pi)
    else:
        values, lo, hi = scaled(table)
    positions = [str(i) for i in range(picture.length)]
    dims = [str(j) for j in range(len(table[0]) if table else 0)]
    sim, s_lo, s_hi = scaled(picture.similarity.tolist())
    return Grid(values, positions, dims, lo, hi), Grid(sim, positions, positions, s_lo, s_hi)


def mask_grids(picture: MaskPicture) -> list[tuple[str, Grid]]:
    """The padding, causal and combined masks as 0/1 grids labelled by the row's tokens; an
    encoder's picture names its own (padding only) first, then a decoder's beside it."""
    labels = [x or "pad" for x in picture.labels]
    if is_encoder_picture(picture):
        named = (
            ("encoder (this model): padding only", picture.padding),
            ("a decoder's causal", picture.causal),
            ("a decoder's padding & causal", picture.padding & picture.causal),
        )
    else:
        named = (
            ("padding", picture.padding), ("causal", picture.causal), ("padding & causal", picture.combined)
        )
    return [
        (name, Grid([[1.0 if v else 0.0 for v in row] for row in grid.tolist()], labels, labels))
        for name, grid in named
    ]
