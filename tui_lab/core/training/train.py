"""A training run that can be driven from another thread.

`TrainingRun.run()` blocks and is meant for a worker thread (the lab) or the
main thread (the command line). `pause()`, `resume()` and `stop()` are safe to
call from any thread; the loop checks them every step. Everything the run does
is reported as small event dataclasses to `on_event`, and kept on disk in the
run folder (see checkpoint.py): a kill at any moment leaves the last
checkpoint loadable. The learning rate is set before every update from the
schedule (schedule.set_lr), so resuming needs only the step.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.errors import one_line
from tui_lab.core.model.device import (
    autocast_context,
    choose_device,
    describe,
    set_threads,
    to_device,
)
from tui_lab.core.model.models import build_model, build_run_model
from tui_lab.core.opening.run_source import run_task
from tui_lab.core.runs.curves import first_step_at, read_curves
from tui_lab.core.runs.events import (
    CheckpointEvent,
    DoneEvent,
    EvalEvent,
    Event,
    LogEvent,
    OptimizerEvent,
    StepEvent,
)
from tui_lab.core.runs.folder import RunFolder
from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.snapshots import History
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.base import Batch
from tui_lab.core.tasks.protocol import PairTask, TrainingTask
from tui_lab.core.training import distributed
from tui_lab.core.training.evaluate import evaluate, held_out_pairs
from tui_lab.core.training.full_batch import batch_accuracy, full_batch, weight_norm
from tui_lab.core.training.group_stats import GroupWatch, stats_every
from tui_lab.core.training.heap import keep_freed_memory
from tui_lab.core.training.mfu import matmul_peak, mfu, train_flops_per_token
from tui_lab.core.training.run_keeping import NonFiniteWeights, RunKeeping

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from tui_lab.core.opening.model_card import ModelCard
from tui_lab.core.training.schedule import make_optimizer, set_lr

__all__ = ["TrainingRun", "open_run", "Event", "StepEvent", "EvalEvent", "CheckpointEvent",
           "LogEvent", "DoneEvent"]


@dataclass
class _SpeedWindow:
    """Tokens per second over the last two seconds or so: a sliding estimate that
    follows speed changes (a second process, a thermal limit) without jitter."""

    tokens: int = 0
    seconds: float = 0.0

    def add(self, tokens: int, seconds: float) -> float:
        self.tokens += tokens
        self.seconds += seconds
        tps = self.tokens / self.seconds if self.seconds else 0.0
        if self.seconds > 2.0:
            self.tokens, self.seconds = int(tps * 1.0), 1.0
        return tps


@dataclass
class _Speed:
    """What MFU needs, found at the first measurement: the lab's training FLOPs per token
    and this machine's matmul peak (mfu.py; probed once per machine, then cached)."""

    flops_per_token: int | None = None
    peak: float | None = None
    failed: bool = False


class TrainingRun(RunKeeping):
    """One model, its optimizer and its run folder; `run()` trains it."""

    card: ModelCard | None = None  # a ModelHandle: a lab run, not a model opened from files

    def __init__(
        self,
        config: LabConfig,
        out_dir: str | Path | None = None,
        *,
        on_event: Callable[[Event], None] | None = None,
        device: str | None = None,
        resume: bool | RunFolder = False,
        model_factory: Callable[..., torch.nn.Module] = build_model,
        task: TrainingTask | None = None,
    ) -> None:
        """``resume``: True to restore from ``out_dir``, or the RunFolder already read.

        ``model_factory`` lets a benchmark train a reference model through this same
        loop, and a fine-tuning run (``finetune.py``) start from a real model's weights;
        ``task``, one made already (token-lm's, around that model's tokenizer).
        """
        self.config = config
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.on_event = on_event or (lambda event: None)
        self.dist = distributed.from_environment()
        folder = self._resume_folder(resume)
        if not self.dist.is_main:  # rank 0 alone logs, evaluates and writes
            self.out_dir = None
            self.on_event = lambda event: None
        self.device = distributed.init(self.dist, choose_device(device or config.train.device))
        self.micro_batch, self.accumulation = distributed.split_batch(config.train, self.dist.world_size)
        if task is None:  # a resumed token-lm run reads its tokenizer from its folder
            task = run_task(folder) if folder is not None else make_task(config.task)
        self.task: TrainingTask = task
        self.vocab = self.task.vocab
        self.arch = config.model.arch
        torch.manual_seed(config.train.seed)
        self.model = build_run_model(config, len(self.vocab), self.device, factory=model_factory)
        n_params = sum(p.numel() for p in self.model.parameters())
        if self.device.type == "cpu":
            set_threads(config.train.threads, n_params)
        self.device_name = describe(self.device, config.train.precision)
        self.optimizer = make_optimizer(self.model, config.train)
        self._watch = GroupWatch(self.optimizer, stats_every(config.train.steps))
        self._speed = _Speed()
        self._ddp: DistributedDataParallel | None = None  # the wrapper that syncs gradients
        self.train_model = self._wrapped_model()
        self._start_fresh()
        self._held_out: list[tuple[str, str]] | None = None
        self._full: Batch | None = None  # train.full_batch: the whole training set, built once
        if config.train.full_batch:
            self._use_full_batch()
        self._groups: dict[str, dict[str, float]] | None = None  # the last measured update's
        self._train_solved = False  # training accuracy has reached 100% (snapshot that step)
        self.history: History | None = None  # weight snapshots, made with the run folder
        if folder is not None:
            self._restore(folder)
            # A resumed run that had reached 100% already keeps that step as its milestone.
            self._train_solved = first_step_at(read_curves(folder.path).train_accuracy, 1.0) is not None
        self._rng = distributed.data_rng(config.train.seed, self.dist.rank, self.step)

    def _start_fresh(self) -> None:
        """Step 0, nothing measured yet, running (``_restore`` moves a resumed run on)."""
        self.step = 0
        self._start_step = 0
        self.elapsed = 0.0
        self.best_accuracy: float | None = None
        self.last_eval: EvalEvent | None = None
        self.last_step: StepEvent | None = None
        self._seen_inputs: set[str] = set()
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()

    # ---- control from any thread -------------------------------------------------

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def total_steps(self) -> int:
        return self.config.train.steps

    # ---- the loop --------------------------------------------------------------

    def _resume_folder(self, resume: bool | RunFolder) -> RunFolder | None:
        """The run folder to restore: the one given, ``out_dir`` read (``resume=True``), or none."""
        if isinstance(resume, RunFolder):
            return resume
        if resume is not True:
            return None
        if self.out_dir is None:
            raise RunError("resume needs a run folder")
        return RunFolder.read(self.out_dir)  # every rank reads it; rank 0 alone writes

    def _use_full_batch(self) -> None:
        """train.full_batch: the whole training set, built once, every step's batch."""
        self._full = full_batch(cast("PairTask", self.task), self.arch, self.device, self.dist.rank, self.dist.world_size)
        self.accumulation = 1
        self._seen_inputs.update(p[0] for p in self._full.examples or [])

    def _wrapped_model(self) -> torch.nn.Module:
        """What the optimizer step runs through (the model under DDP across ranks, compiled
        when asked); ``self.model`` stays the plain module that checkpoints, evaluation
        and decoding use."""
        model: torch.nn.Module = self.model
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self._ddp = model = DistributedDataParallel(self.model, device_ids=ids)
        if self.config.train.compile:
            # A module compiles to an OptimizedModule, an nn.Module; torch.compile's stubs
            # type every result as a plain callable.
            model = torch.compile(model)  # type: ignore[assignment]
        return model

    def run(self) -> dict[str, object]:
        """Train until done, stopped, out of time or at the target; returns a summary."""
        keep_freed_memory()
        self._prepare_folder()
        self._log(f"training on {self.device_name} from step {self.step} to {self.config.train.steps}")
        together = False  # every rank left the loop at this step (see distributed.shutdown)
        try:
            reason, message, together = self._loop()
        except KeyboardInterrupt:
            reason, message = "stopped", f"interrupted at step {self.step}"
        except (NonFiniteWeights, RunError, RuntimeError) as exc:
            reason, message = self._failure(exc)
        if reason not in ("nan", "error"):
            reason, message = self._close(reason, message)
        self._log(message, "error" if reason in ("nan", "error") else "info")
        self._record_end({"reason": reason, "message": message, "step": self.step})
        self._emit(DoneEvent(reason, message, self.step))
        distributed.shutdown(self.dist, agreed=together)
        return self.summary(reason, message)

    def _loop(self) -> tuple[str, str, bool]:
        """Steps until the run ends: (reason, message, whether every rank ended here together)."""
        cfg = self.config.train
        last_save = time.perf_counter()
        window = _SpeedWindow()
        while self.step < cfg.steps:
            if self._stop.is_set() and not self.dist.enabled:
                return "stopped", f"stopped at step {self.step}", False
            if not self._running.is_set():
                self._running.wait(0.1)
                continue
            t0 = time.perf_counter()
            lr = set_lr(self.optimizer, self.step + 1, cfg, self.elapsed)  # this update's rate
            loss, grad_norm, tokens, train_acc = self._train_step()
            dt = time.perf_counter() - t0
            # Gradients are averaged across ranks, so a non-finite norm is seen by all.
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                what = "loss" if not math.isfinite(loss) else "gradient norm"
                return "nan", (
                    f"{what} became {loss if what == 'loss' else grad_norm} at step "
                    f"{self.step + 1}; stopped (lower train.lr or raise warmup); "
                    f"the last good checkpoint is kept"
                ), False
            ended = self._after_step(StepEvent(
                self.step + 1, cfg.steps, loss, lr, grad_norm, window.add(tokens, dt), self.elapsed + dt,
                0.0, train_acc, 0.0))
            if ended:
                return (*ended, True)
            if time.perf_counter() - last_save >= cfg.checkpoint_seconds:
                self.save()
                last_save = time.perf_counter()
        return "finished", f"finished {cfg.steps} steps", True

    def _after_step(self, event: StepEvent) -> tuple[str, str] | None:
        """Count the step ``event`` took (its eta and weight norm filled here), report it,
        evaluate when due; (reason, message) if the run ends after it."""
        cfg = self.config.train
        self.step, self.elapsed = event.step, event.elapsed
        eta = (cfg.steps - self.step) * (self.elapsed / max(1, self.step - self._start_step))
        event = replace(event, eta=eta, weight_norm=weight_norm(self.model))
        self.last_step = event
        self._emit(event)
        self._metric({"kind": "step", **asdict(event)})
        self._emit_groups(event)
        ended = self._check_end()
        if self.history is not None:  # after the evaluation: evaluated steps are kept
            self.history.after_step(self.step)
        self._note_solved(event.train_accuracy)
        if self.dist.enabled and distributed.any_rank(
            ended is not None or self._stop.is_set(), self.dist, self.device
        ):
            ended = ended or ("stopped", f"stopped at step {self.step}")
        return ended

    def _close(self, reason: str, message: str) -> tuple[str, str]:
        """The closing evaluation and save, which can meet the same faults as the loop."""
        try:
            # A stop asked for by the user saves at once: the closing evaluation
            # would make quitting the lab wait for hundreds of greedy decodes.
            if reason != "stopped" and (self.last_eval is None or self.last_eval.step != self.step):
                if self.step > self._start_step and self.dist.is_main:
                    self.evaluate()
            self.save()
            if self.history is not None:
                self.history.finish(self.step)
        except (NonFiniteWeights, RunError, RuntimeError) as exc:
            return self._failure(exc)
        return reason, message

    def _failure(self, exc: Exception) -> tuple[str, str]:
        """(reason, message) for what ended a run: weights gone non-finite, a run folder
        fault, or a device fault (a CUDA error ends the run, not the app)."""
        if isinstance(exc, NonFiniteWeights):
            return "nan", str(exc)
        if isinstance(exc, RunError):
            return "error", str(exc)
        return "error", _failed(self.step, exc)

    def _check_end(self) -> tuple[str, str] | None:
        """Evaluate when due; (reason, message) if the run should end after this step."""
        cfg = self.config.train
        if self.dist.is_main and (self.step % cfg.eval_every == 0 or self.step == cfg.steps):
            ev = self.evaluate()
            target = cfg.target_accuracy
            if target is not None and ev.exact_match is not None and ev.exact_match >= target:
                return "target", f"reached {ev.exact_match:.1%} exact match at step {self.step}"
        if cfg.max_seconds is not None and self.elapsed >= cfg.max_seconds:
            return "time", f"time limit of {cfg.max_seconds:g} s reached at step {self.step}"
        return None

    def _note_solved(self, train_acc: float | None) -> None:
        """The first step at 100% training accuracy: logged, and kept in the history."""
        if self._train_solved or train_acc is None or train_acc < 1.0:
            return
        self._train_solved = True
        self._log(f"training accuracy reached 100% at step {self.step}")
        if self.history is not None and self.history.enabled:
            self.history.save(self.step)

    def _train_step(self) -> tuple[float, float, int, float | None]:
        """One optimizer update over ``batch_size`` examples (all ranks, all micro-batches).

        Returns the loss, the gradient norm, the tokens and the batch's training accuracy.
        """
        cfg = self.config.train
        self.train_model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_total, tokens, right, counted = 0.0, 0, 0, 0
        for i in range(self.accumulation):
            batch = self._full if self._full is not None else self._next_batch(self.micro_batch)
            last = i == self.accumulation - 1
            # DDP averages gradients once, on the last micro-batch of the update.
            sync = nullcontext() if last or self._ddp is None else self._ddp.no_sync()
            with sync, autocast_context(self.device, cfg.precision):
                if batch.src is None:  # decoder-only or encoder-only: one sequence
                    logits = self.train_model(batch.tgt_in)
                else:
                    logits = self.train_model(batch.src, batch.tgt_in)
                loss = F.cross_entropy(
                    logits.flatten(0, 1).float(),  # (B, T, V) -> (B*T, V)
                    batch.tgt_out.flatten(),
                    ignore_index=-100,
                    label_smoothing=cfg.label_smoothing,
                )
                # A NaN loss still goes backward: under DDP every rank must join the
                # gradient all-reduce, and the NaN then shows in every rank's norm.
                (loss / self.accumulation).backward()
            loss_total += float(loss.detach()) / self.accumulation
            r, c = batch_accuracy(logits, batch.tgt_out, per_token=self.task.is_lm)
            right, counted = right + r, counted + c
            tokens += batch.tgt_in.numel() + (batch.src.numel() if batch.src is not None else 0)
        watched = self._watch.due(self.step + 1)
        if watched:
            self._watch.before_update()
        max_norm = cfg.clip if cfg.clip > 0 else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        accuracy = right / counted if counted else None
        if not (math.isfinite(grad_norm) and math.isfinite(loss_total)):
            return loss_total, grad_norm, 0, accuracy
        self.optimizer.step()
        if watched:
            self._groups = self._watch.after_update()
        return loss_total, grad_norm, tokens * self.dist.world_size, accuracy

    def _next_batch(self, size: int) -> Batch:
        batch = self.task.batch(self._rng, size, self.arch)
        if batch.examples and len(self._seen_inputs) < 2_000_000:
            self._seen_inputs.update(p[0] for p in batch.examples)
        return to_device(batch, self.device)

    # ---- the optimizer at work and MFU ------------------------------------------

    def _emit_groups(self, event: StepEvent) -> None:
        """The groups measured in this step's update, with the speed, as an OptimizerEvent."""
        groups, self._groups = self._groups, None
        if groups is None:
            return
        stats = OptimizerEvent(event.step, groups, event.tokens_per_s, self._mfu(event.tokens_per_s))
        self._emit(stats)
        self._metric({"kind": "optimizer", **asdict(stats)})

    def _mfu(self, tokens_per_s: float) -> float | None:
        """MFU at ``tokens_per_s``; None where the count or the probe is not to be had."""
        speed = self._speed
        if speed.flops_per_token is None and not speed.failed:
            try:
                speed.flops_per_token = train_flops_per_token(self.config, len(self.vocab))
                speed.peak = matmul_peak(self.device)
            except (RuntimeError, ValueError) as exc:  # a model the count cannot build
                speed.failed = True
                self._log(f"MFU not measured: {one_line(exc)}", "warning")
        if speed.flops_per_token is None or not speed.peak:
            return None
        return round(mfu(self.config, speed.flops_per_token, tokens_per_s, speed.peak), 5)

    # ---- evaluation --------------------------------------------------------------

    def held_out(self) -> list[tuple[str, str]]:
        if self._held_out is None:
            self._held_out = held_out_pairs(self.task, self.config.train, self.config.train.eval_examples)
        return self._held_out

    def evaluate(self, n: int | None = None, record: bool = True) -> EvalEvent:
        """Validation loss and (for algorithmic tasks) exact match of greedy answers.

        ``record=False`` leaves the run untouched (no event, no metrics line).
        """
        if self.task.is_lm:  # no held-out pairs: the loss comes from the validation text
            pairs = None
        else:
            pairs = self.held_out() if n is None else held_out_pairs(self.task, self.config.train, n)
        event = evaluate(self.model, self.task, self.config, self.device, step=self.step, pairs=pairs,
                         seen_inputs=self._seen_inputs)
        if not record:
            return event
        if event.exact_match is not None:
            self.best_accuracy = max(self.best_accuracy or 0.0, event.exact_match)
        self.last_eval = event
        self._emit(event)
        self._metric({"kind": "eval", **asdict(event)})
        return event

    def summary(self, reason: str, message: str) -> dict[str, object]:
        ev = self.last_eval
        st = self.last_step
        return {
            "reason": reason,
            "message": message,
            "step": self.step,
            "steps": self.config.train.steps,
            "elapsed": round(self.elapsed, 3),
            "loss": st.loss if st else None,
            "val_loss": ev.val_loss if ev else None,
            "exact_match": ev.exact_match if ev else None,
            "tokens_per_s": round(st.tokens_per_s, 1) if st else None,
            "optimizer": self.config.train.optimizer,
            "mfu": self._mfu(st.tokens_per_s) if st else None,
            "flops_per_token": self._speed.flops_per_token,
            "peak_flops": self._speed.peak,
            "device": self.device_name,
            "run": str(self.out_dir) if self.out_dir else None,
        }



def _failed(step: int, exc: BaseException) -> str:  # a run that a device fault ended
    return f"training failed at step {step}: {one_line(exc)}"


def open_run(run_dir: str | Path, overrides: dict[str, object] | None = None, **kwargs: Any) -> TrainingRun:
    """A TrainingRun restored from its folder (config, weights, optimizer, step).

    ``overrides`` (``{"train.steps": 100}``) change the saved config for the
    rest of the run; the folder is read once.
    """
    folder = RunFolder.read(run_dir)
    config = folder.preset_config
    if overrides:
        config = config.with_values(overrides)
    return TrainingRun(config, run_dir, resume=folder, **kwargs)
