"""Training a transcoder set: every layer at once, on (MLP input, MLP output) pairs.

The SAE trainer (``trainer.py``) reconstructs its own input; a transcoder predicts
another hook's activation, so its rows are pairs. This loop shares the SAE
trainer's parts: its settings (``TrainSettings``: learning-rate warm-up and decay,
sparsity coefficients, dead window), its shuffled buffer, its dead-feature
counting, its JumpReLU estimator and its events. A row is every layer's pair
joined, [x_0 | y_0 | x_1 | y_1 | ...] (L·2·d_model), so shuffling keeps each pair
together and one forward pass of the model trains every layer.

Per layer, the loss is the SAE trainer's for the architecture with y in place of
the reconstructed x: ‖ŷ − y‖² summed over d_model, averaged over tokens, plus
ReLU's decoder-norm-weighted L1, JumpReLU's L0, or TopK's AuxK on dead features.
The layers' losses are independent, so one Adam over their sum is one Adam per layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch

from tui_lab.core.sae.activity import FeatureActivity
from tui_lab.core.sae.buffer import ActivationBuffer
from tui_lab.core.sae.events import SAEEndEvent, SAEEvent, SAEStepEvent
from tui_lab.core.sae.jumprelu import step
from tui_lab.core.sae.losses import Coefficients
from tui_lab.core.sae.metrics import explained_variance, l0, mse
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.transcoder_layers import Transcoder, TranscoderSet

START_DENSITY = 0.05  # the share of tokens each ReLU/JumpReLU feature fires on at the start
# Numbers (such as CE loss recovered) the evaluation callback adds to a step event.
Evaluate = Callable[[TranscoderSet], dict[str, float]]


def split_pairs(rows: torch.Tensor, n_layers: int, d_model: int) -> torch.Tensor:
    """(N, L·2·d) joined rows as (L, 2, N, d): [layer][0] the MLP inputs, [layer][1] outputs."""
    return rows.reshape(rows.shape[0], n_layers, 2, d_model).permute(1, 2, 0, 3)


def layer_loss(tc: Transcoder, x: torch.Tensor, y: torch.Tensor, c: Coefficients,
               dead: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, prediction ŷ, features f) of one layer's transcoder on inputs x, targets y (N, d)."""
    z = tc.pre_acts(x)
    f = tc.activate(z)
    y_hat = tc.decode(f) + tc.skip(x) if tc.has_skip else tc.decode(f)
    loss = (y_hat - y).pow(2).sum(dim=-1).mean()
    if tc.architecture == "relu":
        loss = loss + c.l1 * (f * tc.W_dec.norm(dim=-1)).sum(dim=-1).mean()
    elif tc.threshold is not None:
        loss = loss + c.l0 * step(z, tc.threshold, tc.bandwidth).sum(dim=-1).mean()
    elif dead is not None and c.aux_k > 0 and bool(dead.any()):
        loss = loss + c.aux_k * aux_k_loss(tc, y - y_hat.detach(), z, dead)
    return loss, y_hat, f


def aux_k_loss(tc: Transcoder, error: torch.Tensor, z: torch.Tensor, dead: torch.Tensor) -> torch.Tensor:
    """Gao et al.'s AuxK: the dead features' top k_aux predict what the live ones missed."""
    n_dead = int(dead.sum())
    k_aux = tc.d_model // 2
    scale = min(n_dead / k_aux, 1.0)
    dead_z = torch.where(dead, z, torch.full_like(z, -torch.inf))
    values, indices = dead_z.topk(min(k_aux, n_dead), dim=-1, sorted=False)
    z_aux = torch.zeros_like(z).scatter(-1, indices, values.relu())
    return scale * (z_aux @ tc.W_dec - error).pow(2).sum(dim=-1).mean()


class TranscoderTrainer:
    """Trains the transcoders of ``tset`` at ``layers`` (default: all) by ``settings`` (the SAE
    trainer's); the rows it reads join those layers' pairs, in that order."""

    def __init__(self, tset: TranscoderSet, settings: TrainSettings, layers: list[int] | None = None,
                 on_event: Callable[[SAEEvent], None] | None = None, evaluate: Evaluate | None = None) -> None:
        self.tset = tset
        self.layers = [tset[i] for i in (range(tset.n_layers) if layers is None else layers)]
        self.settings = settings
        self.on_event = on_event
        self.evaluate = evaluate
        self.device = self.layers[0].W_enc.device
        params = [p for tc in self.layers for p in tc.parameters()]
        self.optimizer = torch.optim.Adam(params, lr=settings.lr, betas=(0.9, 0.999))
        self.activity = [FeatureActivity(tc.d_tc, settings.dead_window, self.device) for tc in self.layers]
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0
        self.last_loss = 0.0
        for tc in self.layers:
            tc.train()
            tc.bandwidth = settings.jumprelu_bandwidth

    @torch.no_grad()
    def initialize_from(self, pairs: torch.Tensor) -> None:
        """Before the first step: each b_dec at its targets' mean; ReLU's and JumpReLU's b_enc
        set so each feature starts firing on START_DENSITY of the batch's tokens (θ at its
        small start value on top).

        From a tied start about half the features fire on every token and their sum dwarfs
        an MLP's output; a sparsity penalty then needs thousands of steps to silence them
        (on the induction-mlp run the explained variance was still near 0 after 60 steps).
        Starting sparse, at each feature's own quantile, the penalty only has to keep it so.
        """
        for tc, (x, y) in zip(self.layers, pairs, strict=True):
            tc.b_dec.copy_(y.mean(dim=0))
            if tc.architecture == "topk":
                continue
            tc.b_enc.sub_(tc.pre_acts(x).quantile(1.0 - START_DENSITY, dim=0))  # b_enc was 0
            if tc.threshold is not None:
                tc.threshold.fill_(self.settings.jumprelu_init_threshold)

    def train_step(self, pairs: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """One Adam step on (L, 2, N, d) pairs; each layer's (ŷ, f), detached."""
        c = self.settings.coefficients_at(self.step)
        total = pairs.new_zeros(())
        out = []
        for tc, activity, (x, y) in zip(self.layers, self.activity, pairs, strict=True):
            dead = activity.dead_mask() if tc.architecture == "topk" else None
            loss, y_hat, f = layer_loss(tc, x, y, c, dead)
            total = total + loss
            out.append((y_hat.detach(), f.detach()))
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        for group in self.optimizer.param_groups:
            group["lr"] = self.settings.lr_at(self.step)
        unit = [tc for tc in self.layers if tc.architecture == "topk"]
        with torch.no_grad():
            for tc in unit:  # TopK ranks f itself: its rows stay unit (as the SAE trainer keeps them)
                _drop_parallel_gradient(tc.W_dec)
            self.optimizer.step()
            for tc in unit:
                tc.W_dec.div_(tc.W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12))
            for tc in self.layers:
                if tc.threshold is not None:
                    tc.threshold.clamp_(min=0.0)
        for activity, (_y_hat, f) in zip(self.activity, out, strict=True):
            activity.update(f)
        self.step += 1
        self.tokens += pairs.shape[2]
        self.last_loss = float(total.detach())
        return out

    def train(self, rows: Iterable[torch.Tensor], should_stop: Callable[[], bool] | None = None) -> SAEEndEvent:
        """Train on joined rows until ``settings.tokens``, ``should_stop()`` or the source's end."""
        s = self.settings
        start = time.perf_counter()
        capacity = max(2 * s.batch_size, min(s.buffer_rows, s.tokens))
        batches = ActivationBuffer(rows, capacity, s.batch_size, seed=s.seed, device=self.device)
        reason = "source ended"
        for batch in batches:
            if should_stop is not None and should_stop():
                reason = "stopped"
                break
            pairs = split_pairs(batch, len(self.layers), self.tset.d_model)
            if self.step == 0:
                self.initialize_from(pairs)
            out = self.train_step(pairs)
            self.elapsed = time.perf_counter() - start
            last = self.tokens >= s.tokens
            if self.step % s.log_every == 0 or last:
                self.emit(self.step_event(pairs, out, last))
            if last:
                reason = "done"
                break
        self.elapsed = time.perf_counter() - start
        for tc in self.layers:
            tc.eval()
        end = SAEEndEvent(self.step, self.tokens, reason, self.elapsed)
        self.emit(end)
        return end

    @torch.no_grad()
    def step_event(self, pairs: torch.Tensor, out: list[tuple[torch.Tensor, torch.Tensor]],
                   last: bool) -> SAEStepEvent:
        """The step's event: the layers' mean EV, L0 and dead fraction, each layer's in ``extra``."""
        extra: dict[str, float] = {}
        evs, l0s, deads, mses = [], [], [], []
        for layer, ((_x, y), (y_hat, f), activity) in enumerate(zip(pairs, out, self.activity, strict=True)):
            evs.append(explained_variance(y, y_hat))
            mses.append(mse(y, y_hat))
            l0s.append(l0(f))
            deads.append(activity.dead_fraction())
            extra[f"layer{layer}_explained_variance"] = evs[-1]
        evaluating = last or bool(self.settings.eval_every and self.step % self.settings.eval_every == 0)
        if evaluating and self.evaluate is not None:
            extra.update(self.evaluate(self.tset))
        ev = sum(evs) / len(evs)
        return SAEStepEvent(step=self.step, tokens=self.tokens, total_tokens=self.settings.tokens,
                            loss=self.last_loss, mse=sum(mses) / len(mses), l0=sum(l0s) / len(l0s),
                            explained_variance=ev, fvu=1.0 - ev, dead_fraction=sum(deads) / len(deads),
                            sparsity_loss=0.0, aux_loss=0.0,
                            lr=self.settings.lr_at(self.step - 1), elapsed=self.elapsed, extra=extra)

    def emit(self, event: SAEEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)


def _drop_parallel_gradient(w_dec: torch.Tensor) -> None:
    """Remove the part of W_dec's gradient along each row: the norm step would undo it."""
    grad = w_dec.grad
    if grad is None:
        return
    rows = w_dec / w_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    grad.sub_((grad * rows).sum(dim=-1, keepdim=True) * rows)
