"""``tfx-lab runs`` and ``compare``: JSON, CSV, tables, a terminal chart, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, tfx
from tests.conftest import tiny_config
from tests.core.runs.test_summary import write_run
from tui_lab.core.runs.summary import CSV_COLUMNS


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Two finished runs, one in a sweep folder, and a damaged one."""
    write_run(tmp_path / "a", tiny_config(train={"target_accuracy": 0.9}))
    write_run(tmp_path / "sw" / "norm=post-s0", tiny_config(model={"norm": "post"}))
    bad = write_run(tmp_path / "broken")
    (bad / "state.json").write_text("{oops")
    return tmp_path


def test_runs_json_lists_every_run_with_its_summary(runs_dir: Path) -> None:
    proc = tfx("runs", str(runs_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["a", "broken", "sw/norm=post-s0"]
    a, broken, post = rows
    assert a["status"] == "finished" and a["steps_to_target"] == 20 and a["best_exact_match"] == 1.0
    assert broken["status"] == "damaged" and "state.json: not valid JSON" in broken["detail"]
    assert "model.norm=post" in post["label"]
    assert {"name", "preset", "label", "diff", "status", "step", "best_exact_match", "bits_per_char",
            "steps_to_target", "seconds_to_target", "tokens_per_s", "params", "date"} <= set(a)


def test_runs_csv_and_table(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = tfx("runs", str(runs_dir), "--csv")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert proc.returncode == 0 and len(rows) == 3
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert rows[1]["status"] == "damaged"
    monkeypatch.setenv("TFX_LAB_RUNS", str(runs_dir))  # DIR defaults to the runs root
    monkeypatch.setenv("COLUMNS", "200")
    table = tfx("runs").stdout
    assert "broken" in table and "damaged" in table and "norm=post-s0" in table


def test_runs_errors_are_one_line(tmp_path: Path) -> None:
    assert_one_line_error(tfx("runs", str(tmp_path / "nope")), "no such folder")
    assert_one_line_error(tfx("compare", str(tmp_path / "nope")), "no such run folder")
    write_run(tmp_path / "a")
    assert_one_line_error(tfx("compare", str(tmp_path / "a"), "--plot", "--json"), "--plot")


def test_compare_expands_a_sweep_once_and_plots_with_legends(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = runs_dir / "sw"
    write_run(sweep / "norm=pre-s0")
    (sweep / "sweep.json").write_text("{}")
    proc = tfx("compare", *map(str, sorted(sweep.iterdir())), str(sweep), "--csv")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["name"] for r in rows) == ["norm=post-s0", "norm=pre-s0"]
    monkeypatch.setenv("COLUMNS", "160")
    plot = tfx("compare", str(sweep / "norm=pre-s0"), str(sweep / "norm=post-s0"), "--plot").stdout
    plot = re.sub(r"\x1b\[[0-9;]*m", "", plot)
    assert "train loss" in plot and "val loss" in plot
    # Legends say how each run differs from the others (what they share is left out).
    assert "━━ model.norm=post" in plot and "━━ norm=pre-s0" in plot




def test_compare_json_is_the_runs_in_order_with_their_figures(runs_dir: Path) -> None:
    a, post = runs_dir / "a", runs_dir / "sw" / "norm=post-s0"
    proc = tfx("compare", str(post), str(a), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["norm=post-s0", "a"]
    assert [Path(r["path"]).resolve() for r in rows] == [post.resolve(), a.resolve()]
    by_name = {r["name"]: r for r in rows}
    # write_run's evaluations: exact match 0.2, 0.95, 1.0 at steps 10, 20, 30
    assert by_name["a"]["best_exact_match"] == 1.0 and by_name["a"]["steps_to_target"] == 20
    assert by_name["norm=post-s0"]["steps_to_target"] is None  # no target set
    assert by_name["norm=post-s0"]["diff"]["model.norm"] == "post"
    assert "model.norm" not in by_name["a"]["diff"]
    assert all(r["status"] == "finished" and r["step"] == 30 for r in rows)


def test_compare_names_two_runs_of_one_name_by_their_folder(tmp_path: Path) -> None:
    for sweep in ("one", "two"):
        write_run(tmp_path / sweep / "s0")
    rows = json.loads(tfx("compare", str(tmp_path / "one" / "s0"), str(tmp_path / "two" / "s0"),
                          "--json").stdout)
    assert [r["name"] for r in rows] == ["one/s0", "two/s0"]


def test_an_sae_training_folder_is_listed_and_exports_to_tensorboard(runs_dir: Path) -> None:
    """``tfx-lab sae train --out`` writes a run like any other: ``runs`` lists it with its
    figures and ``export --tensorboard`` writes its curves."""
    from tests.core.runs.test_sae_runs import _train

    _train(runs_dir / "saes" / "topk", tokens=1024)
    proc = tfx("runs", str(runs_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    sae = {r["name"]: r for r in json.loads(proc.stdout)}["saes/topk"]
    assert (sae["kind"], sae["status"], sae["step"], sae["total_steps"]) == ("sae", "finished", 8, 8)
    assert 0.0 < sae["explained_variance"] <= 1.0 and sae["l0"] == 4.0
    pytest.importorskip("tensorboard")
    out = runs_dir / "tb"
    proc = tfx("export", "--tensorboard", str(runs_dir / "saes" / "topk"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "topk:" in proc.stdout and list((out / "topk").glob("events.out.tfevents.*"))
