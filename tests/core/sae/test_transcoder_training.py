"""Transcoder metrics against a replacement made by hand, and training that learns.

The hand replacement swaps each block's feed-forward module for one that calls the
transcoder (or returns zeros) and runs the model's plain forward: no hook is involved,
so the hooks the metrics use are checked by something that does not share them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.core.sae.transcoder_fixtures import random_set, tiny_handle
from tui_lab.core import open_model
from tui_lab.core.sae.transcoder import Transcoder, open_transcoders
from tui_lab.core.sae.transcoder_data import IGNORE, Windows
from tui_lab.core.sae.transcoder_metrics import evaluate_transcoders
from tui_lab.core.verbs.transcoder_train import Request, run

RUN = Path(__file__).resolve().parents[2] / "data" / "induction-mlp-run"


class _Swap(nn.Module):
    """A feed-forward stand-in: the transcoder of its input, or zeros."""

    def __init__(self, tc: Transcoder | None) -> None:
        super().__init__()
        self.tc = tc

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(h) if self.tc is None else self.tc(h)


def _hand_ce(handle, ids: torch.Tensor, targets: torch.Tensor, swaps: dict[int, Transcoder | None]) -> float:  # type: ignore[no-untyped-def]
    blocks = handle.model.decoder.layers
    kept = {i: blocks[i].ff for i in swaps}
    try:
        for i, tc in swaps.items():
            blocks[i].ff = _Swap(tc)
        with torch.no_grad():
            logits = handle.run_with_hooks(ids, hooks=[])
    finally:
        for i, ff in kept.items():
            blocks[i].ff = ff
    scored = targets != IGNORE
    return float(F.cross_entropy(logits[scored], targets[scored]))


def test_ce_recovered_matches_a_replacement_by_hand() -> None:
    handle = tiny_handle(d_model=16, layers=2)
    tset = random_set(16, 24, 2, "relu", skip=True, seed=1)
    for tc in tset:  # keep the random transcoders' outputs the size of an MLP's
        with torch.no_grad():
            tc.W_dec.mul_(0.2)
            tc.W_skip.mul_(0.2)  # type: ignore[union-attr]
    batch = handle.task.batch(random.Random(3), 6)  # type: ignore[attr-defined]
    windows = Windows(batch.tgt_in, batch.tgt_out)
    got = evaluate_transcoders(handle, tset, windows, batch=4)  # two forward batches, pooled
    clean = _hand_ce(handle, windows.ids, windows.targets, {})
    every_zero = _hand_ce(handle, windows.ids, windows.targets, {0: None, 1: None})
    every_tc = _hand_ce(handle, windows.ids, windows.targets, {0: tset[0], 1: tset[1]})
    assert got.whole.ce_clean == pytest.approx(clean, rel=1e-5)
    assert got.whole.ce_zero_ablated == pytest.approx(every_zero, rel=1e-5)
    assert got.whole.ce_replaced == pytest.approx(every_tc, rel=1e-5)
    assert got.whole.ce_loss_recovered == pytest.approx((every_zero - every_tc) / (every_zero - clean), rel=1e-4)
    one = _hand_ce(handle, windows.ids, windows.targets, {1: tset[1]})
    assert got.layers[1].ce_replaced == pytest.approx(one, rel=1e-5)
    assert got.layers[0].ce_zero_ablated == pytest.approx(
        _hand_ce(handle, windows.ids, windows.targets, {0: None}), rel=1e-5)


def test_explained_variance_and_l0_by_hand() -> None:
    handle = tiny_handle(d_model=16, layers=2)
    tset = random_set(16, 24, 2, "topk", k=5, seed=2)
    batch = handle.task.batch(random.Random(4), 3)  # type: ignore[attr-defined]
    got = evaluate_transcoders(handle, tset, Windows(batch.tgt_in, batch.tgt_out))
    with torch.no_grad():
        _, cache = handle.run_with_cache(batch.tgt_in, names=["blocks.1.ln2.hook_normalized", "blocks.1.hook_mlp_out"])
        x = cache["blocks.1.ln2.hook_normalized"].reshape(-1, 16)
        y = cache["blocks.1.hook_mlp_out"].reshape(-1, 16)
        err = (y - tset[1](x)).pow(2).sum()
    var = (y - y.mean(dim=0)).pow(2).sum()
    assert got.layers[1].explained_variance == pytest.approx(float(1 - err / var), rel=1e-4)
    assert got.layers[1].l0 == pytest.approx(5.0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """TopK transcoders with a skip on the trained induction-mlp run: 30,000 tokens (~5 s)."""
    out = tmp_path_factory.mktemp("tc") / "set"
    model = open_model(RUN)
    return run(Request(str(out), architecture="topk", skip=True, features=256, tokens=30_000, batch=512,
                       model_name="induction-mlp-run"), model), out, model


def test_training_learns_the_mlps(trained) -> None:  # type: ignore[no-untyped-def]
    result, out, _model = trained
    whole = result.sets[0].metrics.whole
    # 30,000 tokens: ~0.7 on a quiet machine, 0.8 at 100,000; chance is 0 (an honest, loose floor)
    assert whole.explained_variance > 0.5
    assert whole.ce_loss_recovered > 0.6
    assert whole.l0 == pytest.approx(2 * 16, abs=1)  # k per layer, two layers
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "layer_0.safetensors", "layer_1.safetensors",
                                                      "transcoder_metrics.json"]


def test_renewing_one_layer_keeps_the_other(trained) -> None:  # type: ignore[no-untyped-def]
    _result, out, model = trained
    before = open_transcoders(out, model)
    run(Request(str(out), layers=(1,), architecture="topk", skip=True, features=256, tokens=2_048, batch=512,
                seed=5), model)
    after = open_transcoders(out, model)
    assert torch.equal(before[0].W_enc, after[0].W_enc)
    assert not torch.equal(before[1].W_enc, after[1].W_enc)


def test_history_writes_one_set_per_step(tmp_path: Path) -> None:
    model = open_model(RUN)
    result = run(Request(str(tmp_path), architecture="relu", features=64, tokens=1_024, batch=256,
                         history=(100, 1200), eval_tokens=256), model,
                 open_at=lambda step: open_model(RUN, at_step=step))
    assert [s.step for s in result.sets] == [100, 1200]
    assert open_transcoders(tmp_path / "step_100", model).step == 100
    assert [h["at_step"] for h in result.to_json()["history"]] == [100, 1200]  # type: ignore[index]
