"""A TrainingRun in a child process, driven like one (the lab's trainer).

Why a process: a small model's training step is mostly Python, so a training
thread and the UI thread would take turns holding one interpreter lock; keys
then wait for steps and steps for repaints. A child process trains on its own
core at headless speed while the UI answers keys at once.

``RemoteRun`` offers the parts of ``TrainingRun`` the lab uses: ``run()``
(blocks until the run ends), ``pause()``/``resume()``/``stop()`` from any
thread, the events through ``on_event`` (called on a reader thread), the
progress attributes, and ``model``: a copy in this process whose weights are
fetched from the child when the run has moved on since the last fetch.

The child stops (saving a checkpoint) when asked, when told to close, and when
this process dies: its end of the pipe then reads EOF. Spawning and importing
torch take a second or two, so ``prewarm()`` keeps one started child waiting.
The child's side (``child_main``) is in remote_child.py.
"""

from __future__ import annotations

import io
import os
import queue
import socket
import subprocess
import threading
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError
from tui_lab.core.runs.events import DoneEvent, EvalEvent, StepEvent
from tui_lab.core.training.fork_server import ForkedProcess, ForkServer, fresh_interpreter

if TYPE_CHECKING:
    import torch
    from torch import nn

    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.opening.model_card import ModelCard
    from tui_lab.core.runs.events import Event
    from tui_lab.core.tasks.base import TaskBase
    from tui_lab.core.training.remote_child import RunInfo

CLOSE_SECONDS = 5.0  # how long close() waits for the child's last save

_spare: tuple[subprocess.Popen[bytes] | ForkedProcess, Connection] | None = None
_spare_lock = threading.Lock()
_server: ForkServer | None = None
_server_lock = threading.Lock()
_live: weakref.WeakSet[RemoteRun] = weakref.WeakSet()


class RunProcessError(LabError):
    """The training process could not build or restore the run (one line for the user)."""


# ---- the lab's side ---------------------------------------------------------------


def fork_server() -> ForkServer | None:
    """The running fork server (started on first use), or None where there is no fork."""
    global _server
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return None
    with _server_lock:
        if _server is None or not _server.alive:
            _server = ForkServer()
        return _server


def _start_child() -> tuple[subprocess.Popen[bytes] | ForkedProcess, Connection]:
    # Forked by the fork server where there is one (torch is imported there once),
    # else a fresh interpreter (not multiprocessing's spawn, which re-runs the
    # parent's main script and fails for scripts without a __main__ guard); it
    # talks over a socket pair. Its output goes nowhere: the lab owns the
    # terminal, and everything the run does reaches the lab as events.
    mine, theirs = socket.socketpair()
    server = fork_server()
    if server is not None:
        try:
            forked = server.fork(theirs.fileno())
        except OSError:
            pass  # the server has just gone: a fresh interpreter instead
        else:
            theirs.close()
            return forked, Connection(mine.detach())
    code = f"from tui_lab.core.training.remote_child import child_main; child_main({theirs.fileno()})"
    process = fresh_interpreter(code, theirs.fileno())
    theirs.close()
    return process, Connection(mine.detach())


def prewarm() -> None:
    """Start a training process now so the next run need not wait for torch to load."""
    global _spare
    with _spare_lock:
        if _spare is None or _spare[0].poll() is not None:
            _spare = _start_child()


def _take_child() -> tuple[subprocess.Popen[bytes] | ForkedProcess, Connection]:
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None and spare[0].poll() is None:
        return spare
    return _start_child()


class RemoteRun:
    """A training run in its own process, with TrainingRun's controls and progress."""

    card: ModelCard | None = None  # a ModelHandle: a lab run, not a model opened from files

    def __init__(
        self,
        on_event: Callable[[Event], None],
        *,
        config: LabConfig | None = None,
        out_dir: str | Path | None = None,
        resume_dir: str | Path | None = None,
        finetune: dict[str, object] | None = None,
    ) -> None:
        """``finetune``: ``open_finetune``'s arguments (source, text, and optionally block,
        revision, overrides) to fine-tune a real model into ``out_dir`` instead of ``config``."""
        self.on_event = on_event
        self._process, self._conn = _take_child()
        self._send_lock = threading.Lock()
        given = out_dir if out_dir is not None else resume_dir
        self._folder = Path(given) if given is not None else None  # as the user named it
        # Absolute paths: a prewarmed process was started in whatever folder was current then.
        self._send({
            "config": config,
            "out_dir": Path(out_dir).absolute() if out_dir is not None else None,
            "resume_dir": Path(resume_dir).absolute() if resume_dir is not None else None,
            "finetune": finetune,
        })
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            raise RunProcessError(
                f"the training process ended while starting (exit code {self._exit_code()})"
            ) from None
        if kind == "failed":
            self.close()
            raise RunProcessError(payload)
        self._update(payload)
        self.paused = False
        self.summary: dict[str, object] | None = None
        self._finished = threading.Event()
        self._finished.set()
        self._end_lock = threading.Lock()
        self._weights: queue.Queue[bytes | None] = queue.Queue()
        self._model: nn.Module | None = None
        self._model_step = -1
        self._model_lock = threading.Lock()
        self._task: TaskBase | None = None
        _live.add(self)
        self._reader = threading.Thread(target=self._read, name="trainer-events", daemon=True)
        self._reader.start()

    # ---- what the lab reads ---------------------------------------------------------

    def _update(self, info: RunInfo) -> None:
        self.config = info["config"]
        self.out_dir = self._folder if info["out_dir"] is not None else None
        self.device = info["device"]
        self.device_name = info["device_name"]
        self.step = info["step"]
        self.elapsed = info["elapsed"]
        self.best_accuracy = info["best_accuracy"]
        self.last_step = info["last_step"]
        self.last_eval = info["last_eval"]

    @property
    def total_steps(self) -> int:
        return self.config.train.steps

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def _exit_code(self) -> int | None:
        try:
            return self._process.wait(1)
        except subprocess.TimeoutExpired:
            return None

    @property
    def task(self) -> TaskBase:
        if self._task is None:
            if self.config.task.name == "token-lm" and self._folder is not None:
                # A fine-tuned run's vocabulary is its copy of the source's tokenizer.
                from tui_lab.core.opening.run_source import run_task
                from tui_lab.core.runs.folder import RunFolder

                self._task = run_task(RunFolder.read(self._folder, need_state=False))
            else:
                from tui_lab.core.tasks import make_task

                self._task = make_task(self.config.task)
        return self._task

    @property
    def model(self) -> nn.Module:
        """A model in this process with the run's current weights (fetched when stale)."""
        with self._model_lock:
            if self._model is None:
                self._model = self._build_model()
            if self._model_step != self.step:
                step = self.step
                state = self._fetch_weights()
                if state is not None:
                    self._model.load_state_dict(state)
                elif self.out_dir is not None:  # the process has gone: its last checkpoint
                    from tui_lab.core.runs.checkpoint import load_weights
                    from tui_lab.core.runs.run_files import RunError

                    try:
                        load_weights(self.out_dir, self._model)
                    except RunError as exc:
                        raise RunProcessError(
                            f"the training process has ended and left no checkpoint to use ({exc})"
                        ) from None
                self._model_step = step
            return self._model

    def _build_model(self) -> nn.Module:
        from tui_lab.core.model.models import build_run_model

        return build_run_model(self.config, len(self.task.vocab), self.device).eval()

    def _fetch_weights(self) -> dict[str, torch.Tensor] | None:
        import torch

        if not self.alive:
            return None
        while not self._weights.empty():  # a reply nobody waited for
            self._weights.get_nowait()
        self._send("weights")
        try:
            data = self._weights.get(timeout=60)
        except queue.Empty:
            return None
        if data is None:
            return None
        return torch.load(io.BytesIO(data), map_location=self.device, weights_only=True)

    # ---- control ------------------------------------------------------------------------

    def run(self) -> dict[str, object] | None:
        """Train in the child until the run ends; returns its summary."""
        self._finished.clear()
        self.summary = None
        self._send("run")
        while not self._finished.wait(0.5):
            if not self._reader.is_alive():  # the child went away before it could say so
                self._died()
        return self.summary

    def pause(self) -> None:
        self.paused = True
        self._send("pause")

    def resume(self) -> None:
        self.paused = False
        self._send("resume")

    def stop(self) -> None:
        self.paused = False
        self._send("stop")

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Stop the run (it saves), let the process end; kill it only if it hangs."""
        self._send("close")
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()  # checkpoints are written atomically: the last one stays
            self._process.wait()
        try:
            self._conn.close()
        except OSError:
            pass
        _live.discard(self)

    # ---- plumbing -------------------------------------------------------------------------

    def _send(self, message: object) -> bool:
        with self._send_lock:
            try:
                self._conn.send(message)
                return True
            except (OSError, ValueError):
                return False

    def _read(self) -> None:
        """Reader thread: events to on_event, replies to whoever waits for them."""
        while True:
            try:
                kind, payload = self._conn.recv()
            except (EOFError, OSError, ValueError):
                break
            if kind == "event":
                self._note(payload)
                self.on_event(payload)
            elif kind == "weights":
                self._weights.put(payload)
            elif kind == "finished":
                self.summary = payload.pop("summary")
                self._update(payload)
                self._finished.set()
        self._weights.put(None)
        if not self._finished.is_set():
            self._died()

    def _note(self, event: Event) -> None:
        if isinstance(event, StepEvent):
            self.step, self.elapsed, self.last_step = event.step, event.elapsed, event
        elif isinstance(event, EvalEvent):
            self.last_eval = event
            if event.exact_match is not None:
                self.best_accuracy = max(self.best_accuracy or 0.0, event.exact_match)

    def _died(self) -> None:
        """The child went away mid-run: end the run as an error the lab shows."""
        with self._end_lock:
            if self._finished.is_set():
                return
            code = self._exit_code()
            message = f"the training process ended unexpectedly (exit code {code}) at step {self.step}"
            self.on_event(DoneEvent("error", message, self.step))
            self._finished.set()


def shutdown_all(timeout: float = CLOSE_SECONDS) -> None:
    """Close every training process (each saves first) and the spare; for the lab's exit.

    The fork server stays: it leaves by itself when this process ends (EOF on its
    socket), and a later lab in the same process (tests open many) reuses it rather
    than importing torch again. ``stop_fork_server`` ends it now."""
    global _spare
    for run in list(_live):
        run.close(timeout)
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None:  # it holds nothing yet (maybe still importing torch)
        spare[1].close()
        spare[0].kill()
        spare[0].wait()


def stop_fork_server() -> None:
    """End the fork server now (it has no children once ``shutdown_all`` has run)."""
    global _server
    with _server_lock:
        server, _server = _server, None
    if server is not None:
        server.close()
