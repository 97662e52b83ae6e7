"""``tfx-lab eval``: exact match on held-out examples, and what a damaged run folder says."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from tests.cli.helpers import assert_one_line_error, tfx


def test_eval_json_of_a_run_that_learned(learned_run: Path) -> None:
    proc = tfx("eval", "--run", str(learned_run), "--n", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["n"] == 100 and result["step"] == 400 and result["task"] == "copy"
    assert result["exact_match"] > 0.9 and 0 < result["val_loss"] < 0.5
    assert result["bits_per_char"] is None  # a digit task, not a language model


def test_eval_text_is_one_line(learned_run: Path) -> None:
    proc = tfx("eval", "--run", str(learned_run), "--n", "50")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"{learned_run}: step 400, exact match ") and "on 50 held-out" in line


def test_pickle_in_place_of_weights_is_refused_and_never_run(tmp_path: Path, tiny_run: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (open, (str(marker), "w"))

    (tiny_run / "model.safetensors").write_bytes(pickle.dumps(Evil()))
    assert_one_line_error(tfx("decode", "--run", str(tiny_run), "--input", "12"), "safetensors")
    assert_one_line_error(tfx("eval", "--run", str(tiny_run)), "safetensors")
    assert not marker.exists()


def test_half_written_run_folder_is_a_clear_error(tiny_run: Path) -> None:
    data = (tiny_run / "model.safetensors").read_bytes()
    (tiny_run / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert_one_line_error(tfx("eval", "--run", str(tiny_run)), "model.safetensors")
    (tiny_run / "config.yaml").unlink()
    assert_one_line_error(tfx("eval", "--run", str(tiny_run)), "config.yaml")
