"""The lab's attribution graph against circuit-tracer 0.5's own, on the same random GPT-2-shaped
model (saved with ``save_pretrained``), transcoder set (written by the lab in circuit-tracer's
layout) and prompt: the same active and selected features, logits, and the same adjacency
within 1e-4 of the largest edge, uncapped and with ``max_feature_nodes``.

circuit-tracer runs in a venv of its own (it pins older transformers and TransformerLens):

    python3 -m venv /tmp/ref-ct && /tmp/ref-ct/bin/pip install torch==2.13.0 circuit-tracer==0.5.0

and ``bench/circuit_tracer_run.py`` drives it offline; the test skips without that venv
(``test_circuit_attribution.py``'s independent replay still guards the maths). Each run
imports circuit-tracer in a subprocess (about 20 s on a loaded 2-core machine): marked slow.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.core.analysis.circuits.conftest import PROMPT, random_transcoders
from tui_lab.core.analysis.circuits.attribution import attribute
from tui_lab.core.analysis.circuits.graph_file import graph_json
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import save_transcoders

CT_PYTHON = Path("/tmp/ref-ct/bin/python")
RUNNER = Path(__file__).resolve().parents[4] / "bench" / "circuit_tracer_run.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CT_PYTHON.exists(), reason="no circuit-tracer venv at /tmp/ref-ct (see the docstring)"),
]


@pytest.mark.parametrize("cap", [None, 12])
def test_same_graph_as_circuit_tracer(tmp_path: Path, cap: int | None) -> None:
    from bench.hf_factory import save_family

    save_family(tmp_path / "model", "gpt2")
    model = open_model(tmp_path / "model")
    ts = random_transcoders(model)
    save_transcoders(ts, tmp_path / "tc")
    command = [str(CT_PYTHON), "-I", str(RUNNER), str(tmp_path / "model"), str(tmp_path / "tc"),
               str(tmp_path / "ct.safetensors"), "--ids", ",".join(map(str, PROMPT)), "--batch-size", "16"]
    if cap is not None:
        command += ["--max-feature-nodes", str(cap)]
    else:
        command += ["--graph-file", str(tmp_path / "ct-files")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ref = load_file(str(tmp_path / "ct.safetensors"))
    graph = attribute(model, PROMPT, ts, max_feature_nodes=cap, batch_size=16)
    assert torch.equal(ref["active_features"], graph.active_features)
    assert torch.equal(ref["selected_features"], graph.selected_features)
    assert ref["logit_ids"].tolist() == graph.logit_tokens
    assert torch.allclose(ref["logit_probabilities"], graph.logit_probabilities, atol=1e-5)
    assert ref["adjacency"].shape == graph.adjacency.shape
    scale = float(ref["adjacency"].abs().max())
    assert float((ref["adjacency"] - graph.adjacency).abs().max()) <= 1e-4 * scale
    if cap is None:  # the graph file: the same nodes (ids, kinds) and links as circuit-tracer's own
        theirs = json.loads((tmp_path / "ct-files" / "ct.json").read_text())
        ours = graph_json(graph, "ct")
        assert [n["node_id"] for n in ours["nodes"]] == [n["node_id"] for n in theirs["nodes"]]  # type: ignore[index, union-attr]
        assert [n["feature_type"] for n in ours["nodes"]] == [n["feature_type"] for n in theirs["nodes"]]  # type: ignore[index, union-attr]
        assert [(k["source"], k["target"]) for k in ours["links"]] == [(k["source"], k["target"]) for k in theirs["links"]]  # type: ignore[index, union-attr]
        weights = [k["weight"] for k in ours["links"]]  # type: ignore[index, union-attr]
        assert weights == pytest.approx([k["weight"] for k in theirs["links"]], abs=1e-4 * scale)
