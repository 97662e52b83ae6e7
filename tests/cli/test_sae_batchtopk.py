"""`tfx-lab sae train --arch batchtopk|matryoshka` and `sae eval --saebench OUT.json` on a tiny char-lm run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, last_json_line, tfx
from tests.cli.test_sae import HOOK, PRESET


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(run, BatchTopK SAE folder, Matryoshka SAE folder) on the tiny run's last block."""
    root = tmp_path_factory.mktemp("sae-btk")
    (root / "tiny.yaml").write_text(PRESET)
    assert tfx("train", "--preset", str(root / "tiny.yaml"), "--out", str(root / "run"), "--json").returncode == 0
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TFX_LAB_CACHE", str(root / "cache"))
        for arch, extra in (("batchtopk", []), ("matryoshka", ["--widths", "8,16,64"])):
            proc = tfx("sae", "train", "--run", str(root / "run"), "--hook", HOOK, "--d-sae", "64", "--k", "4",
                       "--arch", arch, *extra, "--tokens", "6000", "--batch", "256", "--out", str(root / arch),
                       "--json")
            assert proc.returncode == 0, proc.stderr
    return root / "run", root / "batchtopk", root / "matryoshka"


def test_batchtopk_is_written_as_saelens_writes_it(lab: tuple[Path, Path, Path]) -> None:
    from tui_lab.core import open_sae

    _, btk, mat = lab
    for folder, arch in ((btk, "batchtopk"), (mat, "matryoshka_batchtopk")):
        cfg = json.loads((folder / "cfg.json").read_text())
        assert cfg["architecture"] == "jumprelu" and cfg["metadata"]["training_architecture"] == arch
        sae = open_sae(str(folder))
        assert sae.threshold is not None and float(sae.threshold.detach().min()) == float(sae.threshold.detach().max()) > 0
    details = json.loads((mat / "cfg.json").read_text())["metadata"]["training_architecture_details"]
    assert details["matryoshka_widths"] == [8, 16, 64] and details["k"] == 4


def test_eval_writes_saebench_core_layout(lab: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run, btk, _ = lab
    out = tmp_path / "core.json"
    proc = tfx("sae", "eval", str(btk), "--run", str(run), "--tokens", "2000", "--saebench", str(out),
               "--saebench-prompts", "4", "--saebench-batches", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    core = json.loads(out.read_text())
    assert core["eval_type_id"] == "core" and core["eval_config"]["batch_size_prompts"] == 4
    metrics = core["eval_result_metrics"]
    assert set(metrics) == {"model_behavior_preservation", "model_performance_preservation",
                            "reconstruction_quality", "shrinkage", "sparsity", "token_stats", "misc_metrics"}
    assert metrics["token_stats"] == {"total_tokens_eval_reconstruction": 2 * 4 * 32,
                                      "total_tokens_eval_sparsity_variance": 4 * 32}
    assert 0 < metrics["sparsity"]["l0"] < 64 and -1 <= metrics["reconstruction_quality"]["cossim"] <= 1
    assert len(core["eval_result_details"]) == 64 and core["sae_cfg_dict"]["architecture"] == "jumprelu"
    summary = last_json_line(proc.stdout)
    assert summary["saebench"]["file"] == str(out)
    assert summary["saebench"]["sparsity"] == metrics["sparsity"]


def test_eval_prints_saebench_categories(lab: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run, _, mat = lab
    out = tmp_path / "m.json"
    proc = tfx("sae", "eval", str(mat), "--run", str(run), "--tokens", "500", "--saebench", str(out),
               "--saebench-prompts", "2", "--saebench-batches", "1")
    assert proc.returncode == 0, proc.stderr
    assert "model_performance_preservation: ce_loss_score" in proc.stdout and out.is_file()


@pytest.mark.parametrize(("args", "fragment"), [
    (["--arch", "matryoshka", "--widths", "8,8,64"], "--widths"),
    (["--arch", "matryoshka", "--widths", "8,16,32"], "--widths"),
    (["--arch", "batchtopk", "--widths", "8,64"], "--widths: only for --arch matryoshka"),
    (["--arch", "matryoshka", "--widths", "8,x"], "--widths"),
])
def test_bad_widths_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = tfx("sae", "train", "--run", str(tmp_path / "nowhere"), "--hook", HOOK, "--d-sae", "64",
               *args, "--out", str(tmp_path / "out"))
    assert_one_line_error(proc, fragment)
    assert not (tmp_path / "out").exists()


def test_saebench_needs_a_json_file_name(lab: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run, btk, _ = lab
    proc = tfx("sae", "eval", str(btk), "--run", str(run), "--saebench", str(tmp_path))
    assert_one_line_error(proc, "--saebench")
