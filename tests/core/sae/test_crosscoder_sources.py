"""Crosscoders on real (tiny) models: same weights give no one-sided feature, a planted
direction gives one, and mismatched sources are refused in one line with nothing written."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.errors import LabError
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.crosscoder_folder import load_crosscoder
from tui_lab.core.sae.crosscoder_norms import relative_norms
from tui_lab.core.tasks import make_task
from tui_lab.core.verbs.crosscoder_features import feature_rows
from tui_lab.core.verbs.crosscoder_train import Request, run

HOOK = "blocks.0.hook_mlp_out"
NEURON = 5


def _hand(seed: int = 0, **model: object) -> ModelInHand:
    config = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0, "n_decoder_layers": 1,
                                "d_model": 32, "d_ff": 64, **model},
                         task={"name": "copy", "min_len": 4, "max_len": 10})
    task = make_task(config.task)
    torch.manual_seed(seed)
    net = build_model(config.model, len(task.vocab))
    with torch.no_grad():  # weights of a trained model's size, not an initialiser's
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return ModelInHand(config, task, net, 0, torch.device("cpu"), [])


def _request(out: Path, **kw: object) -> Request:
    numbers: dict[str, object] = {"d_sae": 64, "l1": 2.0, "train_steps": 300, "batch": 128, "lr": 3e-3,
                                  "tokens": 4000, "hook": HOOK}
    return Request(str(out), models=("A", "B"), **{**numbers, **kw})  # type: ignore[arg-type]


def _mlp_out_weight(hand: ModelInHand) -> torch.Tensor:
    return hand.model.decoder.layers[0].ff.lin2.weight  # type: ignore[no-any-return, index, union-attr]


def _planted_pair() -> tuple[ModelInHand, ModelInHand, torch.Tensor]:
    """A (neuron NEURON's output zeroed) and B = A + that neuron's activation times 8·v."""
    a = _hand()
    w = _mlp_out_weight(a)
    with torch.no_grad():
        w[:, NEURON] = 0.0
    b = ModelInHand(a.config, a.task, copy.deepcopy(a.model), 0, torch.device("cpu"), [])
    v = torch.randn(w.shape[0], generator=torch.Generator().manual_seed(7))
    v = v / v.norm()
    with torch.no_grad():
        _mlp_out_weight(b)[:, NEURON] = 8.0 * v
    return a, b, v


def test_the_hook_path_is_the_mlp_output() -> None:
    a, b, v = _planted_pair()
    ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    out_a = a.run_with_cache(ids, names=[HOOK])[1][HOOK]
    out_b = b.run_with_cache(ids, names=[HOOK])[1][HOOK]
    diff = (out_b - out_a)[0]  # every row along v
    assert diff.abs().max() > 0.1
    cos = (diff @ v).abs() / diff.norm(dim=-1).clamp_min(1e-9)
    assert bool((cos[diff.norm(dim=-1) > 1e-4] > 0.999).all())


def test_same_weights_at_both_sources_give_no_one_sided_feature(tmp_path: Path) -> None:
    a = _hand()
    result = run(_request(tmp_path / "xc"), [a, a])
    cc, fired = load_crosscoder(tmp_path / "xc")
    rel = relative_norms(cc.decoder_norms())[fired > 0]
    assert rel.numel() > 10
    assert result.summary["counts"]["b_only"] == 0 and result.summary["counts"]["a_only"] == 0  # type: ignore[index]
    assert float((rel - 0.5).abs().max()) < 0.2


def test_a_planted_direction_is_a_feature_new_at_b(tmp_path: Path) -> None:
    a, b, v = _planted_pair()
    run(_request(tmp_path / "xc"), [a, b])
    cc, fired = load_crosscoder(tmp_path / "xc")
    rel = relative_norms(cc.decoder_norms())
    dec_b = cc.W_dec.detach()[:, 1] / cc.scale[1]  # decoder rows at B in the model's units
    cos = (dec_b @ v) / dec_b.norm(dim=-1).clamp_min(1e-12)
    best = int(cos.abs().argmax())
    assert abs(float(cos[best])) > 0.9
    assert float(rel[best]) > 0.9 and int(fired[best]) > 0
    assert best in [r["index"] for r in feature_rows(cc, fired)["b_only"]]  # listed as new at B


@pytest.mark.parametrize("what", ["width", "hook", "one"])
def test_mismatched_sources_are_refused_in_one_line_and_nothing_is_written(tmp_path: Path, what: str) -> None:
    out = tmp_path / "xc"
    a = _hand()
    if what == "one":
        with pytest.raises(LabError, match="two or more sources") as info:
            Request(str(out), models=("A",))
    else:
        other = _hand(d_model=48) if what == "width" else _hand(n_decoder_layers=2)
        hook = HOOK if what == "width" else "blocks.1.hook_mlp_out"
        first, second = (a, other) if what == "width" else (other, a)
        match = "different d_model" if what == "width" else "no hook blocks.1.hook_mlp_out"
        with pytest.raises(LabError, match=match) as info:
            run(_request(out, hook=hook), [first, second])
    assert "\n" not in str(info.value)
    assert not out.exists()
