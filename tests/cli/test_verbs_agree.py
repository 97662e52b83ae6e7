"""Each command prints what its verb returns: ``tfx-lab patch|dla|trace|steer --json`` is the
verb's ``run(request, model).to_json()`` under the run's name (the SAE commands: tests/cli/test_sae.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import DATA, tfx

RUN = str(DATA / "induction-run")


@pytest.fixture(scope="module")
def model() -> Any:
    from tui_lab.core.opening.model_in_hand import open_model

    return open_model(RUN)


def _cli(*args: str) -> dict[str, Any]:
    proc = tfx(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out.pop("run") == RUN
    return dict(out)


def _same(verb_json: dict[str, Any], cli: dict[str, Any]) -> None:
    assert list(cli) == list(verb_json)  # the same keys in the same order
    assert json.dumps(verb_json) == json.dumps(cli)


@pytest.mark.parametrize("method", ["exact", "attribution", "both"])
def test_patch(model: Any, method: str) -> None:
    from tui_lab.core.verbs import patch

    got = patch.run(patch.Request(site="z", method=method), model).to_json()
    _same(got, _cli("patch", "--run", RUN, "--site", "z", "--method", method))


def test_patch_a_typed_pair(model: Any) -> None:
    from tui_lab.core.verbs import patch

    request = patch.Request(clean="abcdabc", corrupt="abcxabc", answer="d", wrong="x")
    _same(patch.run(request, model).to_json(),
          _cli("patch", "--run", RUN, "--clean", "abcdabc", "--corrupt", "abcxabc", "--answer", "d", "--wrong", "x"))


def test_dla(model: Any) -> None:
    from tui_lab.core.verbs import dla

    got = dla.run(dla.Request("tdkywbzxtdk", "y", "f"), model).to_json()
    _same(got, _cli("dla", "--run", RUN, "--input", "tdkywbzxtdk", "--answer", "y", "--wrong", "f"))


def test_trace(model: Any) -> None:
    from tui_lab.core.verbs import trace

    got = trace.run(trace.Request("tdkywbzxtdk", "tdk", "y", samples=3), model).to_json()
    _same(got, _cli("trace", "--run", RUN, "--input", "tdkywbzxtdk", "--subject", "tdk", "--answer", "y",
                    "--samples", "3"))


def test_steer(model: Any, tmp_path: Path) -> None:
    from tui_lab.core.verbs import steer

    (tmp_path / "pos.txt").write_text("abcabc\nabab\n")
    (tmp_path / "neg.txt").write_text("xyzxyz\nxyxy\n")
    steering = steer.Steering("blocks.1.hook_resid_pre", ("abcabc", "abab"), ("xyzxyz", "xyxy"), 4.0)
    got = steer.run(steer.Request("tdkywbzxtdk", steering, 6), model).to_json()
    _same(got, _cli("steer", "--run", RUN, "--input", "tdkywbzxtdk", "--hook", "blocks.1.hook_resid_pre",
                    "--positive", str(tmp_path / "pos.txt"), "--negative", str(tmp_path / "neg.txt"),
                    "--coef", "4", "--max-new", "6"))
