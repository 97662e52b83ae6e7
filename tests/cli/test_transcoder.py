"""`tfx-lab transcoder train|eval`: the JSON keys, the files, history, and one-line refusals
that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import DATA, assert_one_line_error, last_json_line, tfx

RUN = str(DATA / "induction-mlp-run")
KEYS = {"explained_variance", "l0", "dead_fraction", "ce_loss_recovered"}
SMALL = ("--features", "64", "--tokens", "2048", "--batch", "512")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tc") / "set"
    proc = tfx("transcoder", "train", "--run", RUN, "--architecture", "jumprelu", "--skip", *SMALL,
               "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return out, last_json_line(proc.stdout)


def test_train_json_and_files(trained: tuple[Path, dict]) -> None:
    out, summary = trained
    assert KEYS <= set(summary)
    assert summary["architecture"] == "jumprelu" and summary["skip"] is True
    assert [row["layer"] for row in summary["layers"]] == [0, 1]
    assert KEYS <= set(summary["layers"][0]) and KEYS <= set(summary["whole"])
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "layer_0.safetensors", "layer_1.safetensors",
                                                      "transcoder_metrics.json"]


def test_eval_json_and_text(trained: tuple[Path, dict]) -> None:
    out, summary = trained
    proc = tfx("transcoder", "eval", str(out), "--run", RUN, "--json")
    assert proc.returncode == 0, proc.stderr
    result = last_json_line(proc.stdout)
    assert KEYS <= set(result) and result["feature_input_hook"] == "ln2.hook_normalized"
    # the same held-out windows as training's own measurement: the same numbers
    assert result["explained_variance"] == pytest.approx(summary["explained_variance"], rel=1e-6)
    text = tfx("transcoder", "eval", str(out), "--run", RUN)
    assert text.returncode == 0 and "layer 1" in text.stdout and "CE rec." in text.stdout


def test_runs_lists_the_set(trained: tuple[Path, dict]) -> None:
    out, summary = trained
    proc = tfx("runs", str(out.parent), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [row for row in json.loads(proc.stdout) if row["name"] == out.name]
    assert len(rows) == 1 and rows[0]["kind"] == "transcoders" and rows[0]["status"] == "finished"
    assert rows[0]["explained_variance"] == pytest.approx(summary["explained_variance"])
    assert rows[0]["diff"]["arch"] == "jumprelu"


def test_runs_lists_a_set_made_elsewhere(tmp_path: Path) -> None:
    """A circuit-tracer folder with no lab metrics file is still a set, not a damaged run."""
    from tests.core.sae.transcoder_fixtures import random_set
    from tui_lab.core.sae.transcoder import save_transcoders

    save_transcoders(random_set(6, 8, 2, "jumprelu"), tmp_path / "ct")
    proc = tfx("runs", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["kind"], row["status"], row["diff"]["arch"], row["explained_variance"]) == (
        "transcoders", "finished", "jumprelu", None)


def test_saelens_format_at_a_step(tmp_path: Path) -> None:
    proc = tfx("transcoder", "train", "--run", RUN, "--at-step", "400", "--format", "saelens", *SMALL,
               "--out", str(tmp_path / "s"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert last_json_line(proc.stdout)["at_step"] == 400
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["layer_0", "layer_1", "transcoder_metrics.json"]


@pytest.mark.parametrize(("args", "fragment"), [
    (("--architecture", "gelu"), "--architecture"),
    (("--features", "0"), "--features"),
    (("--architecture", "topk", "--format", "saelens"), "SAELens has no topk transcoder"),
    (("--layers", "one"), "--layers one"),
    (("--layers", "5"), "the model has layers 0 to 1"),
    (("--at-step", "7"), "7"),
    (("--history", "100,7"), "7"),
    (("--history", "1,x"), "--history 1,x"),
])
def test_train_refusals_write_nothing(tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    out = tmp_path / "out"
    proc = tfx("transcoder", "train", "--run", RUN, *SMALL, *args, "--out", str(out))
    assert_one_line_error(proc, fragment)
    assert not out.exists()


def test_an_occupied_out_and_a_set_for_another_model(trained: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = trained
    assert_one_line_error(tfx("transcoder", "train", "--run", RUN, *SMALL, "--out", str(out)),
                          "holds a transcoder set")
    other = str(DATA / "induction-run")  # attention-only: no MLP hooks
    assert_one_line_error(tfx("transcoder", "eval", str(out), "--run", other), "which the model lacks")
    assert_one_line_error(tfx("transcoder", "train", "--run", RUN, *SMALL, "--layers", "1",
                              "--out", str(tmp_path / "none")), "holds no set")
    assert not (tmp_path / "none").exists()
