"""`tfx-lab crosscoder train|features` on a tiny decoder-only run's history, in process:
the JSON keys, the folder reopening, the text histogram, one feature's contexts at both
snapshots; refusals (one step, a step not in the history, a damaged snapshot, an occupied
folder) one line each with nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, tfx
from tests.conftest import tiny_config
from tui_lab.core.runs.snapshots import list_snapshots
from tui_lab.core.sae.crosscoder_folder import load_crosscoder
from tui_lab.core.training.train import TrainingRun

QUICK = ("--d-sae", "32", "--train-steps", "60", "--batch", "64", "--tokens", "1500")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crosscoder") / "run"
    cfg = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0},
                      train={"steps": 8, "eval_every": 4, "eval_examples": 8})
    TrainingRun(cfg, out).run()  # history: steps 1, 2, 4, 8
    return out


@pytest.fixture(scope="module")
def trained(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("xc") / "xc"
    proc = tfx("crosscoder", "train", "--run", str(run_dir), *QUICK, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def test_train_json_names_the_sources_and_the_classes(run_dir: Path, trained: tuple[Path, dict]) -> None:
    out, data = trained
    steps = list_snapshots(run_dir)
    assert data["sources"] == ["step 1", f"step {steps[-1]}"]  # default: early (>= a tenth of 8) and last
    assert data["hook"] == "blocks.0.hook_resid_post" and data["step"] == 60
    assert set(data["counts"]) == {"b_only", "a_only", "shared", "mixed", "dead"}
    assert sum(data["counts"].values()) == 32
    assert sum(b["count"] for b in data["histogram"]) == 32 - data["counts"]["dead"]
    for key in ("explained_variance", "l0", "thresholds", "seconds", "out"):
        assert key in data
    cc, fired = load_crosscoder(out)
    assert cc.cfg.d_sae == 32 and fired.shape == (32,)


def test_features_lists_and_a_card_at_both_sources(trained: tuple[Path, dict]) -> None:
    out, data = trained
    proc = tfx("crosscoder", "features", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert listed["counts"] == data["counts"]
    assert set(listed["features"]) == {"b_only", "a_only", "shared", "mixed", "dead"}
    live = [r for k, rows in listed["features"].items() if k != "dead" for r in rows]
    i = live[0]["index"]
    card = json.loads(tfx("crosscoder", "features", str(out), "--feature", str(i), "--tokens", "400",
                          "--json").stdout)["card"]
    assert card["feature"] == i and [s["source"] for s in card["sources"]] == data["sources"]
    for src in card["sources"]:
        for c in src["contexts"]:
            assert len(c["tokens"]) == len(c["activations"]) == len(c["shade"])
            assert c["peak"] == max(c["activations"])
    text = tfx("crosscoder", "features", str(out)).stdout
    assert "relative decoder norm" in text and "0.95-1.00" in text
    assert "fired: the rows, of those training saw last, it fired on" in text  # what the count counts


@pytest.mark.parametrize(("args", "fragment"), [
    (("--steps", "4"), "two or more snapshot steps"),
    (("--steps", "3,8"), "no snapshot at step 3"),
    (("--model", "x"), "not both"),
])
def test_bad_sources_are_refused_in_one_line(run_dir: Path, tmp_path: Path, args: tuple[str, ...],
                                             fragment: str) -> None:
    out = tmp_path / "xc"
    assert_one_line_error(tfx("crosscoder", "train", "--run", str(run_dir), *args, "--out", str(out)), fragment)
    assert not out.exists()


def test_one_model_is_refused(tmp_path: Path, run_dir: Path) -> None:
    out = tmp_path / "xc"
    assert_one_line_error(tfx("crosscoder", "train", "--model", str(run_dir), "--out", str(out)), "two or more")
    assert not out.exists()


def test_a_damaged_snapshot_is_refused_and_nothing_is_written(run_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "run"
    shutil.copytree(run_dir, broken)
    snapshot = broken / "history" / "step-4.safetensors"
    snapshot.write_bytes(snapshot.read_bytes()[:-64] + b"\0" * 64)
    out = tmp_path / "xc"
    proc = tfx("crosscoder", "train", "--run", str(broken), "--steps", "1,4", *QUICK, "--out", str(out))
    assert_one_line_error(proc, "step-4")
    assert not out.exists()


def test_an_occupied_folder_is_refused(run_dir: Path, trained: tuple[Path, dict]) -> None:
    out, _ = trained
    before = (out / "cfg.json").read_bytes()
    assert_one_line_error(tfx("crosscoder", "train", "--run", str(run_dir), "--out", str(out)), "already holds")
    assert (out / "cfg.json").read_bytes() == before


def test_runs_lists_it_and_tensorboard_exports_it(trained: tuple[Path, dict], tmp_path: Path) -> None:
    out, data = trained
    root = tmp_path / "root"
    shutil.copytree(out, root / "xc")
    (row,) = json.loads(tfx("runs", str(root), "--json").stdout)
    assert row["kind"] == "crosscoder" and row["preset"] == "crosscoder" and row["status"] == "finished"
    assert row["step"] == data["step"] and row["diff"]["hook"] == data["hook"] and row["diff"]["d_sae"] == 32
    assert row["features_new"] == data["counts"]["b_only"] and row["features_gone"] == data["counts"]["a_only"]
    assert row["explained_variance"] == pytest.approx(data["explained_variance"], abs=1e-5)
    pytest.importorskip("tensorboard")
    proc = tfx("export", "--tensorboard", str(root / "xc"), "--out", str(tmp_path / "tb"))
    assert proc.returncode == 0, proc.stderr
    assert "6 steps" in proc.stdout and list((tmp_path / "tb" / "xc").glob("events.out.tfevents.*"))


def test_a_model_from_files_and_its_fine_tune(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from bench.hf_factory import TEXT, save_family

    source, text, run, out = tmp_path / "source", tmp_path / "text.txt", tmp_path / "run", tmp_path / "xc"
    save_family(source, "gpt2")
    text.write_text(TEXT)
    assert tfx("train", "--model", str(source), "--text", str(text), "--steps", "3", "--out", str(run)).returncode == 0
    proc = tfx("crosscoder", "train", "--model", str(source), "--model", str(run), "--text", str(text),
               *QUICK, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["sources"] == ["source", "run"] and data["hook"].endswith("hook_resid_post")
    card = json.loads(tfx("crosscoder", "features", str(out), "--feature", "0", "--text", str(text), "--tokens", "300",
                          "--json").stdout)["card"]
    assert [s["source"] for s in card["sources"]] == ["source", "run"]


def test_an_out_that_is_a_file_is_refused_before_any_work(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("x")
    assert_one_line_error(tfx("crosscoder", "train", "--run", str(run_dir), "--out", str(out)), "is a file")
    assert out.read_text() == "x"


def test_sae_features_on_a_crosscoder_points_to_crosscoder_features(
    run_dir: Path, trained: tuple[Path, dict]
) -> None:
    out, _ = trained
    proc = tfx("sae", "features", str(out), "--run", str(run_dir))
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "tfx-lab crosscoder features" in proc.stderr, proc.stderr
