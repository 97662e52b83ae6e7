"""`tfx-lab graph`: an attribution graph over transcoders; the JSON is circuit-tracer's graph
file, `--neuronpedia` writes the same file; hostile input is one line and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.hf_factory import save_family
from tests.core.analysis.circuits.conftest import random_transcoders
from tui_lab.cli import main
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.transcoder import save_transcoders


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("graph-cli")
    save_family(root / "model", "gpt2")
    save_transcoders(random_transcoders(open_model(root / "model")), root / "tc")
    return root / "model", root / "tc"


def test_json_is_the_graph_file_and_neuronpedia_writes_it(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, tc = folders
    out = tmp_path / "g.json"
    args = ["graph", "--model", str(model), "--transcoders", str(tc), "--input", "The cat sat"]
    assert main([*args, "--neuronpedia", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"metadata", "qParams", "nodes", "links"}
    assert json.loads(out.read_text()) == printed
    kinds = {n["feature_type"] for n in printed["nodes"]}
    assert {"embedding", "logit"} <= kinds
    ids = {n["node_id"] for n in printed["nodes"]}
    assert all(link["source"] in ids and link["target"] in ids for link in printed["links"])
    assert printed["metadata"]["slug"] == "g" and 0.0 <= printed["metadata"]["replacement_score"] <= 1.0
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "replacement score" in text and "<- traced" in text
    assert "carried by" in text and "--qk" in text  # the heads moving the top earlier-position edge


def _refused(args: list[str], out: Path, capsys, fragment: str) -> None:
    capsys.readouterr()  # what saving the fixtures printed
    assert main([*args, "--neuronpedia", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert not out.exists() and not any(out.parent.glob(f".{out.name}*"))


def test_transcoders_for_another_model(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, _ = folders
    save_family(tmp_path / "wide", "gpt2", n_embd=48)
    save_transcoders(random_transcoders(open_model(tmp_path / "wide")), tmp_path / "wide_tc")
    save_family(tmp_path / "deep", "gpt2", n_layer=3)
    save_transcoders(random_transcoders(open_model(tmp_path / "deep")), tmp_path / "deep_tc")
    for tc, fragment in ((tmp_path / "wide_tc", "d_model"), (tmp_path / "deep_tc", "layer")):
        _refused(["graph", "--model", str(model), "--transcoders", str(tc), "--input", "The cat"],
                 tmp_path / "g.json", capsys, fragment)


def test_a_truncated_layer_file(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, tc = folders
    broken = tmp_path / "tc"
    broken.mkdir()
    for f in tc.iterdir():
        data = f.read_bytes()
        (broken / f.name).write_bytes(data[: len(data) // 2] if f.name == "layer_1.safetensors" else data)
    _refused(["graph", "--model", str(model), "--transcoders", str(broken), "--input", "The cat"],
             tmp_path / "g.json", capsys, "layer_1")


def test_config_naming_hooks_the_model_lacks(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, tc = folders
    odd = tmp_path / "tc"
    odd.mkdir()
    for f in tc.iterdir():
        (odd / f.name).write_bytes(f.read_bytes())
    config = (odd / "config.yaml").read_text().replace("mlp.hook_in", "mlp.hook_nowhere")
    (odd / "config.yaml").write_text(config)
    _refused(["graph", "--model", str(model), "--transcoders", str(odd), "--input", "The cat"],
             tmp_path / "g.json", capsys, "'mlp.hook_nowhere' has no exact match")


def test_a_prompt_past_the_context(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, tc = folders
    _refused(["graph", "--model", str(model), "--transcoders", str(tc), "--input", "The cat sat. " * 40],
             tmp_path / "g.json", capsys, "64")


def test_a_family_it_cannot_replace_says_so(tmp_path: Path, capsys) -> None:
    save_family(tmp_path / "gemma2", "gemma2")
    model = open_model(tmp_path / "gemma2")
    save_transcoders(random_transcoders(model), tmp_path / "tc")
    _refused(["graph", "--model", str(tmp_path / "gemma2"), "--transcoders", str(tmp_path / "tc"), "--input", "hi"],
             tmp_path / "g.json", capsys, "norm")


HISTORY_PRESET = """\
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 2, d_model: 32, n_heads: 2,
        d_ff: 64, positional: learned, max_len: 64}
task: {name: induction}
train: {steps: 4, batch_size: 8, eval_every: 2, eval_examples: 16, device: cpu, threads: 1}
"""


def test_at_step_picks_that_snapshots_set(tmp_path: Path, capsys) -> None:
    from tui_lab.core.config.presets import load_preset
    from tui_lab.core.training.train import TrainingRun

    (tmp_path / "tiny.yaml").write_text(HISTORY_PRESET)
    TrainingRun(load_preset(str(tmp_path / "tiny.yaml")), tmp_path / "run").run()
    for step in (2, 4):
        model = open_model(tmp_path / "run", at_step=step)
        save_transcoders(random_transcoders(model, seed=step), tmp_path / "tc" / f"step_{step}")
    args = ["graph", "--run", str(tmp_path / "run"), "--transcoders", str(tmp_path / "tc"), "--input", "abcab", "--json"]
    capsys.readouterr()
    assert main([*args, "--at-step", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["step"] == 2
    assert main(args) == 0  # the run's own last step has a set
    assert json.loads(capsys.readouterr().out)["metadata"]["step"] == 4
    _refused([*args[:-1], "--at-step", "1"], tmp_path / "g.json", capsys, "no transcoders for step 1")


def test_qk_json_has_the_tracing_keys_and_sums_to_the_score(folders: tuple[Path, Path], capsys) -> None:
    import torch

    model_dir, tc = folders
    args = ["graph", "--model", str(model_dir), "--transcoders", str(tc), "--input", "The cat sat on", "--qk", "1.0"]
    capsys.readouterr()
    assert main([*args, "--query-pos", "3", "--key-pos", "1", "--top", "4", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"pair_wise_contributors", "top_q_marginal_contributors", "top_k_marginal_contributors",
            "score", "constant"} <= set(printed)
    assert len(printed["pair_wise_contributors"]) == 4 and (printed["query_pos"], printed["key_pos"]) == (3, 1)
    model = open_model(model_dir)
    ids = model.to_tokens("The cat sat on")
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, ["blocks.1.attn.hook_attn_scores"])
    score = float(cache["blocks.1.attn.hook_attn_scores"][0, 0, 3, 1])
    assert printed["score"] == pytest.approx(score, abs=1e-6)
    assert printed["total"] == pytest.approx(score, abs=1e-5 * max(1.0, abs(score)))
    assert {"node", "label", "kind", "score"} <= set(printed["top_k_marginal_contributors"][0])
    assert main(args) == 0  # text: the key defaults to where the head attends most
    text = capsys.readouterr().out
    assert "L1.H0 at query 3" in text and "top pairs" in text and "key side" in text


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--qk", "one.two"], "LAYER.HEAD"),
    (["--qk", "7.0"], "layer 7 out of range"),
    (["--qk", "1.9"], "head 9 out of range"),
    (["--qk", "1.0", "--query-pos", "1", "--key-pos", "2"], "comes after"),
    (["--qk", "1.0", "--query-pos", "40"], "query position 40 out of range"),
    (["--qk", "1.0", "--top", "0"], "--top"),
])
def test_qk_hostile_input_is_one_line(folders: tuple[Path, Path], tmp_path: Path, capsys, extra: list[str],
                                      fragment: str) -> None:
    model, tc = folders
    capsys.readouterr()
    assert main(["graph", "--model", str(model), "--transcoders", str(tc), "--input", "The cat", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err


def test_qk_writes_no_graph_file(folders: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    model, tc = folders
    _refused(["graph", "--model", str(model), "--transcoders", str(tc), "--input", "The cat", "--qk", "1.0"],
             tmp_path / "g.json", capsys, "writes no graph file")
