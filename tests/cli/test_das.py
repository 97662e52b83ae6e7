"""`tfx-lab das`: IIA with its controls at a layer of a run, over its history, and every user
mistake as one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import LEARNED_RUN, assert_one_line_error, last_json_line, tfx
from tests.cli.test_probe import addition_run  # noqa: F401 - the session's tiny addition run


def test_das_json_has_the_score_and_its_controls(addition_run: Path) -> None:  # noqa: F811
    proc = tfx("das", "--run", str(addition_run), "--variable", "carry", "--layer", "1", "--examples", "200",
               "--steps", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["run"] == str(addition_run) and out["variable"] == "carry"
    assert out["layer"] == 1 and out["hook"] == "decoder.0.hook_resid_post"
    assert out["position"] == "all" and out["rank"] == 1
    for value in (out["iia"], out["full_swap"], *out["controls"].values()):
        assert 0.0 <= value <= 1.0
    assert set(out["controls"]) == {"random_subspace", "random_labels"}
    assert out["pairs"]["train"] > 0 and out["pairs"]["test"] > 0
    assert out["history"] is None


def test_das_history_text(addition_run: Path) -> None:  # noqa: F811
    proc = tfx("das", "--run", str(addition_run), "--variable", "carry", "--layer", "0", "--examples", "100",
               "--steps", "5", "--history")
    assert proc.returncode == 0, proc.stderr
    assert "interchange intervention accuracy" in proc.stdout
    assert "DAS IIA by layer x step (2 snapshots: 10..20)" in proc.stdout


def test_das_in_the_encoder_stack(addition_run: Path) -> None:  # noqa: F811
    """--stack encoder: the subspace interchanged at an encoder position, scored at the decoder's answer."""
    proc = tfx("das", "--run", str(addition_run), "--variable", "carry", "--stack", "encoder", "--layer", "1",
               "--position", "column 1 @ b digit 0", "--examples", "200", "--steps", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    out = last_json_line(proc.stdout)
    assert out["hook"] == "encoder.0.hook_resid_post" and out["position"] == "column 1 @ b digit 0"
    assert 0.0 <= out["iia"] <= 1.0 and out["pairs"]["test"] > 0


@pytest.mark.parametrize(("args", "fragment"), [
    (["--layer", "2"], "--layer 2: the decoder stream has layers 0-1"),
    (["--layer", "-1"], "--layer: must be >= 0"),
    (["--layer", "1", "--rank", "17"], "--rank 17: more than the residual stream's 16 dimensions"),
    (["--layer", "1", "--position", "column 9"], "no position 'column 9'"),
    (["--layer", "2", "--stack", "encoder"], "--layer 2: the encoder stream has layers 0-1"),
    (["--layer", "1", "--stack", "encoder", "--position", "column 1"], "no position 'column 1'"),
])
def test_mistakes_are_one_line(addition_run: Path, args: list[str], fragment: str) -> None:  # noqa: F811
    proc = tfx("das", "--run", str(addition_run), "--variable", "carry", "--examples", "100", *args)
    assert_one_line_error(proc, fragment)


def test_a_variable_the_task_lacks() -> None:
    assert_one_line_error(tfx("das", "--run", str(LEARNED_RUN), "--variable", "carry", "--layer", "1"),
                          "the copy task has no variable 'carry'; its variables: source")
