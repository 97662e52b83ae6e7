"""The feature table (every feature over a text in one pass) against dense brute force,
its cache, logit effects by hand, and the shading levels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.feature_cache import (
    cached_feature_table,
    load_table,
    save_table,
    table_key,
    weights_digest,
)
from tui_lab.core.sae.feature_table import (
    EDGES,
    build_feature_table,
    logit_effects,
    shade_levels,
    unembedding,
)
from tui_lab.core.sae.sae import SparseAutoencoder

N, T, D, F = 12, 7, 8, 20


def _sae(arch: str) -> SparseAutoencoder:
    sae = SparseAutoencoder(SAEConfig(d_in=D, d_sae=F, architecture=arch, k=3 if arch == "topk" else None),
                            seed=1)
    with torch.no_grad():
        sae.b_enc.fill_(-0.3)
    return sae


def _acts() -> torch.Tensor:
    return torch.randn(N, T, D, generator=torch.Generator().manual_seed(0))


def _batches(acts: torch.Tensor, size: int = 5) -> list[torch.Tensor]:
    return list(acts.split(size))


@pytest.mark.parametrize("arch", ["topk", "standard"])
def test_the_table_equals_dense_brute_force(arch: str) -> None:
    sae, acts = _sae(arch), _acts()
    windows = torch.arange(N * T).reshape(N, T)
    table = build_feature_table(sae, windows, _batches(acts), top=3)
    assert table is not None
    f = sae.encode(acts).detach()  # (N, T, F)
    flat = f.reshape(-1, F)
    torch.testing.assert_close(table.density, (flat > 0).float().mean(0))
    torch.testing.assert_close(table.max, flat.max(0).values)
    peaks = f.max(dim=1).values  # (N, F)
    for j in range(F):
        fired = [w for w in peaks[:, j].argsort(descending=True, stable=True).tolist() if peaks[w, j] > 0][:3]
        got = [c.window for c in table.contexts(j)]
        assert sorted(got) == sorted(fired), j
        for c in table.contexts(j):
            torch.testing.assert_close(torch.tensor(c.activations), f[c.window, :, j])
            assert c.peak == pytest.approx(float(f[c.window, :, j].max()))
            assert c.ids == windows[c.window].tolist()
        values = flat[:, j][flat[:, j] > 0].numpy()
        counts, _ = np.histogram(np.clip(values, EDGES[0].item(), EDGES[-1].item() * 0.999), bins=EDGES.numpy())
        assert table.hist[j].tolist() == counts.tolist(), j
    assert table.tokens == N * T


def test_histogram_rows_and_stop() -> None:
    sae, acts = _sae("topk"), _acts()
    windows = torch.zeros(N, T, dtype=torch.long)
    table = build_feature_table(sae, windows, _batches(acts))
    assert table is not None
    j = int(table.density.argmax())
    rows = table.histogram(j)
    assert rows[0][2] > 0 and rows[-1][2] > 0
    assert sum(n for _, _, n in rows) == round(float(table.density[j]) * table.tokens)
    assert build_feature_table(sae, windows, _batches(acts), should_stop=lambda: True) is None


class FakeModel:
    """The handle's two calls: the windows' "activations" are a fixed table lookup."""

    def __init__(self) -> None:
        self.model = torch.nn.Linear(2, 2)
        self.lookup = torch.randn(50, D, generator=torch.Generator().manual_seed(3))
        self.forwards = 0

    def run_with_cache(self, ids: torch.Tensor, names: list[str]) -> tuple[torch.Tensor, dict]:
        self.forwards += 1
        return ids, {names[0]: self.lookup[ids]}

    def run_with_hooks(self, ids: torch.Tensor, hooks: list) -> torch.Tensor:
        raise AssertionError("not used")


def test_the_cache_is_read_back_and_keyed_by_what_the_table_depends_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    model, sae = FakeModel(), _sae("topk")
    windows = torch.randint(0, 50, (N, T), generator=torch.Generator().manual_seed(4))
    first, cached = cached_feature_table(model, sae, windows, "h", top=4, batch=5)
    assert first is not None and not cached and model.forwards == 3
    again, cached = cached_feature_table(model, sae, windows, "h", top=4, batch=5)
    assert again is not None and cached and model.forwards == 3  # no forward the second time
    for name, tensor in first.tensors().items():
        assert torch.equal(tensor, again.tensors()[name]), name
    digest = weights_digest(dict(model.model.state_dict()))
    key = table_key(sae, digest, windows, "h", 4)
    assert load_table(key) is not None
    others = [table_key(sae, digest, windows, "g", 4), table_key(sae, digest, windows, "h", 5),
              table_key(sae, "other", windows, "h", 4), table_key(sae, digest, windows.flip(0), "h", 4)]
    with torch.no_grad():
        sae.W_dec[0, 0] += 1e-3
    others.append(table_key(sae, digest, windows, "h", 4))
    assert key not in others and len(set(others)) == len(others)
    (tmp_path / "sae-features" / f"{key}.safetensors").write_bytes(b"torn")
    assert load_table(key) is None  # rebuilt, not an error
    save_table(key, first)
    assert load_table(key) is not None


def test_logit_effects_by_hand() -> None:
    sae = _sae("topk")
    w_u = torch.randn(D, 11, generator=torch.Generator().manual_seed(5))
    effects = logit_effects(sae, 4, w_u, top=3)
    by_hand = sae.W_dec[4].detach().double().numpy() @ w_u.double().numpy()
    order = np.argsort(by_hand)
    assert [i for i, _ in effects.promoted] == order[::-1][:3].tolist()
    assert [i for i, _ in effects.suppressed] == order[:3].tolist()
    assert effects.promoted[0][1] == pytest.approx(by_hand.max(), rel=1e-5)
    assert effects.suppressed[0][1] == pytest.approx(by_hand.min(), rel=1e-5)


def test_unembedding_folds_the_final_norm_scale() -> None:
    from tui_lab.core.config.sections import ModelConfig
    from tui_lab.core.model.models import DecoderOnly

    model = DecoderOnly(ModelConfig(arch="decoder-only", d_model=D, n_heads=2, n_decoder_layers=1, d_ff=16,
                                    positional="learned", max_len=8, vocab_size=11), 11)
    with torch.no_grad():
        model.decoder.norm.weight.copy_(torch.arange(1.0, D + 1))
    w_u = unembedding(model)
    assert w_u is not None and w_u.shape == (D, 11)
    torch.testing.assert_close(w_u, torch.arange(1.0, D + 1)[:, None] * model.lm_head.weight.detach().T)
    assert unembedding(torch.nn.Linear(2, 2)) is None


def test_shade_levels() -> None:
    assert shade_levels([0.0, 0.1, 2.0, 4.0, -1.0], 4.0) == [0, 1, 2, 4, 0]
    assert shade_levels([0.0, 0.0], 0.0) == [0, 0]


def test_training_keeps_the_first_windows_and_the_table_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Recorder on the first (unshuffled) pass keeps the first windows' activations; the table
    of those windows (or a prefix of them) then runs no forward pass and equals the model's."""
    from tui_lab.core.sae.activation_store import MAX_BYTES, Recorder
    from tui_lab.core.sae.activations import hook_activations
    from tui_lab.core.sae.feature_cache import recorder

    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path))
    model, sae = FakeModel(), _sae("topk")
    windows = torch.randint(0, 50, (N, T), generator=torch.Generator().manual_seed(4))
    kept = recorder(model, windows, "h", tokens=8 * T)
    for _ in zip(range(5), kept.wrap(hook_activations(model, windows, "h", 3, epochs=None)), strict=False):
        pass  # 15 windows read (the pass goes round): the first 8 are kept once complete
    (stored,) = (tmp_path / "sae-activations").glob("*.safetensors")
    model.forwards = 0
    table, cached = cached_feature_table(model, sae, windows[:6], "h", top=4, batch=5, use_cache=False)
    assert table is not None and model.forwards == 0
    plain, _ = cached_feature_table(model, sae, windows[:6], "h", top=4, batch=5, use_cache=False,
                                    use_store=False)
    assert plain is not None and model.forwards == 2
    for name, tensor in table.tensors().items():
        assert torch.equal(tensor, plain.tensors()[name]), name
    model.forwards = 0
    cached_feature_table(model, sae, windows, "h", top=4, batch=5, use_cache=False)  # 12 > 8 kept
    assert model.forwards == 3
    model.forwards = 0
    cached_feature_table(model, sae, windows.flip(0)[:4], "h", top=4, batch=5, use_cache=False)
    assert model.forwards == 1  # not a prefix of what was kept
    stored.write_bytes(b"torn")
    model.forwards = 0
    cached_feature_table(model, sae, windows[:6], "h", top=4, batch=5, use_cache=False)
    assert model.forwards == 2
    big = Recorder(windows, N, lambda w, a: pytest.fail("too large to keep"))
    list(big.wrap([torch.zeros(N * T, MAX_BYTES // (N * T * 4) + 1)]))
