"""A transcoder set's hook names across tools: what the lab writes in circuit-tracer's
config.yaml and SAELens's cfg.json, how each name in those files opens in the lab, the
names refused in one line, and (against torch.nn.functional.layer_norm) that the lab's
``ln2.hook_normalized`` is the norm's output after its weight and bias, the MLP's input
that circuit-tracer and SAELens call ``mlp.hook_in``, not TransformerLens's
``ln2.hook_normalized`` before them. ``test_transcoder_interop.py`` runs circuit-tracer
itself on a model with a set the lab wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

from tests.core.sae.transcoder_fixtures import random_set, tiny_handle
from tui_lab.core.errors import LabError
from tui_lab.core.sae.transcoder import open_transcoders, save_transcoders


def _ct_folder(folder: Path, input_hook: str, output_hook: str = "hook_mlp_out", lab: dict | None = None) -> Path:
    """A circuit-tracer folder as its cache writes one (no tfx_lab block unless ``lab``)."""
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    for layer in range(2):
        save_file({"W_enc": torch.randn(8, 16, generator=g), "W_dec": torch.randn(8, 16, generator=g),
                   "b_enc": torch.randn(8, generator=g), "b_dec": torch.randn(16, generator=g)},
                  str(folder / f"layer_{layer}.safetensors"))
    config: dict[str, object] = {"model_kind": "transcoder_set", "feature_input_hook": input_hook,
                                 "feature_output_hook": output_hook, "scan": "x"}
    if lab is not None:
        config["tfx_lab"] = lab
    (folder / "config.yaml").write_text(yaml.dump(config))
    return folder


def _saelens_folder(folder: Path, hook_name: str, hook_name_out: str = "hook_mlp_out") -> Path:
    g = torch.Generator().manual_seed(2)
    for layer in range(2):
        sub = folder / f"layer_{layer}"
        sub.mkdir(parents=True)
        save_file({"W_enc": torch.randn(16, 8, generator=g), "W_dec": torch.randn(8, 16, generator=g),
                   "b_enc": torch.randn(8, generator=g), "b_dec": torch.randn(16, generator=g)},
                  str(sub / "sae_weights.safetensors"))
        (sub / "cfg.json").write_text(json.dumps({
            "architecture": "transcoder", "d_in": 16, "d_sae": 8, "d_out": 16, "apply_b_dec_to_input": False,
            "metadata": {"hook_name": f"blocks.{layer}.{hook_name}",
                         "hook_name_out": f"blocks.{layer}.{hook_name_out}"}}))
    return folder


def _refused(folder: Path, match: str, model: object | None = None) -> None:
    before = sorted((p.name, p.stat().st_size) for p in folder.rglob("*"))
    with pytest.raises(LabError, match=match) as info:
        open_transcoders(folder, model)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert sorted((p.name, p.stat().st_size) for p in folder.rglob("*")) == before


def test_the_written_names_are_the_ones_circuit_tracer_and_saelens_resolve(tmp_path: Path) -> None:
    tset = random_set(16, 8, 2)
    save_transcoders(tset, tmp_path / "ct")
    config = yaml.safe_load((tmp_path / "ct" / "config.yaml").read_text())
    assert (config["feature_input_hook"], config["feature_output_hook"]) == ("mlp.hook_in", "hook_mlp_out")
    save_transcoders(tset, tmp_path / "sl", "saelens")
    meta = json.loads((tmp_path / "sl" / "layer_1" / "cfg.json").read_text())["metadata"]
    assert (meta["hook_name"], meta["hook_name_out"]) == ("blocks.1.mlp.hook_in", "blocks.1.hook_mlp_out")
    assert meta["model_from_pretrained_kwargs"] == {"fold_ln": False}  # mlp.hook_in is the MLP's input only so
    for folder in (tmp_path / "ct", tmp_path / "sl"):  # and the lab reads its own names back
        back = open_transcoders(folder, tiny_handle(d_model=16, layers=2))
        assert (back.feature_input_hook, back.feature_output_hook) == ("ln2.hook_normalized", "hook_mlp_out")
        assert (back.input_hook(1), back.output_hook(1)) == ("blocks.1.ln2.hook_normalized", "blocks.1.hook_mlp_out")


def test_a_residual_input_is_written_and_read_as_it_is(tmp_path: Path) -> None:
    tset = random_set(16, 8, 2)
    tset.feature_input_hook = "hook_resid_mid"
    save_transcoders(tset, tmp_path)
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["feature_input_hook"] == "hook_resid_mid"
    assert open_transcoders(tmp_path).feature_input_hook == "hook_resid_mid"


@pytest.mark.parametrize(("file_in", "file_out", "lab_in", "lab_out"), [
    ("mlp.hook_in", "mlp.hook_out", "ln2.hook_normalized", "hook_mlp_out"),  # circuit-tracer's gpt2 sets
    ("mlp.hook_in", "hook_mlp_out", "ln2.hook_normalized", "hook_mlp_out"),  # SAELens's circuit-tracer ones
    ("hook_resid_mid", "hook_mlp_out", "hook_resid_mid", "hook_mlp_out"),
    ("hook_mlp_in", "hook_mlp_out", "hook_resid_mid", "hook_mlp_out"),  # TransformerLens's copy of the norm's input
])
def test_file_names_open_as_the_lab_hooks_with_the_same_activation(
        tmp_path: Path, file_in: str, file_out: str, lab_in: str, lab_out: str) -> None:
    for folder in (_ct_folder(tmp_path / "ct", file_in, file_out), _saelens_folder(tmp_path / "sl", file_in, file_out)):
        tset = open_transcoders(folder, tiny_handle(d_model=16, layers=2))
        assert (tset.feature_input_hook, tset.feature_output_hook) == (lab_in, lab_out)


@pytest.mark.parametrize(("name", "match"), [
    ("ln2.hook_normalized", "before its weight and bias; the lab has no hook there"),
    ("ln1.hook_normalized", "no exact match among the lab's hooks"),
    ("mlp.hook_post", "no exact match among the lab's hooks"),
])
def test_names_without_an_exact_lab_hook_are_refused(tmp_path: Path, name: str, match: str) -> None:
    _refused(_ct_folder(tmp_path / "ct", name), match)
    _refused(_saelens_folder(tmp_path / "sl", name), match)
    _refused(_ct_folder(tmp_path / "out", "mlp.hook_in", name), match)


def test_a_set_the_lab_wrote_before_the_mapping_keeps_its_names(tmp_path: Path) -> None:
    """Its tfx_lab block has no hook_names: ln2.hook_normalized there is the lab's own."""
    folder = _ct_folder(tmp_path, "ln2.hook_normalized", lab={"architecture": "relu", "d_model": 16, "n_layers": 2})
    assert open_transcoders(folder).feature_input_hook == "ln2.hook_normalized"


def test_mlp_hook_out_is_refused_where_a_norm_follows_the_mlp(tmp_path: Path) -> None:
    folder = _ct_folder(tmp_path, "mlp.hook_in", "mlp.hook_out")
    assert open_transcoders(folder, tiny_handle(d_model=16, layers=2)).feature_output_hook == "hook_mlp_out"
    _refused(folder, "names mlp.hook_out, the MLP's output before the model's post-MLP norm",
             tiny_handle(d_model=16, layers=2, output_norms=True))


def test_the_labs_ln2_hook_is_the_mlps_input_after_the_norms_affine() -> None:
    """What the mapping rests on, from the norm's definition: the lab's ln2.hook_normalized is
    layer_norm(resid_mid) · w + b (what the MLP reads), not TransformerLens's (x - μ)/σ."""
    handle = tiny_handle(d_model=16, layers=2)
    block = handle.model.decoder.layers[0]
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        block.norm2.weight.copy_(torch.rand(16, generator=g) + 0.5)
        block.norm2.bias.copy_(torch.randn(16, generator=g))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    _logits, cache = handle.run_with_cache(ids, names=["blocks.0.hook_resid_mid", "blocks.0.ln2.hook_normalized",
                                                       "blocks.0.mlp.hook_pre"])
    x = cache["blocks.0.hook_resid_mid"]
    centred = x - x.mean(-1, keepdim=True)
    tl_normalized = centred / (centred.pow(2).mean(-1, keepdim=True) + block.norm2.eps).sqrt()
    after = tl_normalized * block.norm2.weight + block.norm2.bias
    torch.testing.assert_close(cache["blocks.0.ln2.hook_normalized"], after, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache["blocks.0.mlp.hook_pre"], block.ff.lin1(after), rtol=1e-5, atol=1e-5)
    assert float((cache["blocks.0.ln2.hook_normalized"] - tl_normalized).abs().max()) > 0.1
