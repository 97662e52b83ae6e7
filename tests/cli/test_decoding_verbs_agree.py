"""Each command prints what its verb returns: ``tfx-lab decode|eval|heads|ablate|hooks --json``
is the verb's ``run(request, model).to_json()`` (under the run's name where the command adds it)."""

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
    return dict(json.loads(proc.stdout))


def _same(verb_json: dict[str, Any], cli: dict[str, Any]) -> None:
    assert list(cli) == list(verb_json)  # the same keys in the same order
    assert json.dumps(verb_json) == json.dumps(cli)


@pytest.mark.parametrize("extra", [[], ["--attention", "--lens"], ["--temperature", "1.5", "--top-p", "0.9",
                                                                   "--seed", "3"]])
def test_decode(model: Any, extra: list[str]) -> None:
    from tui_lab.core.verbs import decode

    request = decode.Request("abcab", temperature=1.5 if extra[:1] == ["--temperature"] else 0.0,
                             top_p=0.9 if extra[:1] == ["--temperature"] else 1.0,
                             seed=3 if extra[:1] == ["--temperature"] else 0,
                             attention="--attention" in extra, lens="--lens" in extra)
    _same(decode.run(request, model).to_json(), _cli("decode", "--run", RUN, "--input", "abcab", *extra))


def test_decode_through_the_pane_is_the_verb(model: Any) -> None:
    """The Decode pane's ``decode_text`` gives what the verb gives for the same options."""
    from tui_lab.core.verbs import decode
    from tui_lab.ui.state.decoding import decode_text

    options = {"temperature": 1.0, "top_k": 3, "top_p": 0.8, "report_k": 5}
    pane = decode_text(model.model, model.task, "abcab", options)
    verb = decode.run(decode.Request("abcab", temperature=1.0, top_k=3, top_p=0.8), model).decoded
    assert pane.to_json() == verb.to_json()


def test_hooks(model: Any) -> None:
    from tui_lab.core.verbs import hooks

    cli = _cli("hooks", "--run", RUN, "--input", "abcab")
    assert cli.pop("run") == RUN
    _same(hooks.run(hooks.Request("abcab"), model).to_json(), cli)


def test_heads(model: Any) -> None:
    from tui_lab.core.verbs import heads

    cli = _cli("heads", "--run", RUN)
    assert cli.pop("run") == RUN
    _same(heads.run(heads.Request(), model).to_json(), cli)


def test_eval(learned_run: Path) -> None:
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs import evaluate

    got = evaluate.run(evaluate.Request(20, str(learned_run)), open_model(str(learned_run))).to_json()
    _same(got, _cli("eval", "--run", str(learned_run), "--n", "20"))


@pytest.mark.parametrize("extra", [["--head", "decoder.0.cross:1"], []])
def test_ablate(learned_run: Path, extra: list[str]) -> None:
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.verbs import ablate

    lab = open_model(str(learned_run))
    names = tuple(h for h in extra if h != "--head")
    got = ablate.run(ablate.Request(names, n=20), lab).to_json()  # no run_dir: nothing cached
    cli = _cli("ablate", "--run", str(learned_run), "--n", "20", *extra)
    if not names:
        assert cli.pop("cached") is False and got.pop("cached") is False
    _same(got, cli)


@pytest.mark.parametrize("preset", ["copy", None])
def test_params_of_a_preset(preset: str | None) -> None:
    from tui_lab.core.verbs import params

    args = ["--preset", preset] if preset else []
    _same(params.run(params.Request(preset)).to_json(), _cli("params", *args))


def test_params_of_a_model(model: Any) -> None:
    from tui_lab.core.verbs import params

    cli = _cli("params", "--model", RUN)
    _same(params.run(params.Request(), model).to_json(), cli)
