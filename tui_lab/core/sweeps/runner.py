"""Runs a sweep plan: K ``tfx-lab train`` processes at once, each pinned to its cores.

Why processes: a small model's step is mostly Python, so threads in one
interpreter would share one lock; separate processes scale with cores. Each
child is an ordinary ``tfx-lab train --json`` writing an ordinary run folder
(forked by the fork server, ``training/fork_server.py``, where there is one:
torch is imported once a sweep, not once a run), started in its own session
so that a ctrl+c reaches the sweep alone, which
then asks each child to stop exactly once (a second SIGINT would interrupt its
save). A sweep run again on the same folder skips runs that are complete,
resumes those with a checkpoint and starts the rest afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from tui_lab.core.config.diff import config_difference, difference_label, flat_settings
from tui_lab.core.errors import LabError
from tui_lab.core.runs.atomic import atomic_write_text, pid_alive
from tui_lab.core.runs.run_files import LOG_FILE, METRICS_FILE, STATE_FILE
from tui_lab.core.runs.status import is_complete
from tui_lab.core.runs.summary import read_run_config, summarize_run
from tui_lab.core.sweeps.spec import PlannedRun, SweepPlan
from tui_lab.core.training.remote import fork_server

if TYPE_CHECKING:
    from tui_lab.core.training.fork_server import ForkedProcess

PRIVATE = ".sweep"  # per-run preset, pid and output files; hidden from run listings


def cpu_slots(parallel: int) -> tuple[list[list[int]] | None, int]:
    """(a set of cores per slot, threads per run). No pinning (None) when the
    machine cannot give every slot a core of its own, or cannot pin at all."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None, max(1, (os.cpu_count() or 1) // parallel)
    share = len(cpus) // parallel
    if share < 1:
        return None, 1
    return [cpus[i * share:(i + 1) * share] for i in range(parallel)], share


@dataclass
class RunTask:
    """One planned run as the sweep drives it."""

    run: PlannedRun
    action: str  # "skip" | "start" | "resume"
    process: subprocess.Popen[bytes] | ForkedProcess | None = None  # the same calls either way
    slot: int | None = None
    started: float | None = None
    ended: float | None = None
    reason: str | None = None  # the child's DoneEvent reason (or "skipped", "error")
    message: str = ""
    step: int = 0
    loss: float | None = None
    exact_match: float | None = None

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def private(self) -> Path:
        return self.run.folder.parent / PRIVATE / self.run.name

    def outcome(self) -> dict[str, object]:
        return {"action": self.action, "reason": self.reason, "message": self.message,
                "seconds": round(self.ended - self.started, 2) if self.started and self.ended else None}


class SweepRunner:
    """``prepare()`` decides what each run needs; ``poll()`` advances; ``stop()`` asks all to end."""

    def __init__(self, plan: SweepPlan, parallel: int, slots: list[list[int]] | None = None) -> None:
        self.plan = plan
        self.parallel = max(1, parallel)
        self.slots = slots
        self.tasks: list[RunTask] = []
        self.stopping = False

    def prepare(self) -> list[RunTask]:
        """Look at each run's folder: skip complete runs, resume saved ones, start the rest.

        Refuses (LabError, nothing started) a folder that holds a run with other
        settings, one still being trained by a live process, or a damaged one.
        """
        self.tasks = [RunTask(run, self._action(run)) for run in self.plan.runs]
        for task in self.tasks:
            if task.action == "skip":
                task.reason, task.message = "skipped", "complete before this sweep started"
        return self.tasks

    def _action(self, run: PlannedRun) -> str:
        folder = run.folder
        if not (folder / STATE_FILE).exists():
            return "start"
        pid = _read_pid(folder.parent / PRIVATE / run.name / "pid")
        if pid is not None and pid_alive(pid):
            raise LabError(f"{folder}: still being trained by process {pid}; wait for it or stop it")
        summary = summarize_run(folder)
        if summary.status == "damaged":
            raise LabError(f"{folder}: damaged ({summary.detail}); remove it to train it again")
        _, saved = read_run_config(folder)
        diff = config_difference(saved, flat_settings(run.config))
        if diff:
            raise LabError(
                f"{folder}: holds a run with other settings ({difference_label(diff)}); "
                "use another --out"
            )
        return "skip" if is_complete(summary.status, summary.detail) else "resume"

    # ---- driving -----------------------------------------------------------------

    @property
    def active(self) -> list[RunTask]:
        return [t for t in self.tasks if t.process is not None and t.ended is None]

    @property
    def pending(self) -> list[RunTask]:
        return [t for t in self.tasks if t.action != "skip" and t.process is None]

    @property
    def done(self) -> bool:
        return not self.active and (self.stopping or not self.pending)

    def poll(self) -> list[RunTask]:
        """Reap ended children, start pending runs in free slots; returns the runs that ended."""
        ended = []
        for task in self.active:
            if task.process is not None and task.process.poll() is not None:
                self._finish(task)
                ended.append(task)
            else:
                self._progress(task)
        while not self.stopping and self.pending and len(self.active) < self.parallel:
            self._start(self.pending[0])
        return ended

    def stop(self) -> None:
        """Start nothing more; ask every running child to stop and save (once each)."""
        if self.stopping:
            return
        self.stopping = True
        for task in self.active:
            with contextlib.suppress(ProcessLookupError):
                if task.process is not None:
                    task.process.send_signal(signal.SIGINT)

    def kill(self) -> None:
        """Last resort (the sweep itself is dying): end every child now."""
        for task in self.active:
            with contextlib.suppress(ProcessLookupError):
                if task.process is not None:
                    task.process.kill()

    def _start(self, task: RunTask) -> None:
        run = task.run
        task.private.mkdir(parents=True, exist_ok=True)
        command = ["train", "--json"]
        if task.action == "resume":
            command += ["--resume", str(run.folder)]
        else:
            for leftover in (METRICS_FILE, LOG_FILE):  # from a start that never saved
                with contextlib.suppress(FileNotFoundError):
                    (run.folder / leftover).unlink()
            # Named like the preset, so the run folder records the preset it came from.
            preset = task.private / f"{self.plan.base.name}.yaml"
            atomic_write_text(preset, run.config.to_yaml(full=True))
            command += ["--preset", str(preset), "--out", str(run.folder)]
        used = {t.slot for t in self.active}
        task.slot = next(i for i in range(self.parallel) if i not in used)
        cores = self.slots[task.slot] if self.slots else None
        with open(task.private / "stdout.txt", "wb") as out, open(task.private / "stderr.txt", "wb") as err:
            task.process = _launch(command, out.fileno(), err.fileno(), len(cores) if cores else None)
        task.started = time.time()
        if cores:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(task.process.pid, cores)
        atomic_write_text(task.private / "pid", f"{task.process.pid}\n")

    def _finish(self, task: RunTask) -> None:
        task.ended = time.time()
        self._progress(task)
        with contextlib.suppress(FileNotFoundError):
            (task.private / "pid").unlink()
        summary = _last_json(task.private / "stdout.txt")
        if summary is not None:
            task.reason, task.message = str(summary.get("reason")), str(summary.get("message", ""))
            return
        task.reason = "error"
        code = None if task.process is None else task.process.returncode
        task.message = _last_line(task.private / "stderr.txt") or f"exited with code {code}"

    def _progress(self, task: RunTask) -> None:
        """Step, loss and exact match from the tail of the run's metrics (a few KB)."""
        for rec in _tail_records(task.run.folder / METRICS_FILE):
            if rec.get("kind") == "step" and isinstance(step := rec.get("step"), int):
                task.step, task.loss = step, cast("float | None", rec.get("loss"))  # as the run wrote it
            elif rec.get("kind") == "eval":
                task.exact_match = cast("float | None", rec.get("exact_match"))


def _launch(args: list[str], out: int, err: int, threads: int | None) -> subprocess.Popen[bytes] | ForkedProcess:
    """``tfx-lab ARGS`` in its own session, writing to ``out``/``err``: forked by the fork
    server where there is one (torch imported once for the whole sweep, not once a run),
    else a fresh interpreter. ``threads``: the run's share of cores for OpenMP's pool."""
    server = fork_server()
    if server is not None:
        try:
            return server.run_module("tui_lab.cli", args, out, err, threads)
        except OSError:
            pass  # the server has just gone: a fresh interpreter instead
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return subprocess.Popen(
        [sys.executable, "-m", "tui_lab.cli", *args], stdout=out, stderr=err,
        stdin=subprocess.DEVNULL, env=env, start_new_session=True,
    )


def _tail_records(path: Path, size: int = 4096) -> list[dict[str, object]]:
    try:
        with open(path, "rb") as f:
            end = f.seek(0, 2)
            f.seek(max(0, end - size))
            lines = f.read().split(b"\n")[1:]
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict):
                out.append(rec)
    return out


def _last_json(path: Path) -> dict[str, object] | None:
    for line in reversed(_lines(path)):
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and "reason" in data:
                return data
    return None


def _last_line(path: Path) -> str | None:
    lines = _lines(path)
    return lines[-1] if lines else None


def _lines(path: Path) -> list[str]:
    try:
        return [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return []


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


