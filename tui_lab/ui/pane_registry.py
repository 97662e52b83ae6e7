"""The lab's panes, listed once: each one's id, title, key, class, bindings and styles.

Everything else that names the panes reads this list: the app's pane keys (1-N) and
``SCOPES`` below, the tab bar, the help screen, the command palette, the status bar's
"1-N panes", which panes are built after the first frame (``lazy_panes.py``), the app's
style sheets, each pane's ``PANE_ID``, and the import contract that keeps the panes'
packages apart (a test compares pyproject's list with ``pane_packages()``).

A pane's class is named by its dotted path and imported only when it is built, so this
module sits below the panes (they read their ``PANE_ID`` here) and imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding, BindingType
from textual.widget import Widget

from tui_lab.ui import key_bindings as kb
from tui_lab.ui.state.lab_state import LabState


@dataclass(frozen=True)
class PaneStart:
    """What a pane is built from: the lab's state, and the run folder the lab was started on."""

    state: LabState
    run_dir: Path | None = None
    follow: bool = False


# (the pane's class, what it is built from, its DOM id) -> the pane widget.
Maker = Callable[[Callable[..., Widget], PaneStart, str], Widget]


def _plain(cls: Callable[..., Widget], start: PaneStart, widget_id: str) -> Widget:
    return cls(id=widget_id)


def _build(cls: Callable[..., Widget], start: PaneStart, widget_id: str) -> Widget:
    return cls(start.state.config, start.state.user_dir, id=widget_id)


def _train(cls: Callable[..., Widget], start: PaneStart, widget_id: str) -> Widget:
    run_dir = start.run_dir
    return cls(
        start.state.config,
        start.state.runs_root,
        open_dir=run_dir if not start.follow else None,
        follow_dir=run_dir if start.follow else None,
        id=widget_id,
    )


def _runs(cls: Callable[..., Widget], start: PaneStart, widget_id: str) -> Widget:
    return cls(start.state.runs_root, id=widget_id)


@dataclass(frozen=True)
class PaneSpec:
    """One pane: ``id`` ("train"), ``title`` (its tab), ``key`` (the key that shows it),
    ``cls`` ("module:Class", imported when built), ``bindings`` (its class's ``BINDINGS``),
    ``scope`` (its widgets' bindings, live with the pane's), ``styles`` (its .tcss, relative
    to ``tui_lab/ui``), ``make`` (its constructor's arguments) and ``first_frame`` (built
    before the first frame; the others are built after it)."""

    id: str
    title: str
    key: str
    cls: str
    bindings: list[BindingType]
    scope: tuple[list[BindingType], ...] = ()
    styles: str | None = None
    make: Maker = _plain
    first_frame: bool = False

    @property
    def module(self) -> str:
        """The module that holds the pane's class."""
        return self.cls.split(":")[0]

    @property
    def package(self) -> str:
        """The pane's package (``tui_lab.ui.panes.train``): no other pane imports it."""
        return self.module.rsplit(".", 1)[0]


_PANES = "tui_lab.ui.panes"
PANES: tuple[PaneSpec, ...] = (
    PaneSpec("build", "Build", "1", f"{_PANES}.builder.build_pane:BuildPane", kb.BUILD,
             (kb.FORM, kb.PICK_LIST), "styles/build.tcss", _build, first_frame=True),
    PaneSpec("train", "Train", "2", f"{_PANES}.train.train_pane:TrainPane", kb.TRAIN,
             (), "panes/train/train.tcss", _train),
    PaneSpec("decode", "Decode", "3", f"{_PANES}.decode.decode_pane:DecodePane", kb.DECODE,
             (kb.PICK_LIST,), "panes/decode/decode.tcss"),
    PaneSpec("attention", "Attention", "4", f"{_PANES}.attention.attention_pane:AttentionPane",
             kb.ATTENTION, (kb.HEATMAP,), "panes/attention/attention.tcss"),
    PaneSpec("params", "Params", "5", f"{_PANES}.params.params_pane:ParamsPane", kb.PARAMS,
             (), "styles/params.tcss"),
    PaneSpec("runs", "Runs", "6", f"{_PANES}.runs.runs_pane:RunsPane", kb.RUNS,
             (kb.RUN_TABLE,), "styles/runs.tcss", _runs),
    PaneSpec("patch", "Patch", "7", f"{_PANES}.patch.patch_pane:PatchPane", kb.PATCH,
             (kb.HEATMAP, kb.PICK_LIST), "panes/patch/patch.tcss"),
    PaneSpec("features", "Features", "8", f"{_PANES}.features.features_pane:FeaturesPane",
             kb.FEATURES, (kb.FEATURE_LIST,), "panes/features/features.tcss"),
    PaneSpec("circuit", "Circuit", "9", f"{_PANES}.circuit.circuit_pane:CircuitPane", kb.CIRCUIT,
             (), "panes/circuit/circuit.tcss"),
)
PANES_GROUP = Binding.Group("Panes", compact=True)


def spec(pane_id: str) -> PaneSpec:
    """The pane with this id ("train")."""
    for pane in PANES:
        if pane.id == pane_id:
            return pane
    raise KeyError(pane_id)


def pane_id(module: str) -> str:
    """The id of the pane whose class lives in ``module`` (a pane's ``PANE_ID = pane_id(__name__)``)."""
    for pane in PANES:
        if pane.module == module:
            return pane.id
    raise KeyError(module)


def tabs() -> list[tuple[str, str]]:
    """(pane id, "1 Build") for each pane in tab order: the tab bar's labels."""
    return [(pane.id, f"{pane.key} {pane.title}") for pane in PANES]


def pane_keys_text() -> str:
    """The keys that switch panes, as the header and help write them: "1-8"."""
    return f"{PANES[0].key}-{PANES[-1].key}" if len(PANES) > 1 else PANES[0].key


def pane_packages() -> list[str]:
    """Each pane's package, in tab order: the import contract keeps them independent."""
    return [pane.package for pane in PANES]


def style_sheets() -> list[str]:
    """The panes' .tcss files (relative to ``tui_lab/ui``), in tab order."""
    return [pane.styles for pane in PANES if pane.styles]


# The app's keys: one per pane to show it, then the keys that work everywhere.
APP: list[BindingType] = [
    *(
        Binding(pane.key, f"show_pane('{pane.id}')", pane.title, group=PANES_GROUP,
                id=f"app.{pane.id}")
        for pane in PANES
    ),
    *kb.EVERYWHERE,
]

# The lists whose keys are live at the same time (a pane with the app's keys and its
# widgets'; a modal screen alone, a full screen with the app's): a keymap entry that
# gives its binding a key another binding of one of its scopes has is a conflict.
SCOPES: dict[str, tuple[list[BindingType], ...]] = {
    **{pane.title: (APP, pane.bindings, *pane.scope) for pane in PANES},
    "the basics screen": (kb.BASICS,),
    "the Fourier view": (APP, kb.FOURIER),
    "the Probes screen": (APP, kb.PROBES, kb.HEATMAP),
    "help": (kb.HELP,),
    "the open-run dialog": (kb.OPEN_RUN,),
    "the save-preset dialog": (kb.SAVE_PRESET,),
    "the steer dialog": (kb.STEER,),
}


def all_bindings() -> list[Binding]:
    """Every binding of the lab, each once."""
    seen: dict[int, Binding] = {}
    for scope in SCOPES.values():
        for group in scope:
            for binding in group:
                if isinstance(binding, Binding):  # every one here is
                    seen.setdefault(id(binding), binding)
    return list(seen.values())
