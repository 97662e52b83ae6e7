"""The crosscoder's maths against independent references, its norms and classes worked by
hand, and its folder reopening exactly (damaged ones refused in one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tui_lab.core.sae.crosscoder import Crosscoder, CrosscoderConfig, SourceSpec
from tui_lab.core.sae.crosscoder_folder import WEIGHTS_FILE, load_crosscoder, save_crosscoder
from tui_lab.core.sae.crosscoder_norms import classify, counts, histogram, relative_norms
from tui_lab.core.sae.crosscoder_training import (
    CrosscoderSettings,
    fit_scale,
    losses,
    train_crosscoder,
)
from tui_lab.core.sae.errors import SAEError

N, D, F = 2, 6, 10
SOURCES = (SourceSpec("run", 10), SourceSpec("run", 20))


def _cc(seed: int = 0) -> Crosscoder:
    cc = Crosscoder(CrosscoderConfig(D, F, "blocks.0.hook_resid_post", SOURCES), seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # biases and scales away from their neutral start
        cc.b_enc.copy_(torch.randn(F, generator=g) * 0.1)
        cc.b_dec.copy_(torch.randn(N, D, generator=g) * 0.1)
        cc.scale.copy_(torch.tensor([0.5, 2.0]))
    return cc


def test_encode_and_decode_equal_an_sae_on_the_concatenated_sources() -> None:
    # the acausal crosscoder is a ReLU SAE over [x_A·s_A, x_B·s_B] with W_enc stacked by source
    cc = _cc()
    x = torch.randn(5, N, D)
    xs = torch.cat([x[:, 0] * 0.5, x[:, 1] * 2.0], dim=-1)  # (5, n·d)
    w_enc = torch.cat([cc.W_enc[0], cc.W_enc[1]], dim=0)  # (n·d, F)
    f_ref = torch.relu(xs @ w_enc + cc.b_enc)
    w_dec = torch.cat([cc.W_dec[:, 0], cc.W_dec[:, 1]], dim=-1)  # (F, n·d)
    rec = f_ref @ w_dec + torch.cat([cc.b_dec[0], cc.b_dec[1]])
    rec_ref = torch.stack([rec[:, :D] / 0.5, rec[:, D:] / 2.0], dim=1)
    got_rec, got_f = cc(x)
    torch.testing.assert_close(got_f, f_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_rec, rec_ref, rtol=1e-5, atol=1e-5)


def test_the_loss_is_reconstruction_plus_l1_weighted_by_the_sum_of_decoder_norms() -> None:
    cc = _cc()
    xs = torch.randn(4, N, D)
    out = losses(cc, xs, l1=0.7)
    total = 0.0
    for row in range(4):  # one token at a time, by the formula
        f = torch.relu(sum(xs[row, s] @ cc.W_enc[s] for s in range(N)) + cc.b_enc)
        err = sum(((f @ cc.W_dec[:, s] + cc.b_dec[s] - xs[row, s]) ** 2).sum() for s in range(N))
        penalty = sum(f[j] * sum(cc.W_dec[j, s].norm() for s in range(N)) for j in range(F))
        total = total + err + 0.7 * penalty
    torch.testing.assert_close(out.total, total / 4, rtol=1e-5, atol=1e-6)


def test_the_scale_gives_each_source_mean_squared_norm_d() -> None:
    cc = _cc()
    rows = torch.randn(300, N, D) * torch.tensor([3.0, 0.1])[:, None]
    fit_scale(cc, rows)
    per_source = cc.scaled(rows).pow(2).sum(-1).mean(0)
    torch.testing.assert_close(per_source, torch.full((N,), float(D)), rtol=1e-4, atol=1e-4)


def test_relative_norms_and_classes_worked_by_hand() -> None:
    norms = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 1.0], [0.05, 0.95], [1.0, 0.1], [0.0, 0.0]])
    rel = relative_norms(norms)
    expected = [0.0, 1.0, 0.5, 0.25, 0.95, 0.1 / 1.1, 0.5]
    torch.testing.assert_close(rel, torch.tensor(expected), rtol=1e-6, atol=1e-6)
    alive = torch.tensor([True] * 6 + [False])
    assert classify(rel, alive) == ["a_only", "b_only", "shared", "mixed", "b_only", "a_only", "dead"]
    assert counts(classify(rel, alive)) == {"b_only": 2, "a_only": 2, "shared": 1, "mixed": 1, "dead": 1}
    hist = histogram(rel, alive, bins=4)  # live: 0, 1, .5, .25, .95, .09 in [0,.25) [.25,.5) [.5,.75) [.75,1]
    assert hist.counts == [2, 1, 1, 2]


def test_training_lowers_the_loss_and_the_folder_reopens_exactly(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(3)
    shared = torch.randn(8, D, generator=g)
    coeff = torch.relu(torch.randn(2000, 8, generator=g))
    rows = torch.stack([coeff @ shared, coeff @ shared * 2], dim=1)  # (2000, 2, D)
    cc = _cc()
    settings = CrosscoderSettings(steps=150, batch_size=64, lr=3e-3, l1_coefficient=0.5, log_every=50)
    seen = []
    end = train_crosscoder(cc, rows, settings, seen.append)
    assert end.step == 150 and end.reason == "done"
    assert seen[-1].explained_variance > 0.5
    save_crosscoder(cc, end.fired, tmp_path / "xc", {"step": 150}, [e.record() for e in seen])
    back, fired = load_crosscoder(tmp_path / "xc")
    for name in ("W_enc", "b_enc", "W_dec", "b_dec", "scale"):
        assert torch.equal(getattr(back, name), getattr(cc, name)), name
    assert torch.equal(fired, end.fired)
    assert back.cfg == cc.cfg
    assert torch.equal(back.encode(rows[:10]), cc.encode(rows[:10]))


def test_a_damaged_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    cc = _cc()
    folder = save_crosscoder(cc, torch.ones(F, dtype=torch.long), tmp_path / "xc", {}, [])
    weights = folder / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(SAEError, match="truncated") as info:
        load_crosscoder(folder)
    assert "\n" not in str(info.value)
    cfg = json.loads((folder / "cfg.json").read_text())
    cfg["metadata"]["sources"] = cfg["metadata"]["sources"][:1]
    (folder / "cfg.json").write_text(json.dumps(cfg))
    with pytest.raises(SAEError, match="two or more sources"):
        load_crosscoder(folder)
    with pytest.raises(SAEError, match="no such folder"):
        load_crosscoder(tmp_path / "absent")


def test_one_source_is_refused() -> None:
    with pytest.raises(SAEError, match="two or more sources"):
        CrosscoderConfig(D, F, "h", SOURCES[:1])
    cc = _cc()
    with pytest.raises(SAEError, match=r"\(\.\.\., 2, 6\)"):
        cc.encode(torch.randn(3, 6))
