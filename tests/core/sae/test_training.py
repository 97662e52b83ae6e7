"""Training learns something real: a known sparse dictionary is recovered from its mixtures.

256 unit directions in 64 dimensions, 4 active at a time, with noise, in context
order (see ``synthetic.py``). Red when the training step is a no-op, when decoder
rows are not kept at unit norm, or when the buffer does not shuffle (each seen by
breaking the code on purpose).
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.core.sae.synthetic import ACTIVE, D_IN, dictionary, documents, recovered
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.events import SAEEndEvent, SAEEvent, SAEStepEvent
from tui_lab.core.sae.folder import load_sae
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer

SETTINGS = TrainSettings(tokens=200_000, batch_size=256, buffer_rows=16_384, lr=3e-3,
                         dead_window=20_000, log_every=100)


def _topk(d_sae: int = 384) -> SparseAutoencoder:
    return SparseAutoencoder(SAEConfig(d_in=D_IN, d_sae=d_sae, architecture="topk", k=ACTIVE), seed=0)


@pytest.fixture(scope="module")
def trained() -> tuple[SparseAutoencoder, list[SAEEvent], torch.Tensor]:
    """A TopK SAE trained on 200,000 synthetic rows (a few seconds on one core)."""
    torch.manual_seed(0)
    true = dictionary()
    sae, events = _topk(), []
    SAETrainer(sae, SETTINGS, on_event=events.append).train(documents(true, 10**9))
    return sae, events, true


def test_recovers_the_true_directions(trained: tuple[SparseAutoencoder, list[SAEEvent], torch.Tensor]) -> None:
    sae, _, true = trained
    assert recovered(true, sae.W_dec.detach()) >= 0.9


def test_decoder_rows_stay_unit_norm(trained: tuple[SparseAutoencoder, list[SAEEvent], torch.Tensor]) -> None:
    """A feature's activation is then the amount of its direction in the input, which
    the browser's histograms and steering read as such (and SAELens's TopK files mean)."""
    sae, _, _ = trained
    norms = sae.W_dec.detach().norm(dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-4)


def test_events_report_the_curves(trained: tuple[SparseAutoencoder, list[SAEEvent], torch.Tensor]) -> None:
    _, events, _ = trained
    steps = [e for e in events if isinstance(e, SAEStepEvent)]
    assert [e.step for e in steps[:3]] == [100, 200, 300]
    last = steps[-1]
    assert last.tokens >= SETTINGS.tokens and last.l0 == pytest.approx(ACTIVE)
    assert last.explained_variance > 0.85 and last.fvu == pytest.approx(1 - last.explained_variance)
    assert steps[0].mse > last.mse
    assert 0.0 <= last.dead_fraction < 0.5
    assert isinstance(events[-1], SAEEndEvent) and events[-1].reason == "done"


def _small_run(out, tokens: int = 4096, **more: int) -> tuple[SAETrainer, list[SAEEvent]]:
    settings = TrainSettings(tokens=tokens, batch_size=128, buffer_rows=1024, lr=3e-3, log_every=4,
                             checkpoint_every=8, **more)
    events: list[SAEEvent] = []
    return SAETrainer(_topk(64), settings, out, on_event=events.append), events


def test_checkpoint_opens_and_resumes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    true = dictionary()
    trainer, events = _small_run(tmp_path / "run")
    end = trainer.train(documents(true, 10**9))
    assert (end.step, end.tokens, end.reason) == (32, 4096, "done")
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert kinds.count("checkpoint") == 4 and kinds[-1] == "end" and "step" in kinds
    opened = load_sae(tmp_path / "run")
    assert torch.equal(opened.W_dec, trainer.sae.W_dec) and opened.log_sparsity is not None

    resumed = SAETrainer.resume(tmp_path / "run", tokens=8192)
    assert (resumed.step, resumed.tokens) == (32, 4096)
    assert resumed.activity.tokens == 4096
    for name, p in trainer.sae.named_parameters():
        assert torch.equal(p, dict(resumed.sae.named_parameters())[name])
        old, new = trainer.optimizer.state[p], resumed.optimizer.state[dict(resumed.sae.named_parameters())[name]]
        assert torch.equal(old["exp_avg_sq"], new["exp_avg_sq"]) and float(old["step"]) == float(new["step"])
    end = resumed.train(documents(true, 10**9, seed=3))
    assert (end.step, end.tokens, end.reason) == (64, 8192, "done")


def test_stop_and_source_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    true = dictionary()
    trainer, _ = _small_run(None)
    assert trainer.train(documents(true, 10**9), should_stop=lambda: trainer.step >= 5).reason == "stopped"
    assert trainer.step == 5
    trainer, _ = _small_run(None)
    end = trainer.train(documents(true, 2048))
    assert end.reason == "source ended" and end.tokens == 2048


def test_ctrl_c_saves(tmp_path) -> None:  # type: ignore[no-untyped-def]
    true = dictionary()
    trainer, _ = _small_run(tmp_path / "run")

    def interrupted() -> bool:
        if trainer.step == 3:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        trainer.train(documents(true, 10**9), should_stop=interrupted)
    assert SAETrainer.resume(tmp_path / "run").step == 3


def test_evaluation_callback_joins_the_events() -> None:
    true = dictionary()
    trainer, events = _small_run(None, eval_every=8)
    trainer.evaluate = lambda sae: {"ce_loss_recovered": 0.5}
    trainer.train(documents(true, 10**9))
    with_eval = [e.step for e in events if isinstance(e, SAEStepEvent) and e.extra]
    assert with_eval == [8, 16, 24, 32]
    assert events[-2].record()["ce_loss_recovered"] == 0.5  # type: ignore[union-attr]
