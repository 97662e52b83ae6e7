"""`tfx-lab probe`: probes at every layer of a run for a task variable or a label file, the
history's heatmap, and every user mistake as one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import LEARNED_RUN, TINY_RUN, assert_one_line_error, last_json_line, tfx

TINY_ADDITION = """\
model: {d_model: 16, n_heads: 2, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 32}
task: {name: addition, max_digits: 2}
train: {steps: 20, batch_size: 16, eval_every: 10, eval_examples: 16, warmup_steps: 2,
        device: cpu, threads: 1, history_every: 10}
"""


@pytest.fixture(scope="session")
def addition_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny addition run of 20 steps with history snapshots at steps 10 and 20 (a few seconds)."""
    folder = tmp_path_factory.mktemp("probe")
    preset = folder / "tiny-addition.yaml"
    preset.write_text(TINY_ADDITION)
    proc = tfx("train", "--preset", str(preset), "--out", str(folder / "run"), "--json")
    assert proc.returncode == 0, proc.stderr
    return folder / "run"


def test_probe_json_has_every_layer_and_position(addition_run: Path) -> None:
    proc = tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "200", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["run"] == str(addition_run) and out["variable"] == "carry"
    # one decoder block: read before it (the embeddings) and after it
    assert out["hooks"] == ["decoder.0.hook_resid_pre", "decoder.0.hook_resid_post"]
    assert out["layers"] == [0, 1] and out["positions"][-1] == "all"
    assert "column 1" in out["positions"]
    for key in ("accuracy", "control", "chance"):
        assert len(out[key]) == 2 and all(len(row) == len(out["positions"]) for row in out[key])
    assert out["best"]["accuracy"] == max(v for row in out["accuracy"] for v in row if v is not None)
    assert out["sparse"] is None and out["history"] is None


def test_probe_history_is_a_layer_by_step_heatmap(addition_run: Path) -> None:
    proc = tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "100", "--history")
    assert proc.returncode == 0, proc.stderr
    assert "probe accuracy by layer x step (2 snapshots: 10..20)" in proc.stdout
    assert "first step at >= 0.95:" in proc.stdout
    proc = tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "100", "--history",
               "--json")
    history = last_json_line(proc.stdout)["history"]
    assert history["steps"] == [10, 20] and history["position"] == "all"
    assert len(history["probe"]["values"]) == 2 and history["das"] is None
    assert "readable_from" in history


def test_probe_in_the_encoder_stack(addition_run: Path) -> None:
    """--stack encoder: the carry read at every input position of the encoder, over its history too."""
    from tests.cli.helpers import INDUCTION_RUN

    proc = tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "100", "--stack", "encoder",
               "--history", "--position", "column 1 @ b digit 0", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["hooks"] == ["encoder.0.hook_resid_pre", "encoder.0.hook_resid_post"]
    assert {"column 1 @ a digit 0", "column 1 @ +", "column 1 @ b digit 1"} <= set(out["positions"])
    assert out["history"]["position"] == "column 1 @ b digit 0"
    assert out["history"]["probe"]["hooks"] == out["hooks"]
    assert_one_line_error(tfx("probe", "--run", INDUCTION_RUN, "--variable", "carry", "--stack", "encoder"),
                          "--stack encoder: this model is decoder-only; only an encoder-decoder has an encoder")


def test_a_label_file(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    # one label per example (read at its last token), whether its first digit is odd
    lines = [f"{t}\t{int(t[0]) % 2}" for t in ("12", "345", "6", "78", "901", "23", "4567", "89")]
    labels.write_text("\n".join(lines) + "\n")
    proc = tfx("probe", "--run", str(LEARNED_RUN), "--labels", str(labels), "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["variable"] == str(labels) and out["positions"] == ["last token"]


def test_mistakes_are_one_line(tmp_path: Path, addition_run: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("123\t1 0\n45\t0\n6\t1\n78\t0\n")
    assert_one_line_error(tfx("probe", "--run", str(LEARNED_RUN), "--labels", str(labels)),
                          "labels.txt:1: 2 labels for 3 tokens of '123'")
    assert_one_line_error(tfx("probe", "--run", str(addition_run), "--variable", "rank"),
                          "the addition task has no variable 'rank'; its variables: carry")
    assert_one_line_error(tfx("probe", "--run", str(LEARNED_RUN), "--labels", str(tmp_path / "none.txt")),
                          "no such label file")
    assert_one_line_error(tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "5"),
                          "--examples: must be >= 20")
    assert_one_line_error(tfx("probe", "--run", str(addition_run), "--variable", "carry", "--history",
                              "--position", "column 7"), "no position 'column 7'")
    proc = tfx("probe", "--run", str(addition_run))
    assert_one_line_error(proc, "one of the arguments --variable --labels is required")
    assert_one_line_error(tfx("probe", "--run", str(TINY_RUN), "--variable", "source", "--examples", "40",
                              "--history"), "no history snapshots (train with train.history on)")
    assert_one_line_error(tfx("probe", "--model", str(LEARNED_RUN), "--variable", "source", "--history"),
                          "--history reads a run's snapshots: give --run DIR")


def _sae(folder: Path, hook: str, d_in: int) -> Path:
    """A random ReLU SAE in SAELens's format reading ``hook``."""
    from tui_lab.core.sae.config import SAEConfig, SAEMetadata
    from tui_lab.core.sae.folder import save_sae
    from tui_lab.core.sae.sae import SparseAutoencoder

    cfg = SAEConfig(d_in=d_in, d_sae=32, architecture="standard", metadata=SAEMetadata(hook_name=hook))
    return save_sae(SparseAutoencoder(cfg), folder)


def test_a_sparse_probe_over_an_sae_at_the_variables_stream(tmp_path: Path, addition_run: Path) -> None:
    sae = _sae(tmp_path / "sae", "decoder.0.hook_resid_post", 16)
    proc = tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "200", "--sae", str(sae),
               "--k", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    sparse = last_json_line(proc.stdout)["sparse"]
    assert sparse["hook"] == "decoder.0.hook_resid_post" and sparse["k"] == 3
    assert len(set(sparse["features"])) == 3 and all(0 <= f < 32 for f in sparse["features"])
    assert 0.0 <= sparse["accuracy"] <= 1.0 and 0.0 <= sparse["control"] <= 1.0
    other = _sae(tmp_path / "enc", "encoder.0.hook_resid_post", 16)
    assert_one_line_error(tfx("probe", "--run", str(addition_run), "--variable", "carry", "--examples", "100",
                              "--sae", str(other)),
                          "the SAE reads encoder.0.hook_resid_post, but the variable carry is read in the decoder stream")


def test_a_label_file_on_a_model_from_files(tmp_path: Path) -> None:
    """--model: a real model's tokens, one label per token of each line (a random-weight GPT-2 folder)."""
    from bench.hf_factory import save_family
    from tui_lab.core.opening.model_in_hand import open_model

    folder = tmp_path / "tiny-gpt2"
    save_family(folder, "gpt2")
    model = open_model(str(folder))
    texts = ["hello world", "the cat sat", "a b c", "one two", "dogs run fast", "it is"]
    lines = []
    for text in texts:
        n = len(model.task.vocab.encode(text))
        lines.append(f"{text}\t{' '.join(str(i % 2) for i in range(n))}")  # token parity
    labels = tmp_path / "parity.tsv"
    labels.write_text("\n".join(lines) + "\n")
    proc = tfx("probe", "--model", str(folder), "--labels", str(labels), "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["model"] == str(folder) and out["hooks"][0] == "blocks.0.hook_resid_pre"
    assert out["positions"][-1] == "all" and out["positions"][0] == "token 0"
