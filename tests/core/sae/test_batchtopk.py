"""BatchTopK: one top-k over the whole batch in training, a running threshold for inference.

Checked against an independent re-implementation written here (the flattened
batch sorted by hand, the moving average worked by hand), and against the files
SAELens 6.54.12 writes (``SAELENS_BATCHTOPK_CFG`` is its ``save_inference_model``
output, copied). ``test_saelens_reference.py`` runs SAELens itself when its venv
is there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tests.core.sae.planted import K, planted_rows, trained_sae
from tui_lab.core.sae.batchtopk import inference_sae, update_topk_threshold
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.folder import load_sae, save_sae
from tui_lab.core.sae.losses import StepLoss
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer

# cfg.json of a BatchTopK SAE as SAELens 6.54.12's save_inference_model writes it
SAELENS_BATCHTOPK_CFG = {
    "device": "cpu", "d_sae": 10, "d_in": 6, "normalize_activations": "none", "reshape_activations": "none",
    "metadata": {"sae_lens_version": "6.54.12", "sae_lens_training_version": "6.54.12",
                 "training_architecture": "batchtopk",
                 "training_architecture_details": {"decoder_init_norm": 0.1, "k": 3, "use_sparse_activations": False,
                                                   "aux_loss_coefficient": 1.0,
                                                   "rescale_acts_by_decoder_norm": True, "topk_threshold_lr": 0.01}},
    "dtype": "float32", "apply_b_dec_to_input": True, "architecture": "jumprelu",
}


def _sae(k: float = 3, d_sae: int = 10, seed: int = 0) -> SparseAutoencoder:
    sae = SparseAutoencoder(SAEConfig(d_in=6, d_sae=d_sae, architecture="batchtopk", k=k), seed=seed)
    with torch.no_grad():
        sae.b_enc.copy_(torch.linspace(-0.2, 0.3, d_sae))
        sae.b_dec.copy_(torch.linspace(0.1, -0.1, 6))
    return sae


def _reference_batch_topk(sae: SparseAutoencoder, x: torch.Tensor, k: float) -> np.ndarray:
    """ReLU(z) kept on the int(k·N) largest entries of the whole batch, sorted by hand in numpy."""
    W_enc, b_enc, b_dec = (t.detach().double().numpy() for t in (sae.W_enc, sae.b_enc, sae.b_dec))
    acts = np.maximum((x.double().numpy() - b_dec) @ W_enc + b_enc, 0.0)
    keep = int(k * x.shape[0])
    order = np.argsort(-acts, axis=None, kind="stable")[:keep]
    out = np.zeros(acts.size)
    out[order] = acts.flatten()[order]
    return out.reshape(acts.shape)


def test_training_keeps_exactly_k_times_batch_over_the_whole_batch() -> None:
    sae = _sae().train()
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(3))
    x[0] *= 10.0  # one loud row: a batch top-k gives it all its positive features, the others fewer
    f = sae(x)[1]
    assert int((f != 0).sum()) == 3 * 16
    per_row = (f != 0).sum(dim=1)
    assert int(per_row.max()) > 3 and int(per_row.min()) < 3  # not a per-row top-k
    np.testing.assert_allclose(f.detach().double().numpy(), _reference_batch_topk(sae, x, 3), atol=1e-6)


def test_a_fractional_k_keeps_its_floor_of_k_times_batch() -> None:
    sae = _sae(k=2.5).train()
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
    assert int((sae(x)[1] != 0).sum()) == 12  # int(2.5 · 5)


def test_gradient_reaches_only_the_kept_entries() -> None:
    sae = _sae().train()
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(5))
    _, f, z = sae(x)
    z.retain_grad()
    f.sum().backward()
    assert z.grad is not None
    assert torch.equal(z.grad != 0, f != 0)


def test_running_threshold_is_the_moving_average_of_the_smallest_kept_activation() -> None:
    sae = _sae()
    update_topk_threshold(sae, torch.zeros(2, 3))  # nothing fired: left as it was (SAELens's start, 0)
    assert float(sae.topk_threshold) == 0.0
    update_topk_threshold(sae, torch.tensor([[0.0, 0.5, 2.0], [0.9, 0.0, 0.0]]))
    assert float(sae.topk_threshold) == pytest.approx(0.01 * 0.5, abs=1e-15)
    update_topk_threshold(sae, torch.tensor([[0.25, 0.0, 3.0]]))
    assert float(sae.topk_threshold) == pytest.approx(0.99 * 0.005 + 0.01 * 0.25, abs=1e-15)
    update_topk_threshold(sae, torch.zeros(2, 3))
    assert float(sae.topk_threshold) == pytest.approx(0.99 * 0.005 + 0.01 * 0.25, abs=1e-15)
    assert sae.topk_threshold is not None and sae.topk_threshold.dtype == torch.float64


def test_inference_threshold_reproduces_the_training_selection() -> None:
    """The documented tolerance: on a batch of the training distribution at the end of
    training, the threshold's selection and the batch top-k's share at least 90% of
    their union, and the threshold keeps k per token on average within 15%."""
    sae = trained_sae("batchtopk")
    x = planted_rows(256, seed=99)
    with torch.no_grad():
        kept_in_training = sae.train()(x)[1] != 0
        kept_by_threshold = sae.eval()(x)[1] != 0
    overlap = (kept_in_training & kept_by_threshold).sum() / (kept_in_training | kept_by_threshold).sum()
    assert float(overlap) >= 0.9
    assert float(kept_by_threshold.sum(dim=1).float().mean()) == pytest.approx(K, rel=0.15)


def test_written_as_saelens_writes_it_a_jumprelu_file(tmp_path: Path) -> None:
    sae = _sae()
    assert sae.topk_threshold is not None
    sae.topk_threshold.fill_(0.123456789012345)
    save_sae(sae, tmp_path)
    cfg = json.loads((tmp_path / "cfg.json").read_text())
    assert cfg["architecture"] == "jumprelu" and "k" not in cfg
    assert cfg["metadata"]["training_architecture"] == "batchtopk"
    assert cfg["metadata"]["training_architecture_details"]["k"] == 3
    loaded = load_sae(tmp_path)
    assert loaded.cfg.architecture == "jumprelu" and loaded.threshold is not None
    assert torch.equal(loaded.threshold, torch.full((10,), 0.123456789012345, dtype=torch.float32))
    # the lab's encodings: ReLU(z)·[z > θ], by hand
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(6)) * 0.5
    z = (x.double() - sae.b_dec.detach().double()) @ sae.W_enc.detach().double() + sae.b_enc.detach().double()
    expected = torch.where(z > float(loaded.threshold[0].detach()), z, torch.zeros_like(z)).clamp_min(0)
    np.testing.assert_allclose(loaded.encode(x).detach().double().numpy(), expected.numpy(), atol=1e-5)
    assert torch.equal(loaded.encode(x), sae.eval().encode(x))


def test_saelens_made_batchtopk_file_opens_with_its_encodings(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(7)
    weights = {"W_enc": torch.randn(6, 10, generator=g), "b_enc": torch.randn(10, generator=g) * 0.1,
               "W_dec": torch.randn(10, 6, generator=g), "b_dec": torch.randn(6, generator=g) * 0.1,
               "threshold": torch.full((10,), 0.3)}
    tmp_path.joinpath("cfg.json").write_text(json.dumps(SAELENS_BATCHTOPK_CFG))
    save_file(weights, str(tmp_path / "sae_weights.safetensors"))
    sae = load_sae(tmp_path)
    x = torch.randn(5, 6, generator=g)
    z = (x.double() - weights["b_dec"].double()) @ weights["W_enc"].double() + weights["b_enc"].double()
    expected = z.clamp_min(0) * (z > 0.3)
    np.testing.assert_allclose(sae.encode(x).detach().double().numpy(), expected.numpy(), atol=1e-5)
    decoded = expected @ weights["W_dec"].double() + weights["b_dec"].double()
    np.testing.assert_allclose(sae.decode(sae.encode(x)).detach().double().numpy(), decoded.numpy(), atol=1e-5)


def test_saelens_training_checkpoint_opens_by_its_running_threshold(tmp_path: Path) -> None:
    """SAELens's training checkpoints (save_model) say "batchtopk" and keep topk_threshold (float64),
    the pre-activations ranked scaled by the decoder norms."""
    cfg = {**SAELENS_BATCHTOPK_CFG, "architecture": "batchtopk", "k": 3, "rescale_acts_by_decoder_norm": True,
           "topk_threshold_lr": 0.01}
    g = torch.Generator().manual_seed(8)
    weights = {"W_enc": torch.randn(6, 10, generator=g), "b_enc": torch.zeros(10),
               "W_dec": torch.randn(10, 6, generator=g) * 0.3, "b_dec": torch.zeros(6),
               "topk_threshold": torch.tensor(0.25, dtype=torch.float64)}
    tmp_path.joinpath("cfg.json").write_text(json.dumps(cfg))
    save_file(weights, str(tmp_path / "sae_weights.safetensors"))
    sae = load_sae(tmp_path)
    assert sae.cfg.architecture == "batchtopk" and not sae.training
    x = torch.randn(5, 6, generator=g)
    norms = weights["W_dec"].double().norm(dim=1)
    z = (x.double() @ weights["W_enc"].double()) * norms
    expected = z.clamp_min(0) * (z > 0.25)
    np.testing.assert_allclose(sae.encode(x).detach().double().numpy(), expected.numpy(), atol=1e-5)
    # written back, it is the JumpReLU file SAELens would write: the norms folded in
    save_sae(sae, tmp_path / "inference")
    again = load_sae(tmp_path / "inference")
    assert again.cfg.architecture == "jumprelu"
    np.testing.assert_allclose(again.encode(x).detach().double().numpy(), expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(again.decode(again.encode(x)).detach().numpy(),
                               sae.decode(sae.encode(x)).detach().numpy(), atol=1e-5)


def test_resume_continues_as_batchtopk_with_its_threshold(tmp_path: Path) -> None:
    settings = TrainSettings(tokens=2048, batch_size=256, buffer_rows=1024, lr=1e-3, dead_window=1024, log_every=4)
    sae = SparseAutoencoder(SAEConfig(d_in=16, d_sae=32, architecture="batchtopk", k=2), seed=0)
    SAETrainer(sae, settings, tmp_path).train(iter([planted_rows(4096, seed=1)]))
    assert sae.topk_threshold is not None
    theta = float(sae.topk_threshold)
    resumed = SAETrainer.resume(tmp_path, tokens=4096)
    assert resumed.sae.cfg.architecture == "batchtopk" and resumed.sae.training
    assert resumed.sae.topk_threshold is not None
    assert float(resumed.sae.topk_threshold) == pytest.approx(theta, rel=1e-6)  # float32 in the file
    resumed.train(iter([planted_rows(4096, seed=2)]))
    assert load_sae(tmp_path).cfg.architecture == "jumprelu" and resumed.step == 16


def test_inference_sae_of_other_architectures_is_itself() -> None:
    sae = SparseAutoencoder(SAEConfig(d_in=6, d_sae=10, architecture="topk", k=3)).train()
    assert inference_sae(sae) is sae and sae.training


@pytest.mark.parametrize(("k", "why"), [(0, "above 0"), (11, "at most d_sae"), (True, "above 0")])
def test_bad_k_is_one_line(k: object, why: str) -> None:
    from tui_lab.core.errors import LabError

    with pytest.raises(LabError, match=why):
        SAEConfig(d_in=6, d_sae=10, architecture="batchtopk", k=k)  # type: ignore[arg-type]


def test_threshold_rate_spans_the_end_of_a_short_run_and_is_saelens_for_long_ones() -> None:
    from tui_lab.core.sae.recipe import threshold_rate

    assert threshold_rate(None) == 0.01 and threshold_rate(10**6) == 0.01  # SAELens's default
    assert threshold_rate(293) == pytest.approx(15 / 293) and threshold_rate(10) == 0.1


def test_the_topk_start_keeps_k_per_token_then_k_times_batch_over_the_batch() -> None:
    """``topk_start_steps``: TopK's selection first (every token its k), then the batch-wide one."""
    counts: list[torch.Tensor] = []

    class Recording(SAETrainer):
        def train_step(self, x: torch.Tensor) -> StepLoss:
            loss = super().train_step(x)
            counts.append((loss.features != 0).sum(dim=1))
            return loss

    sae = _sae()
    with torch.no_grad():
        sae.b_enc.fill_(20.0)  # every pre-activation positive: a per-token top-k keeps exactly k
    g = torch.Generator().manual_seed(6)
    x = torch.randn(128, 6, generator=g) * torch.logspace(0, 1, 128).unsqueeze(1)  # loud and quiet rows
    settings = TrainSettings(tokens=128, batch_size=16, buffer_rows=128, lr=1e-4, dead_window=10_000,
                             topk_start_steps=3, b_dec_init="zeros")
    Recording(sae, settings).train(iter([x]))
    assert len(counts) == 8
    for step, per_row in enumerate(counts):
        assert int(per_row.sum()) == 3 * 16  # k·N in every step
        if step < 3:
            assert per_row.tolist() == [3] * 16
        else:
            assert int(per_row.max()) > 3 and int(per_row.min()) < 3, step


def test_the_recipe_starts_batchtopk_kinds_as_topk_for_half_their_steps() -> None:
    from tui_lab.core.sae.recipe import train_settings

    for arch in ("batchtopk", "matryoshka_batchtopk"):
        assert train_settings(300_000, 1024, arch=arch).topk_start_steps == 146  # 293 steps
    assert train_settings(300_000, 1024, arch="topk").topk_start_steps == 0
    assert train_settings(300_000, 1024).topk_start_steps == 0
