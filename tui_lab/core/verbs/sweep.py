"""A grid of runs over seeds: plan, check, run K at a time, and write ``sweep.json``.

``tfx-lab sweep`` runs ``run``. Everything is checked before anything starts: the
request's numbers, the spec, every arm's config, and what the output folder already
holds (a rerun resumes it). The processes are ``core.sweeps.runner``'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.sweeps.runner import SweepRunner
    from tui_lab.core.sweeps.spec import SweepPlan, SweepSpec

# Fields that may change between a sweep and its resumption (they do not change what is trained).
_RESUMABLE_CHANGES = ("parallel", "out", "description")

# Called with the runner on every poll while runs go on: a live display reads its runs.
Watch = Callable[["SweepRunner"], None]


@dataclass(frozen=True)
class Request:
    """What to sweep: ``spec`` (a YAML path or shipped sweep's name), or ``preset`` with
    ``vary`` (``KEY=V1,V2`` each), or neither (resume the sweep already in ``out``); the
    other fields override the spec's."""

    spec: str | None = None
    preset: str | None = None
    vary: tuple[str, ...] = ()
    seeds: int | None = None
    parallel: int | None = None
    steps: int | None = None
    max_seconds: float | None = None
    out: str | None = None

    def __post_init__(self) -> None:
        for name, value in (("--seeds", self.seeds), ("--parallel", self.parallel), ("--steps", self.steps)):
            if value is not None:
                at_least(name, value, 1)
        if self.max_seconds is not None:
            positive("--max-seconds", self.max_seconds)


@dataclass
class Result:
    """``document``: what ``sweep.json`` holds; ``interrupted``: the caller stopped the sweep
    (``saved`` runs stopped and saved); ``failed``: runs that ended in an error or NaN."""

    document: JSON
    interrupted: bool
    saved: int
    failed: int

    def to_json(self) -> JSON:
        return self.document


def build_spec(request: Request) -> tuple[SweepSpec, Path]:
    """The spec from ``request.spec`` (a file or shipped name), from preset/vary, or from
    ``out``'s ``sweep.json`` (resuming); the request's fields win over the file's."""
    from tui_lab.core.runs.folder import runs_root
    from tui_lab.core.sweeps.record import SWEEP_FILE, read_sweep
    from tui_lab.core.sweeps.spec import load_sweep_spec, parse_vary, spec_from_dict

    fields: dict[str, object] = {}
    default_out: Path | None = None
    if request.spec:
        if request.vary:
            raise LabError("give a SPEC or --vary, not both (a spec lists what it varies)")
        fields = load_sweep_spec(request.spec).to_dict()
        default_out = runs_root() / Path(request.spec).stem
    elif request.vary or request.preset:
        fields = {"preset": request.preset, "vary": parse_vary(list(request.vary))}
    elif request.out and (Path(request.out) / SWEEP_FILE).is_file():
        fields = dict((read_sweep(request.out) or {}).get("spec") or {})
    else:
        raise LabError("say what to sweep: SPEC.yaml, a shipped sweep (ln-warmup), "
                       "or --preset P --vary KEY=A,B")
    if request.preset and request.spec:
        fields["preset"] = request.preset
    overrides = {"seeds": request.seeds, "parallel": request.parallel, "steps": request.steps,
                 "max_seconds": request.max_seconds, "out": request.out}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    spec = spec_from_dict(fields)
    out = Path(spec.out) if spec.out else default_out
    if out is None:
        raise LabError("--out DIR: say where the sweep's run folders go")
    return spec, out


def _check_same_sweep(spec: SweepSpec, out: Path) -> None:
    """A folder holding another sweep is refused: its runs would be mixed with these."""
    from tui_lab.core.sweeps.record import read_sweep

    old = read_sweep(out)
    if not old or not isinstance(old.get("spec"), dict):
        return
    new = spec.to_dict()
    differ = [k for k in new if k not in _RESUMABLE_CHANGES and old["spec"].get(k) != new[k]]
    if differ:
        raise LabError(f"{out}: holds another sweep (its {', '.join(differ)} differ); "
                       "use another --out")


def run(request: Request, model: None = None, progress: Progress = no_progress,
        cancelled: Cancelled = never, watch: Watch | None = None) -> Result:
    """Plan, check, run (K at a time); ``sweep.json`` is rewritten as each run ends.

    A sweep trains its own models in child processes, so it takes no model in hand
    (``model`` is there for the verb signature only). ``progress`` is told first of the
    complete runs it skips (``done`` 0), then of each run that ends (``what``: the line a
    user reads); ``watch`` sees the runner on every poll (a live display); once ``cancelled`` says so, nothing more
    starts and every running child is asked to stop and save: the result is then
    ``interrupted`` (not ``Stopped``: the sweep's record is still the answer).
    """
    from tui_lab.core.runs.atomic import atomic_write_text
    from tui_lab.core.runs.summary import SWEEP_BASE
    from tui_lab.core.sweeps.record import sweep_document, write_sweep
    from tui_lab.core.sweeps.runner import SweepRunner, cpu_slots
    from tui_lab.core.sweeps.spec import plan_sweep

    spec, out = build_spec(request)
    parallel = spec.parallel or max(1, len(_cpus()))
    slots, share = cpu_slots(parallel)
    plan = plan_sweep(spec, out, max_threads=share, pinned=slots is not None)
    _check_same_sweep(spec, out)
    runner = SweepRunner(plan, parallel, slots)
    runner.prepare()  # refuses a foreign or live folder, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    base = out / SWEEP_BASE  # what the runs are compared with in tables and legends
    base.parent.mkdir(exist_ok=True)
    atomic_write_text(base, (plan.common or plan.base).to_yaml(full=True))
    outcomes: dict[str, dict[str, object]] = {t.name: t.outcome() for t in runner.tasks}
    write_sweep(out, sweep_document(plan, outcomes))
    try:
        _drive(runner, plan, outcomes, progress, cancelled, watch)
    except BaseException:
        runner.kill()
        raise
    document = sweep_document(plan, outcomes, interrupted=runner.stopping)
    write_sweep(out, document)
    saved = sum(1 for t in runner.tasks if t.reason == "stopped")
    failed = sum(1 for t in runner.tasks if t.reason in ("error", "nan"))
    return Result(document, runner.stopping, saved, failed)


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def _drive(runner: SweepRunner, plan: SweepPlan, outcomes: dict[str, dict[str, object]],
           progress: Progress, cancelled: Cancelled, watch: Watch | None,
           interval: float = 0.25) -> None:
    """Poll until every run has ended; rewrite sweep.json after each that does."""
    from tui_lab.core.sweeps.record import sweep_document, write_sweep

    total = sum(1 for t in runner.tasks if t.action != "skip")
    skipped = [t.name for t in runner.tasks if t.action == "skip"]
    if skipped:
        progress(0, total, f"skipping {len(skipped)} complete run(s): {', '.join(skipped)}")
    finished = 0
    while True:
        if cancelled():
            runner.stop()  # once: later calls do nothing
        ended = runner.poll()
        for task in ended:
            outcomes[task.name] = task.outcome()
            finished += 1
            secs = outcomes[task.name]["seconds"]
            progress(finished, total, f"{task.name}: {task.reason} at step {task.step}"
                                      f"{f' ({secs:.1f} s)' if secs else ''}: {task.message}")
        if ended:
            write_sweep(plan.out, sweep_document(plan, outcomes))
        if runner.done:
            return
        if watch is not None:
            watch(runner)
        time.sleep(interval)
