"""`tfx-lab lens`: the logit, a tuned or a Jacobian lens over a decode, fitted, saved, reopened;
bad combinations and another model's lens refused in one line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, last_json_line, tfx


def _layers_ok(out: dict, kind: str) -> None:
    assert out["lens"] == kind and out["input"] == "3141"
    assert [row["layer"] for row in out["layers"]] == ["decoder.0", "decoder.1"]
    for row in out["layers"]:
        assert set(row) == {"layer", "kl", "agreement", "top"}
        assert len(row["top"]) == len(out["steps"]) and all(len(step) == 3 for step in row["top"])
    last = out["layers"][-1]
    assert last["kl"] == pytest.approx(0.0, abs=1e-6) and last["agreement"] == 1.0  # the output itself
    assert [step[0]["token"] for step in last["top"]] == out["steps"]  # what the decode emitted


def test_logit_lens_json(learned_run: Path) -> None:
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["run"] == str(learned_run) and out["output"] == "3141"
    _layers_ok(out, "logit")
    assert out["fit"] is None and out["held_out"] is None


def test_tuned_lens_fitted_saved_and_reopened(learned_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tuned"
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--lens", "tuned", "--steps", "20",
               "--out", str(folder), "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    fitted = last_json_line(proc.stdout)
    _layers_ok(fitted, "tuned")
    assert fitted["fit"]["done"] == 20 and fitted["fit"]["saved"] == str(folder)
    assert fitted["fit"]["loss_last"] < fitted["fit"]["loss_first"]
    config = json.loads((folder / "lens.json").read_text())
    assert (config["kind"], config["d_model"], config["n_layers"]) == ("tuned", 32, 2)
    assert (folder / "lens.safetensors").is_file()
    held = fitted["held_out"]
    assert [row["layer"] for row in held] == ["decoder.0", "decoder.1"]
    assert held[0]["kl"] < held[0]["logit_kl"]  # the point of tuning it
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--lens", "tuned", "--lens-file", str(folder),
               "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    opened = last_json_line(proc.stdout)
    assert opened["fit"] is None
    assert [r["kl"] for r in opened["layers"]] == pytest.approx([r["kl"] for r in fitted["layers"]], abs=1e-6)


def test_jacobian_lens_and_the_table(learned_run: Path) -> None:
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--lens", "jacobian", "--prompts", "2",
               "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    _layers_ok(out, "jacobian")
    assert out["fit"]["done"] == 2
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141")
    assert proc.returncode == 0, proc.stderr
    assert "logit lens over the decode of '3141'" in proc.stdout and "decoder.1" in proc.stdout


def test_a_lens_file_for_another_model_is_refused(learned_run: Path, tiny_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "small"
    assert tfx("lens", "--run", str(tiny_run), "--input", "3", "--lens", "tuned", "--steps", "1",
               "--out", str(folder)).returncode == 0
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--lens", "tuned", "--lens-file", str(folder))
    assert_one_line_error(proc, "a tuned lens for another model")
    proc = tfx("lens", "--run", str(learned_run), "--input", "3141", "--lens", "jacobian", "--lens-file", str(folder))
    assert_one_line_error(proc, "another model")


@pytest.mark.parametrize(("args", "fragment"), [
    (["--lens", "logit", "--out", "OUT"], "--lens logit has nothing"),
    (["--lens", "tuned", "--steps", "0", "--out", "OUT"], "--steps"),
    (["--lens", "tuned", "--lens-file", "OUT", "--text", "x.txt"], "--lens-file opens"),
    (["--lens", "tuned", "--lens-file", "OUT"], "no lens.json"),
    (["--lens", "tuned", "--text", "OUT/x.txt", "--out", "OUT"], "--text"),
])
def test_refusals_in_one_line_and_nothing_written(tiny_run: Path, tmp_path: Path, args: list[str], fragment: str) -> None:
    out = tmp_path / "out"
    args = [a.replace("OUT", str(out)) for a in args]
    proc = tfx("lens", "--run", str(tiny_run), "--input", "3", *args)
    assert_one_line_error(proc, fragment)
    assert not out.exists()


def test_a_model_from_files_is_fitted_on_pythons_help_text(tmp_path: Path) -> None:
    from bench.hf_factory import save_family

    folder = tmp_path / "neox"
    folder.mkdir()
    save_family(folder, "gpt_neox")
    proc = tfx("lens", "--model", str(folder), "--input", "The cat sat", "--lens", "tuned", "--steps", "4",
               "--max-new", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["model"] == str(folder) and out["fit"]["data"].startswith("Python's help text")
    assert out["layers"][-1]["kl"] == pytest.approx(0.0, abs=1e-6) and out["layers"][-1]["agreement"] == 1.0
