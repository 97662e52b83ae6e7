"""Transcoder sets both ways with circuit-tracer 0.5.0 and SAELens 6.54.12 themselves.

Each runs in a venv of its own (circuit-tracer pins older transformers and
TransformerLens; neither may enter the project's dependencies), made once with

    python3 -m venv /tmp/ref-ct && /tmp/ref-ct/bin/pip install torch==2.13.0 circuit-tracer==0.5.0
    python3 -m venv /tmp/ref-saelens && /tmp/ref-saelens/bin/pip install torch==2.13.0 sae-lens==6.54.12

and called through ``transcoder_reference.py``; a test skips, saying so, when its venv is
absent (``test_transcoder_files.py`` keeps the layouts guarded by hand then). Each
subprocess imports its library (about 20 s on a loaded 2-core machine): marked slow.

End to end (``transcoder_ct_side.py``): circuit-tracer runs a GPT-2-shaped model
(``save_pretrained`` of random weights) with a set the lab wrote, resolving the hooks
config.yaml names, and its feature activations on a prompt are the lab's (1e-4); the
name the lab used to write there, TransformerLens's ``ln2.hook_normalized``, reads
something else (``test_transcoder_hooks.py`` guards the names without the venv).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.core.sae.transcoder_fixtures import random_set
from tui_lab.core.sae.transcoder import TranscoderSet, open_transcoders, save_transcoders

HERE = Path(__file__).resolve().parent
VENVS = {"ct": Path("/tmp/ref-ct/bin/python"), "saelens": Path("/tmp/ref-saelens/bin/python")}
D_MODEL = 6

pytestmark = pytest.mark.slow


def _reference(kind: str, action: str, folder: Path, x: torch.Tensor, tmp: Path) -> dict[str, torch.Tensor]:
    python = VENVS[kind]
    if not python.exists():
        pytest.skip(f"{python} absent: make the reference venv (see this module's docstring)")
    save_file({"x": x}, str(tmp / "x.safetensors"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run([str(python), str(HERE / "transcoder_reference.py"), action, str(folder),
                           str(tmp / "x.safetensors"), str(tmp / "ref.safetensors")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return load_file(str(tmp / "ref.safetensors"))


def _agree(tset: TranscoderSet, x: torch.Tensor, ref: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for i, tc in enumerate(tset):
            assert (tc.encode(x) != 0).any()  # something fires: the comparison means something
            torch.testing.assert_close(tc.encode(x), ref[f"acts_{i}"], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(tc(x), ref[f"out_{i}"], rtol=1e-5, atol=1e-5)


X = torch.randn(16, D_MODEL, generator=torch.Generator().manual_seed(5))


def test_circuit_tracer_opens_the_labs_set(tmp_path: Path) -> None:
    tset = random_set(D_MODEL, 12, 2, "jumprelu", skip=True, seed=8)
    save_transcoders(tset, tmp_path / "set", "circuit-tracer")
    _agree(tset, X, _reference("ct", "ct-read", tmp_path / "set", X, tmp_path))


def test_the_lab_opens_circuit_tracers_set(tmp_path: Path) -> None:
    ref = _reference("ct", "ct-write", tmp_path / "set", X, tmp_path)
    tset = open_transcoders(tmp_path / "set")
    assert (tset.n_layers, tset.feature_input_hook, tset[0].architecture, tset[0].has_skip) == (
        2, "ln2.hook_normalized", "jumprelu", True)
    _agree(tset, X, ref)


PROMPT = [0, 17, 42, 99, 17, 42, 5, 250]  # starts with the start token, as circuit-tracer wants


def _gpt2_folder(folder: Path) -> None:
    """A random GPT-2-shaped folder whose second norms have weights and biases far from
    (1, 0), so the activation before them differs plainly from the one after."""
    from bench.hf_factory import hf_model, save_tokenizer

    model = hf_model("gpt2", seed=3)
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for block in model.transformer.h:
            block.ln_2.weight.copy_(torch.rand(block.ln_2.weight.shape, generator=g) + 0.5)
            block.ln_2.bias.copy_(torch.randn(block.ln_2.bias.shape, generator=g) * 0.3)
    model.save_pretrained(folder)
    save_tokenizer(folder, model.config.vocab_size)


def test_circuit_tracer_runs_the_labs_set_on_a_model(tmp_path: Path) -> None:
    if not VENVS["ct"].exists():
        pytest.skip(f"{VENVS['ct']} absent: make the reference venv (see this module's docstring)")
    from tui_lab.core.opening.model_in_hand import open_model

    _gpt2_folder(tmp_path / "model")
    model = open_model(tmp_path / "model")
    d_model = model.config.model.d_model
    tset = random_set(d_model, 24, 2, "relu", skip=True, seed=6)
    with torch.no_grad():
        for tc in tset:
            tc.b_enc.sub_(0.5)  # some features off, so a wrong input shows in which fire
    save_transcoders(tset, tmp_path / "set", "circuit-tracer")
    done = subprocess.run([str(VENVS["ct"]), "-I", str(HERE / "transcoder_ct_side.py"), str(tmp_path / "model"),
                           str(tmp_path / "set"), ",".join(map(str, PROMPT)), str(tmp_path / "ct.safetensors")],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ref = load_file(str(tmp_path / "ct.safetensors"))
    _logits, cache = model.run_with_cache(torch.tensor([PROMPT]), names=[tset.input_hook(i) for i in range(2)])
    with torch.no_grad():
        ours = torch.stack([tc.encode(cache[tset.input_hook(tc.layer)][0]) for tc in tset])
    ours[:, 0] = 0.0  # circuit-tracer never activates the start token
    assert (ours != 0).any() and (ours == 0).any()
    torch.testing.assert_close(ref["acts"], ours, rtol=0, atol=1e-4)
    theirs_ln2 = ref["acts_tl_ln2"]
    theirs_ln2[:, 0] = 0.0
    assert float((theirs_ln2 - ours).abs().max()) > 1e-2  # the old name read another activation


def test_saelens_opens_the_labs_set(tmp_path: Path) -> None:
    tset = random_set(D_MODEL, 12, 2, "jumprelu", skip=True, seed=9)
    save_transcoders(tset, tmp_path / "set", "saelens")
    _agree(tset, X, _reference("saelens", "saelens-read", tmp_path / "set", X, tmp_path))


def test_the_lab_opens_saelens_transcoders(tmp_path: Path) -> None:
    ref = _reference("saelens", "saelens-write", tmp_path / "set", X, tmp_path)
    tset = open_transcoders(tmp_path / "set")
    assert (tset.n_layers, tset.feature_output_hook, tset[1].architecture) == (2, "hook_mlp_out", "jumprelu")
    _agree(tset, X, ref)
