"""The lab's shared state: what one pane learns and another reads, held apart from the app.

The app owns one ``LabState`` (``host.state``); the routing fills it in as messages
cross panes, and panes read it through their host, never through ``LabApp``. State
that only one pane needs stays in that pane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.ui.state.ablation import AblationState
from tui_lab.ui.state.travel import Travel

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.ui.core_access import Core
    from tui_lab.ui.messages import Decoded, ReportReady


@dataclass
class LabState:
    """The config, the loaded core, the model Decode uses, the last decode and report, the heads
    switched off, where time travel stands, and where runs and presets live."""

    config: LabConfig
    runs_root: Path
    user_dir: Path | None = None
    # --model SOURCE (until it fails to open or a run replaces it) and its revision.
    model_source: str | None = None
    model_revision: str | None = None
    model_dtype: str = "float32"  # --dtype: what a model from files computes in
    core: Core | None = None  # torch and the core, once loaded
    core_state: str = "loading torch…"
    # The run whose model Decode uses: a RemoteRun, a ModelInHand (an opened run or
    # model) or a TrainingRun; ``opened`` is --model's ModelInHand once open.
    current_run: Any = None
    opened: ModelInHand | None = None
    last_report: ReportReady | None = None
    last_decode: Decoded | None = None
    ablation: AblationState = field(default_factory=AblationState)
    travel: Travel = field(default_factory=Travel)
    # Build's fine-tune text file for --model (Train's space fine-tunes on it), or None.
    finetune: dict[str, Any] | None = None
    # The user's keymap.yaml as applied (binding id -> keys): text that names a key follows it.
    keymap: dict[str, str] = field(default_factory=dict)
