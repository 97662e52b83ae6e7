"""Training a crosscoder on one hook at two or more sources, and writing its folder.

Sources are two snapshots of a run (``run`` with ``steps``; by default the first
snapshot at or after a tenth of the last one's step, and the last one) or models
(``models``: model folders, hub names in the local cache, or run folders such as
a fine-tune's). Every refusal comes before anything is written: an occupied
``out``, a step the run's history lacks, a damaged snapshot, sources whose hook,
width or vocabulary differ, one source only. ``tfx-lab crosscoder train`` and the
Features pane's diff view both run it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, Stopped, never, no_progress

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.crosscoder import Crosscoder, SourceSpec
    from tui_lab.core.sae.events import SAEStepEvent

EARLY = 0.1  # the default early snapshot: the first at or after this share of the last one's step


@dataclass(frozen=True)
class Request:
    """Where to write, which sources, which hook, the dictionary's size and the training's numbers."""

    out: str
    run: str | None = None
    steps: tuple[int, ...] | None = None  # snapshots of ``run``; None: an early one and the last
    models: tuple[str, ...] = ()
    hook: str | None = None  # None: the residual stream after the last block
    text: str | None = None  # a text file; None: the model's own text or task
    d_sae: int = 256
    l1: float = 2.0
    train_steps: int = 2000
    batch: int = 256
    lr: float = 1e-3
    tokens: int = 40_000  # activation rows collected at every source
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if (self.run is None) == (not self.models):
            raise LabError("give --run RUN (two of its snapshots) or --model A --model B, not both")
        if self.run is None and self.steps is not None:
            raise LabError("--steps picks snapshots of --run")
        if self.run is None and len(self.models) < 2:
            raise LabError(f"a crosscoder reads two or more sources: --model A --model B (got {len(self.models)})")
        if self.steps is not None:
            if len(self.steps) < 2:
                raise LabError(f"--steps: two or more snapshot steps, such as 200,2000 (got {len(self.steps)})")
            if len(set(self.steps)) != len(self.steps):
                raise LabError("--steps: each step once")
            for s in self.steps:
                at_least("--steps", s, 0)
        at_least("--d-sae", self.d_sae, 1)
        at_least("--l1", self.l1, 0)
        at_least("--train-steps", self.train_steps, 1)
        at_least("--batch", self.batch, 1)
        positive("--lr", self.lr)
        at_least("--tokens", self.tokens, 1)
        at_least("--seed", self.seed, 0)


@dataclass
class Result:
    """The folder, the sources, how training went and the features' classes and histogram."""

    out: str
    hook: str
    sources: list[str]
    step: int
    reason: str
    seconds: float
    tokens: int
    crosscoder: Crosscoder
    summary: JSON = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {"out": self.out, "hook": self.hook, "sources": self.sources, "step": self.step,
                "reason": self.reason, "seconds": round(self.seconds, 2), "tokens": self.tokens,
                **self.last, **self.summary}


def source_specs(request: Request) -> tuple[SourceSpec, ...]:
    """The sources the request names, a run's steps checked against its history (no model read)."""
    from tui_lab.core.runs.snapshots import list_snapshots
    from tui_lab.core.sae.crosscoder import SourceSpec

    if request.run is None:
        return tuple(SourceSpec(m) for m in request.models)
    if not Path(request.run).is_dir():
        raise LabError(f"--run {request.run}: no such folder")
    have = list_snapshots(request.run)
    if request.steps is None:
        if len(have) < 2:
            raise LabError(f"--run {request.run}: {len(have)} history snapshot(s); a crosscoder needs two "
                           "(train with train.history on)")
        early = next(s for s in have if s >= EARLY * have[-1])
        steps: tuple[int, ...] = (early if early != have[-1] else have[-2], have[-1])
    else:
        steps = request.steps
        missing = [s for s in steps if s not in have]
        if missing:
            shown = ", ".join(str(s) for s in have) or "none"
            raise LabError(f"--steps: no snapshot at step {missing[0]} in {request.run} (snapshots: {shown})")
    return tuple(SourceSpec(request.run, s) for s in steps)


def open_sources(specs: Sequence[SourceSpec], device: str) -> list[ModelInHand]:
    """Each source opened (a snapshot's file checked against the history's index)."""
    from tui_lab.core.opening.model_in_hand import open_model

    return [open_model(s.source, at_step=s.at_step, device=device) for s in specs]


def check_out(out: str) -> None:
    """Refuse an ``out`` that already holds a crosscoder or an SAE (before any model work)."""
    from tui_lab.core.sae.crosscoder_folder import CFG_FILE

    if Path(out).exists() and not Path(out).is_dir():
        raise LabError(f"--out {out} is a file, not a folder")
    if (Path(out) / CFG_FILE).exists():
        raise LabError(f"--out {out} already holds a crosscoder or an SAE: choose another folder")


def run(request: Request, models: Sequence[ModelInHand] | None = None, progress: Progress = no_progress,
        cancelled: Cancelled = never) -> Result:
    """Collect the sources' activations on the same tokens, train, write the folder.

    ``models``: the sources already in hand (as many as the request names), else opened here.
    """
    from tui_lab.core.sae.crosscoder_sources import check_sources, collect, shared_windows
    from tui_lab.core.sae.recipe import last_resid

    check_out(request.out)
    specs = source_specs(request)
    if models is not None and len(models) != len(specs):
        raise LabError(f"{len(models)} models in hand for {len(specs)} sources")
    handles = list(models) if models is not None else open_sources(specs, request.device)
    labels = [f"source {chr(65 + i)} ({s.label})" for i, s in enumerate(specs)]
    hook = request.hook or last_resid(handles[0])
    windows = shared_windows(handles[0], read_text(request.text), request.tokens, request.seed)
    width = check_sources(handles, labels, hook, windows[:1])
    acts = collect(handles, windows, hook, progress=lambda d, t: progress(d, t, "collecting activations"),
                   should_stop=cancelled)
    if acts is None:
        raise Stopped("stopped")
    return _train_and_save(request, specs, hook, width, windows.shape[1], acts, progress, cancelled)


def read_text(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"--text {path}: cannot read it ({exc.__class__.__name__})") from None


def _train_and_save(request: Request, specs: tuple[SourceSpec, ...], hook: str, width: int, context: int,
                    acts: Tensor, progress: Progress, cancelled: Cancelled) -> Result:
    """Train on the collected rows; write the folder unless cancelled."""
    from tui_lab.core.sae.crosscoder import Crosscoder, CrosscoderConfig
    from tui_lab.core.sae.crosscoder_folder import save_crosscoder
    from tui_lab.core.sae.crosscoder_norms import summary
    from tui_lab.core.sae.crosscoder_training import CrosscoderSettings, train_crosscoder

    name = (f"{request.run} at steps {', '.join(str(s.at_step) for s in specs)}" if request.run
            else " vs ".join(request.models))
    cfg = CrosscoderConfig(width, request.d_sae, hook, specs, context, request.l1, name)
    cc = Crosscoder(cfg, device=request.device, seed=request.seed)
    settings = CrosscoderSettings(request.train_steps, request.batch, request.lr, request.l1, seed=request.seed)
    records: list[dict[str, object]] = []
    last: dict[str, float] = {}

    def seen(event: SAEStepEvent) -> None:
        records.append(event.record())
        last.update({k: round(float(getattr(event, k)), 6) for k in ("l0", "explained_variance", "mse",
                                                                        "dead_fraction")})
        progress(event.step, settings.steps, "training")

    end = train_crosscoder(cc, acts, settings, seen, cancelled)
    if end.reason == "stopped":
        raise Stopped("stopped: nothing written")
    records.append({"kind": "end", "step": end.step, "tokens": end.step * settings.batch_size,
                    "reason": end.reason, "elapsed": end.elapsed})
    state = {"step": end.step, "settings": {**settings.to_dict(), "tokens": settings.steps * settings.batch_size},
             "rows_collected": int(acts.shape[0])}
    save_crosscoder(cc, end.fired, request.out, state, records)
    return Result(str(request.out), hook, [s.label for s in specs], end.step, end.reason, end.elapsed,
                  int(acts.shape[0]), cc, {"d_sae": cfg.d_sae, **summary(cc.decoder_norms(), end.fired)}, last)
