"""``tfx-lab export --hf --json`` is the verb's ``run(Request(...)).to_json()``; ``--tensorboard``
prints a line per outcome of ``run_tensorboard``, a run that fails leaving the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import tfx
from tui_lab.core.errors import LabError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("export-verb") / "run"
    proc = tfx("train", "--preset", "modular-addition", "--steps", "4", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    return run


def test_hf_json_is_the_verbs(run_dir: Path) -> None:
    from tui_lab.core.verbs import export

    proc = tfx("export", "--hf", str(run_dir), "--out", str(run_dir.parent / "by-command"), "--json")
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    assert list(cli) == ["folder", "family", "step", "params", "files", "max_logit_diff"]
    got = export.run(export.Request(str(run_dir), str(run_dir.parent / "by-verb"))).to_json()
    assert Path(str(cli.pop("folder"))).name == "by-command"
    assert Path(str(got.pop("folder"))).name == "by-verb"
    assert list(cli) == list(got) and json.dumps(cli) == json.dumps(got)


def test_hf_request_needs_an_out_folder() -> None:
    from tui_lab.core.verbs import export

    with pytest.raises(LabError, match="needs --out DIR"):
        export.Request("run", "")


def test_tensorboard_keeps_going_past_a_failed_run(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tui_lab.core.verbs import export

    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    request = export.TensorboardRequest((not_a_run, run_dir), ("empty", "run"), tmp_path / "tb")
    result = export.run_tensorboard(request)
    assert [e.name for e in result.runs] == ["empty", "run"] and result.failed == 1
    assert result.runs[0].error is not None and result.runs[1].written is not None
    assert result.to_json()["runs"] == [e.to_json() for e in result.runs]
