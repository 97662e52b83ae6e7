"""`tfx-lab ablate` and `decode --lens/--explain/--top-p/--seed` on the checked-in tiny run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, tfx

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny-run"


@pytest.fixture
def run(tmp_path: Path) -> str:
    """A copy, so the ablation cache is written outside the repository."""
    dest = tmp_path / "run"
    shutil.copytree(TINY, dest)
    return str(dest)


def test_ablate_table_lists_every_head_and_is_cached(run):
    proc = tfx("ablate", "--run", run, "--n", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert sorted(r["head"] for r in table["rows"]) == sorted(
        f"{m}:{h}" for m in ("encoder.0.self", "decoder.0.self", "decoder.0.cross") for h in (0, 1)
    )
    assert not table["cached"] and (Path(run) / "ablation.json").is_file()
    again = json.loads(tfx("ablate", "--run", run, "--n", "20", "--json").stdout)
    assert again["cached"] and again["rows"] == table["rows"]


def test_ablate_heads_and_mean_mode(run):
    proc = tfx("ablate", "--run", run, "--n", "20", "--head", "decoder.0.cross:0",
               "--head", "decoder.0.cross:1", "--mode", "mean", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["heads"] == ["decoder.0.cross:0", "decoder.0.cross:1"] and out["mode"] == "mean"
    assert out["drop"] == pytest.approx(out["baseline"] - out["exact_match"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--head", "decoder.0.cross:5"], "heads 0..1"),
        (["--head", "decoder.4.cross:0"], "no attention module"),
        (["--head", "cross"], "NAME:HEAD"),
        (["--mode", "half"], "mode 'half'"),
    ],
)
def test_ablate_bad_heads_are_one_line(run, args, fragment):
    assert_one_line_error(tfx("ablate", "--run", run, *args), fragment)


def test_decode_lens_explain_and_seeded_top_p(run):
    proc = tfx("decode", "--run", run, "--input", "3141", "--lens", "--explain", "decoder.0.cross:1@2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["lens"]["rows"][-1]) == len(out["steps"])
    for cell, step in zip(out["lens"]["rows"][-1], out["steps"], strict=True):
        assert cell["prob"] == pytest.approx(step["prob"], abs=1e-5)
    assert out["explain"]["head"] == "decoder.0.cross:1" and out["explain"]["max_diff"] < 1e-5
    text = tfx("decode", "--run", run, "--input", "3141", "--explain", "decoder.0.cross:1@2", "--lens")
    assert "q.k" in text.stdout and "max |softmax - captured weights|" in text.stdout
    assert "logit lens" in text.stdout
    sample = ["decode", "--run", run, "--input", "3141", "--temperature", "1", "--top-p", "0.9", "--seed", "5"]
    first, second = tfx(*sample), tfx(*sample)
    assert first.returncode == 0 and first.stdout == second.stdout and "kept" in first.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(["--explain", "decoder.0.cross:1"], "NAME:HEAD@ROW"), (["--explain", "decoder.0.cross:1@99"], "query rows"),
     (["--top-p", "0"], "top-p")],
)
def test_decode_bad_explain_and_top_p_are_one_line(run, args, fragment):
    extra = ["--temperature", "1"] if "--top-p" in args else []
    assert_one_line_error(tfx("decode", "--run", run, "--input", "3141", *extra, *args), fragment)
