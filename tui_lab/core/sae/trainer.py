"""Training an SAE: Adam over shuffled activation batches, with events, checkpoints and resume.

The activations come as an iterator of (..., d_in) tensors (the model at a hook,
or anything else); the trainer pulls them through the shuffled buffer
(``buffer.py``) and stops after ``settings.tokens`` rows, when ``should_stop()``
says so, or when the source ends. Every ``log_every`` steps it reports an
``SAEStepEvent`` (MSE, L0, explained variance, FVU, dead features) to
``on_event`` and, with an output folder, to ``metrics.jsonl``; checkpoints are
SAELens folders that resume where they stopped. A BatchTopK SAE's inference
threshold is calibrated at the end on the last rows trained on (``batchtopk.py``).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from tui_lab.core.sae.activity import FeatureActivity
from tui_lab.core.sae.batchtopk import (
    CALIBRATION_ROWS,
    calibrate_threshold,
    resumable,
    update_topk_threshold,
)
from tui_lab.core.sae.buffer import ActivationBuffer
from tui_lab.core.sae.checkpoint import (
    TrainerState,
    append_record,
    load_checkpoint,
    load_optimizer_tensors,
    save_checkpoint,
)
from tui_lab.core.sae.events import SAECheckpointEvent, SAEEndEvent, SAEEvent, SAEStepEvent
from tui_lab.core.sae.geometric_median import geometric_median
from tui_lab.core.sae.losses import AUX_K, StepLoss, training_loss
from tui_lab.core.sae.metrics import explained_variance, l0
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings

# The evaluation callback: numbers (such as ce_loss_recovered) to add to a step event.
Evaluate = Callable[[SparseAutoencoder], dict[str, float]]


class SAETrainer:
    """Trains ``sae`` by ``settings``; ``out`` (optional) is the run folder it checkpoints to."""

    def __init__(self, sae: SparseAutoencoder, settings: TrainSettings, out: str | os.PathLike[str] | None = None,
                 on_event: Callable[[SAEEvent], None] | None = None, evaluate: Evaluate | None = None) -> None:
        self.sae = sae.train()
        self.settings = settings
        self.out = Path(out) if out is not None else None
        self.on_event = on_event
        self.evaluate = evaluate
        self.device = sae.W_enc.device
        self.optimizer = torch.optim.Adam(sae.parameters(), lr=settings.lr, betas=(0.9, 0.999))
        self.activity = FeatureActivity(sae.cfg.d_sae, settings.dead_window, self.device)
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0

    @classmethod
    def resume(cls, out: str | os.PathLike[str], on_event: Callable[[SAEEvent], None] | None = None,
               evaluate: Evaluate | None = None, tokens: int | None = None,
               device: torch.device | str = "cpu") -> SAETrainer:
        """The trainer of the run in ``out`` at its last checkpoint; ``tokens`` raises the target."""
        folder = Path(out)
        sae, optimizer_state, activity_state, state = load_checkpoint(folder, device)
        sae = resumable(sae)  # a BatchTopK run's files are its JumpReLU form
        settings = state.settings
        if tokens is not None:
            settings = TrainSettings.from_dict({**settings.to_dict(), "tokens": tokens})
        trainer = cls(sae, settings, folder, on_event, evaluate)
        load_optimizer_tensors(sae, trainer.optimizer, optimizer_state)
        trainer.activity.load_state(activity_state)
        trainer.step, trainer.tokens, trainer.elapsed = state.step, state.tokens, state.elapsed
        return trainer

    @torch.no_grad()
    def initialize_from(self, x: torch.Tensor) -> None:
        """Before the first step: ``b_dec`` at the batch's geometric median (or mean), θ at its start."""
        how = self.settings.b_dec_init
        if how == "geometric_median":
            self.sae.b_dec.copy_(geometric_median(x))
        elif how == "mean":
            self.sae.b_dec.copy_(x.mean(dim=0))
        if self.sae.threshold is not None:
            self.sae.threshold.fill_(self.settings.jumprelu_init_threshold)
        self.sae.bandwidth = self.settings.jumprelu_bandwidth

    def train_step(self, x: torch.Tensor) -> StepLoss:
        """One Adam step on the batch ``x`` (N, d_in)."""
        sae, s = self.sae, self.settings
        dead = self.activity.dead_mask() if sae.cfg.architecture in AUX_K else None
        loss = training_loss(sae, x, s.coefficients_at(self.step), dead, per_token=self.step < s.topk_start_steps)
        self.optimizer.zero_grad(set_to_none=True)
        loss.total.backward()
        if sae.needs_unit_decoder:
            sae.remove_parallel_gradient()
        for group in self.optimizer.param_groups:
            group["lr"] = s.lr_at(self.step)
        self.optimizer.step()
        if sae.needs_unit_decoder:
            sae.normalize_decoder()
        if sae.threshold is not None:
            with torch.no_grad():
                sae.threshold.clamp_(min=0.0)  # a negative threshold would only mean ReLU
        update_topk_threshold(sae, loss.kept_values())  # BatchTopK's running threshold (else nothing)
        self.activity.add(*loss.fired())
        self.step += 1
        self.tokens += x.shape[0]
        return loss

    def train(self, activations: Iterable[torch.Tensor], should_stop: Callable[[], bool] | None = None) -> SAEEndEvent:
        """Train until ``settings.tokens`` rows, ``should_stop()``, or the source's end; the end event.

        Ctrl+C checkpoints the run (with an output folder) and is raised again.
        """
        s = self.settings
        start = time.perf_counter() - self.elapsed
        capacity = max(2 * s.batch_size, min(s.buffer_rows, s.tokens - self.tokens))
        batches = ActivationBuffer(activations, capacity, s.batch_size, seed=s.seed + self.step, device=self.device)
        reason = "done" if self.tokens >= s.tokens else "source ended"
        # the last rows trained on, for BatchTopK's threshold calibration (nothing kept otherwise)
        recent: deque[torch.Tensor] = deque(maxlen=-(-CALIBRATION_ROWS // s.batch_size)
                                            if self.sae.topk_threshold is not None else 0)
        try:
            for x in (batches if self.tokens < s.tokens else ()):
                if should_stop is not None and should_stop():
                    reason = "stopped"
                    break
                if self.step == 0:
                    self.initialize_from(x)
                loss = self.train_step(x)
                recent.append(x)
                if self.tokens >= s.tokens:  # before the last evaluation, which should see it
                    calibrate_threshold(self.sae, recent)
                    recent.clear()
                self.elapsed = time.perf_counter() - start
                self._after_step(x, loss)
                if self.tokens >= s.tokens:
                    reason = "done"
                    break
        except KeyboardInterrupt:
            self._finish("interrupted", start)  # the running θ kept: the run resumes from it
            raise
        calibrate_threshold(self.sae, recent)  # stopped or the source ended (empty when done)
        return self._finish(reason, start)

    def _after_step(self, x: torch.Tensor, loss: StepLoss) -> None:
        """Report the step (every ``log_every``) and checkpoint (every ``checkpoint_every``)."""
        s = self.settings
        last = self.tokens >= s.tokens
        evaluating = bool(s.eval_every and self.step % s.eval_every == 0) or last
        if self.step % s.log_every == 0 or last:
            self.emit(self.step_event(x, loss, self.run_evaluation() if evaluating else {}))
        if s.checkpoint_every and self.step % s.checkpoint_every == 0 and not last:
            self.checkpoint()

    def run_evaluation(self) -> dict[str, float]:
        """The evaluation callback's numbers (such as CE loss recovered), if there is one."""
        if self.evaluate is None:
            return {}
        self.sae.eval()  # as it will be used: BatchTopK by its running threshold, not the batch's top-k
        try:
            with torch.no_grad():
                return dict(self.evaluate(self.sae))
        finally:
            self.sae.train()

    @torch.no_grad()
    def step_event(self, x: torch.Tensor, loss: StepLoss, extra: dict[str, float]) -> SAEStepEvent:
        """The step's event, from the batch just trained on (no second forward pass)."""
        ev = explained_variance(x, loss.x_hat)
        return SAEStepEvent(
            step=self.step, tokens=self.tokens, total_tokens=self.settings.tokens,
            loss=float(loss.total), mse=float(loss.mse) / x.shape[-1], l0=l0(loss.features),
            explained_variance=ev, fvu=1.0 - ev, dead_fraction=self.activity.dead_fraction(),
            sparsity_loss=float(loss.sparsity), aux_loss=float(loss.aux),
            lr=self.settings.lr_at(self.step - 1), elapsed=self.elapsed, extra=extra,
        )

    def emit(self, event: SAEEvent) -> None:
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            append_record(self.out, event.record())
        if self.on_event is not None:
            self.on_event(event)

    def checkpoint(self) -> Path | None:
        """Save the run to its folder (if it has one); the folder."""
        if self.out is None:
            return None
        state = TrainerState(self.step, self.tokens, self.elapsed, self.settings)
        save_checkpoint(self.out, self.sae, self.optimizer, self.activity, state)
        self.emit(SAECheckpointEvent(self.step, self.tokens, str(self.out)))
        return self.out

    def _finish(self, reason: str, start: float) -> SAEEndEvent:
        self.elapsed = time.perf_counter() - start
        self.checkpoint()
        end = SAEEndEvent(self.step, self.tokens, reason, self.elapsed)
        self.emit(end)
        return end
