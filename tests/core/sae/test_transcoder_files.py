"""Transcoder sets on disk: both formats written by hand here (circuit-tracer's folder,
SAELens's per-layer folders) open with the encodings the formula gives; the lab's files read
by hand hold what those formats say; round trips; hostile folders refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open
from safetensors.torch import save_file

from tests.core.sae.transcoder_fixtures import hand_forward, random_set, tiny_handle
from tui_lab.core.errors import LabError
from tui_lab.core.sae.transcoder import TranscoderSet, open_transcoders, save_transcoders

X = torch.randn(5, 6, generator=torch.Generator().manual_seed(7))


def _same_maths(a: TranscoderSet, b: TranscoderSet) -> None:
    for ta, tb in zip(a, b, strict=True):
        assert (ta.architecture, ta.k, ta.has_skip) == (tb.architecture, tb.k, tb.has_skip)
        assert torch.allclose(ta.encode(X), tb.encode(X), atol=1e-6)
        assert torch.allclose(ta(X), tb(X), atol=1e-6)


@pytest.mark.parametrize(("architecture", "skip", "k"), [("relu", False, None), ("relu", True, None),
                                                          ("topk", True, 2), ("jumprelu", False, None),
                                                          ("jumprelu", True, None)])
def test_round_trip_circuit_tracer(tmp_path: Path, architecture: str, skip: bool, k: int | None) -> None:
    tset = random_set(6, 8, 2, architecture, skip, k)
    tset.step = 300
    save_transcoders(tset, tmp_path, "circuit-tracer")
    back = open_transcoders(tmp_path)
    _same_maths(tset, back)
    assert back.step == 300 and back.feature_input_hook == "ln2.hook_normalized"


@pytest.mark.parametrize(("architecture", "skip"), [("relu", False), ("relu", True), ("jumprelu", False),
                                                    ("jumprelu", True)])
def test_round_trip_saelens(tmp_path: Path, architecture: str, skip: bool) -> None:
    tset = random_set(6, 8, 2, architecture, skip)
    save_transcoders(tset, tmp_path, "saelens")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layer_0", "layer_1"]
    _same_maths(tset, open_transcoders(tmp_path))


def test_lab_files_hold_circuit_tracers_layout(tmp_path: Path) -> None:
    """Read back by hand: config.yaml's keys, each layer's tensor names and shapes, and the
    encodings circuit-tracer's formula gives from those raw tensors."""
    tset = random_set(6, 8, 2, "jumprelu", skip=True)
    save_transcoders(tset, tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert config["model_kind"] == "transcoder_set"
    # circuit-tracer's name for the lab's ln2.hook_normalized (the MLP's input, after the norm's affine)
    assert (config["feature_input_hook"], config["feature_output_hook"]) == ("mlp.hook_in", "hook_mlp_out")
    assert config["tfx_lab"]["hook_names"] == "circuit-tracer"
    for layer, tc in enumerate(tset):
        with safe_open(str(tmp_path / f"layer_{layer}.safetensors"), "pt") as f:
            raw = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
        shapes = {name: tuple(t.shape) for name, t in raw.items()}
        assert shapes == {"W_enc": (8, 6), "b_enc": (8,), "W_dec": (8, 6), "b_dec": (6,), "W_skip": (6, 6),
                          "activation_function.threshold": (8,)}
        z = torch.einsum("nd,fd->nf", X, raw["W_enc"]) + raw["b_enc"]
        f = z * (z > raw["activation_function.threshold"])
        y = f @ raw["W_dec"] + raw["b_dec"] + torch.einsum("nj,dj->nd", X, raw["W_skip"])
        assert torch.allclose(tc.encode(X), f, atol=1e-6) and torch.allclose(tc(X), y, atol=1e-5)


def test_a_circuit_tracer_folder_written_by_hand_opens(tmp_path: Path) -> None:
    """The folder circuit-tracer's cache writes (config.yaml by yaml.dump, layer files with
    its key names, float32 and a ReLU layer without threshold), built here from the format."""
    g = torch.Generator().manual_seed(2)
    weights = []
    for layer in range(2):
        w = {"W_enc": torch.randn(8, 6, generator=g), "W_dec": torch.randn(8, 6, generator=g),
             "b_enc": torch.randn(8, generator=g), "b_dec": torch.randn(6, generator=g)}
        save_file(w, str(tmp_path / f"layer_{layer}.safetensors"))
        weights.append(w)
    (tmp_path / "config.yaml").write_text(yaml.dump({
        "model_kind": "transcoder_set", "feature_input_hook": "hook_resid_mid",
        "feature_output_hook": "hook_mlp_out", "scan": "somewhere", "revision": None}))
    tset = open_transcoders(tmp_path)
    assert (tset.feature_input_hook, tset.scan, tset.n_layers) == ("hook_resid_mid", "somewhere", 2)
    for tc, w in zip(tset, weights, strict=True):
        for row, f_got, y_got in zip(X, tc.encode(X), tc(X), strict=True):
            f, y = hand_forward(row.tolist(), tc)
            z = [sum(a * b for a, b in zip(r, row.tolist(), strict=True)) + c
                 for r, c in zip(w["W_enc"].tolist(), w["b_enc"].tolist(), strict=True)]
            assert f == pytest.approx([max(v, 0.0) for v in z], abs=1e-5)
            assert f_got.tolist() == pytest.approx(f, abs=1e-5) and y_got.tolist() == pytest.approx(y, abs=1e-5)


def test_a_saelens_folder_written_by_hand_opens(tmp_path: Path) -> None:
    """SAELens's layout: W_enc (d_in, d_sae), W_skip (d_out, d_in), a JumpReLU threshold, a
    negative one included: SAELens's ReLU(z)·[z > θ] never passes a negative z."""
    g = torch.Generator().manual_seed(4)
    folder = tmp_path / "blocks.0.mlp.hook_in"
    folder.mkdir()
    w = {"W_enc": torch.randn(6, 8, generator=g), "W_dec": torch.randn(8, 6, generator=g),
         "b_enc": torch.randn(8, generator=g), "b_dec": torch.randn(6, generator=g),
         "W_skip": torch.randn(6, 6, generator=g), "threshold": torch.linspace(-1.0, 1.0, 8)}
    save_file(w, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({
        "architecture": "jumprelu_skip_transcoder", "d_in": 6, "d_sae": 8, "d_out": 6, "dtype": "float32",
        "apply_b_dec_to_input": False, "normalize_activations": "none",
        "metadata": {"hook_name": "blocks.0.mlp.hook_in", "hook_name_out": "blocks.0.hook_mlp_out"}}))
    tset = open_transcoders(tmp_path)
    assert (tset.feature_input_hook, tset.feature_output_hook) == ("ln2.hook_normalized", "hook_mlp_out")
    tc = tset[0]
    z = X @ w["W_enc"] + w["b_enc"]
    f = z.relu() * (z > w["threshold"])
    y = f @ w["W_dec"] + w["b_dec"] + X @ w["W_skip"].T
    assert torch.allclose(tc.encode(X), f, atol=1e-6) and torch.allclose(tc(X), y, atol=1e-5)


# -- hostile folders: one line each, nothing written -------------------------------------------


def _refused(folder: Path, model: object | None, match: str) -> None:
    before = sorted((p.name, p.stat().st_size) for p in folder.rglob("*"))
    with pytest.raises(LabError, match=match) as info:
        open_transcoders(folder, model)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert sorted((p.name, p.stat().st_size) for p in folder.rglob("*")) == before


@pytest.fixture(scope="module")
def handle():  # type: ignore[no-untyped-def]
    return tiny_handle(d_model=16, layers=2)


def test_a_set_that_fits_opens_against_the_model(tmp_path: Path, handle) -> None:  # type: ignore[no-untyped-def]
    save_transcoders(random_set(16, 8, 2), tmp_path)
    assert open_transcoders(tmp_path, handle).n_layers == 2


def test_another_models_sets_are_refused(tmp_path: Path, handle) -> None:  # type: ignore[no-untyped-def]
    save_transcoders(random_set(12, 8, 2), tmp_path / "width")
    _refused(tmp_path / "width", handle, "d_model=12, the model has d_model=16")
    save_transcoders(random_set(16, 8, 3), tmp_path / "depth")
    _refused(tmp_path / "depth", handle, "3 transcoder layers, the model has 2 layers")


def test_hooks_the_model_lacks_are_refused(tmp_path: Path) -> None:
    """TransformerLens's hook_mlp_in (the norm's input) is the lab's hook_resid_mid, which an
    attention-only model has not."""
    save_transcoders(random_set(16, 8, 2), tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    config["feature_input_hook"] = "hook_mlp_in"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    _refused(tmp_path, tiny_handle(d_model=16, layers=2, d_ff=0), "'blocks.0.hook_resid_mid', which the model lacks")


def test_a_truncated_layer_file_is_refused(tmp_path: Path) -> None:
    save_transcoders(random_set(16, 8, 2), tmp_path)
    path = tmp_path / "layer_1.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _refused(tmp_path, None, "layer_1.safetensors: not a readable safetensors file, truncated")


@pytest.mark.parametrize(("edit", "match"), [
    ({"model_kind": "cross_layer_transcoder"}, "the lab reads transcoder_set"),
    ({"feature_output_hook": None}, "no feature_output_hook"),
    ({"transcoders": ["hf://org/repo/layer_0.safetensors"]}, "nothing is downloaded"),
])
def test_bad_configs_are_refused(tmp_path: Path, edit: dict[str, object], match: str) -> None:
    save_transcoders(random_set(6, 8, 1), tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    _refused(tmp_path, None, match)


def test_bad_layers_are_refused(tmp_path: Path) -> None:
    save_transcoders(random_set(6, 8, 3), tmp_path)
    (tmp_path / "layer_1.safetensors").unlink()
    _refused(tmp_path, None, "no layer_1.safetensors")
    bad = {"W_enc": torch.full((8, 6), float("nan")), "W_dec": torch.zeros(8, 6), "b_enc": torch.zeros(8),
           "b_dec": torch.zeros(6)}
    save_file(bad, str(tmp_path / "layer_1.safetensors"))
    _refused(tmp_path, None, "W_enc is not all finite")
    save_file({**bad, "W_enc": torch.zeros(8, 5)}, str(tmp_path / "layer_1.safetensors"))
    _refused(tmp_path, None, r"W_dec has shape \(8, 6\), expected \(8, 5\)")


def test_topk_has_no_saelens_form_and_nothing_is_written(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="SAELens has no topk transcoder"):
        save_transcoders(random_set(6, 8, 2, "topk", k=2), tmp_path / "out", "saelens")
    assert not (tmp_path / "out").exists()


def test_not_a_set_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    _refused(tmp_path, None, "not a transcoder set")
    _refused(tmp_path / "missing", None, "no such folder")
