"""Bad preset files: one line and a non-zero exit on the command line; an inline message in the lab.

tests/core/test_config.py checks the loader's message for every class of bad
file; here each class goes through the three commands that take a preset
(``params``, ``train`` and the lab itself), in process and as the real
executable, and through the lab's Build pane.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.conftest import assert_one_line_error, assert_printable, cli, tfx


def _alias_bomb() -> str:
    """A 500-byte YAML 'billion laughs': 9**7 integers when expanded (PyYAML shares them)."""
    value = "&a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"
    for i in range(1, 8):
        value = f"&a{i} [{value}, " + ", ".join([f"*a{i - 1}"] * 8) + "]"
    return "model:\n  d_model: " + value + "\n"


# name -> (file content, fragments the one-line message must hold besides the file name)
BAD_PRESETS: dict[str, tuple[str | bytes, tuple[str, ...]]] = {
    "yaml-syntax": ("model:\n  d_model: 64\n   n_heads: 4\n", ("YAML syntax error", "line 3")),
    "unclosed-list": ("model: [1, 2\n", ("YAML syntax error", "line 2")),
    "top-level-list": ("- model\n- task\n", ("expected a mapping", "list")),
    "top-level-scalar": ("42\n", ("expected a mapping", "int")),
    "section-scalar": ("model: 5\n", ("model: expected a mapping",)),
    "empty": ("", ("empty",)),
    "comment-only": ("# nothing here\n", ("empty",)),
    "binary": (bytes(range(256)) * 8, ("not a text file",)),
    "nul-bytes": (b"model:\n  d_model: 64\x00\n", ("not a text file",)),
    "unknown-key": ("model:\n  colour: blue\n", ("model.colour", "unknown setting")),
    "misspelt-key": ("model:\n  d_modle: 64\n", ("model.d_modle", "did you mean 'd_model'")),
    "misspelt-section": ("trian:\n  steps: 5\n", ("trian", "did you mean 'train'")),
    "type-string-for-int": ("model:\n  d_model: '64'\n", ("model.d_model", "whole number", "'64'")),
    "type-float-for-int": ("train:\n  steps: 1.5\n", ("train.steps", "whole number", "1.5")),
    "type-int-for-bool": ("model:\n  tie_embeddings: 1\n", ("model.tie_embeddings", "true or false")),
    "type-bad-choice": ("model:\n  arch: gpt\n", ("model.arch", "'gpt'", "encoder-decoder, decoder-only")),
    "negative-size": ("model:\n  d_model: -64\n", ("model.d_model", "must be > 0", "-64")),
    "zero-heads": ("model:\n  n_heads: 0\n", ("model.n_heads", "must be > 0", "got 0")),
    "zero-steps": ("train:\n  steps: 0\n", ("train.steps", "must be > 0")),
    "negative-lr": ("train:\n  lr: -0.001\n", ("train.lr", "positive", "-0.001")),
    "duplicate-key": ("model:\n  d_model: 64\n  d_model: 32\n", ("model.d_model", "duplicate key", "line 3")),
    "duplicate-section": ("model:\n  d_model: 64\ntrain:\n  steps: 5\nmodel:\n  d_model: 32\n",
                          ("model: duplicate section", "line 5")),
    "heads-do-not-divide": ("model:\n  d_model: 66\n", ("model.d_model", "66", "n_heads=4")),
    "char-lm-needs-decoder": ("task:\n  name: char-lm\n", ("task.name", "decoder-only")),
    "max-len-too-short": ("model:\n  max_len: 8\n", ("model.max_len", "too short", "8")),
    "rope-odd-head": ("model:\n  d_model: 12\n  n_heads: 4\n  positional: rope\n", ("model.positional", "even")),
    # Found by this suite: the message repeated the whole expanded value (140 MB, 10 s).
    "alias-bomb": (_alias_bomb(), ("model.d_model", "whole number")),
    "escape-in-key": ('model:\n  "d_\\e[2Jmodel": 1\n', ("unknown setting", "\\x1b")),
    "escape-in-value": ('model:\n  arch: "\\e]0;title\\agpt"\n', ("model.arch", "is not one of")),
    "megabyte-value": ("model:\n  arch: " + "x" * 1_000_000 + "\n", ("model.arch", "encoder-decoder, decoder-only")),
}

# Valid presets on any machine, too big to train on this one: refused where a model is built.
TOO_BIG: dict[str, tuple[str, tuple[str, ...]]] = {
    "absurd-width": ("model:\n  d_model: 1000000\n  d_ff: 4000000\n", ("parameters", "GiB", "reduce d_model")),
    "absurd-depth": ("model:\n  n_decoder_layers: 1000000000\n", ("parameters", "GiB")),
    "absurd-vocab": ("model:\n  vocab_size: 100000000000\n", ("parameters", "GiB")),
}

MAX_MESSAGE = 600  # a message a person reads, whatever the file held


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "bad"
    folder.mkdir()
    paths = {}
    for name, (content, _) in {**BAD_PRESETS, **TOO_BIG}.items():
        path = folder / f"{name}.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        paths[name] = path
    return paths


@pytest.fixture
def nothing_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if a refused preset got as far as building a model or counting one."""
    import tui_lab.core.model.params
    import tui_lab.core.training.train
    import tui_lab.ui.app

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused preset reached model building or the lab")

    monkeypatch.setattr(tui_lab.core.training.train.TrainingRun, "__init__", forbidden)
    monkeypatch.setattr(tui_lab.core.model.params, "parameter_report", forbidden)
    monkeypatch.setattr(tui_lab.ui.app, "run_lab", forbidden)


@pytest.mark.parametrize("command", ["params", "train", "lab"])
@pytest.mark.parametrize("case", list(BAD_PRESETS))
def test_bad_preset_is_one_line_and_nothing_is_built(
    case: str, command: str, bad_files: dict[str, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], nothing_is_built: None,
) -> None:
    path = bad_files[case]
    out = tmp_path / "out"
    args = {"params": ["params", "--preset", path],
            "train": ["train", "--preset", path, "--out", out],
            "lab": ["--preset", path]}[command]
    result = cli(capsys, *args)
    message = assert_one_line_error(result.rc, result.err, str(path), *BAD_PRESETS[case][1])
    assert len(message) < MAX_MESSAGE, len(message)
    assert not out.exists()  # no run folder for a refused preset


def test_absurd_sizes_are_refused_by_train_before_any_layer_is_built(
    bad_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Too big for this machine: ``train`` refuses from the config's arithmetic, with one line
    and no run folder; not one layer is built (not even on the meta device)."""
    import torch

    built: list[type] = []
    real_init = torch.nn.Module.__init__
    monkeypatch.setattr(torch.nn.Module, "__init__",
                        lambda self, *a, **k: built.append(type(self)) or real_init(self, *a, **k))
    out = tmp_path / "out"
    for case, (_, fragments) in TOO_BIG.items():
        result = cli(capsys, "train", "--preset", bad_files[case], "--out", out)
        assert built == [], (case, built)
        assert result.rc == 2, case
        assert_one_line_error(result.rc, result.err, *fragments)
        assert not out.exists(), case


def test_duplicate_key_through_params(bad_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``tfx-lab params --preset FILE`` with ``d_model`` twice: one line naming the file, line and key."""
    result = cli(capsys, "params", "--preset", bad_files["duplicate-key"])
    assert result.out == ""
    message = assert_one_line_error(result.rc, result.err, str(bad_files["duplicate-key"]))
    assert message.endswith("model.d_model: duplicate key at line 3 (first at line 2)"), message


def test_real_executable_refuses_bad_presets(bad_files: dict[str, Path], tmp_path: Path) -> None:
    """The installed ``tfx-lab``: exit status, stderr, no traceback, no run folder (3 starts)."""
    out = tmp_path / "out"
    for args, case in (
        (("train", "--preset", bad_files["absurd-width"], "--out", out), "absurd-width"),
        (("params", "--preset", bad_files["binary"]), "binary"),
        (("--preset", bad_files["misspelt-key"]), "misspelt-key"),  # the lab: refused before the UI
    ):
        proc = tfx(*args)
        assert proc.returncode == 2, proc
        # A file that does not load is named; one too big for this machine names the model's size.
        expected = (str(bad_files[case]), *BAD_PRESETS[case][1]) if case in BAD_PRESETS else TOO_BIG[case][1]
        assert_one_line_error(proc.returncode, proc.stderr, *expected)
        assert proc.stdout == ""
    assert not out.exists()


def test_unknown_preset_name_suggests_one(capsys: pytest.CaptureFixture[str]) -> None:
    result = cli(capsys, "train", "--preset", "revrse")
    assert_one_line_error(result.rc, result.err, "revrse", "did you mean 'reverse'", "known:")


# --------------------------------------------------------------------------- the lab

LAB_BAD = ("yaml-syntax", "binary", "misspelt-key", "duplicate-key", "char-lm-needs-decoder", "empty")


def _put_user_presets(folder: Path, names: tuple[str, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        content = BAD_PRESETS[name][0]
        path = folder / f"zz-{name}.yaml"  # sorted after the good ones
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


async def _pick(pilot, name: str) -> None:  # type: ignore[no-untyped-def]
    """Pick the bad preset ``name`` in the Build pane; wait for the error that names it."""
    from tests.ui.helpers import wait_until
    from tui_lab.ui.widgets.preset_list import PresetList

    app = pilot.app
    presets = app.query_one(PresetList)
    names = [p.name for p in presets.presets]
    await pilot.press("1")
    presets.focus()
    presets.highlighted = names.index(name)
    await pilot.press("enter")
    await wait_until(
        pilot,
        lambda: any(f"{name}.yaml" in n.message for n in app._notifications if n.severity == "error"),
        10,
        f"the error naming {name}.yaml",
    )


def _build_pane_text(app) -> str:  # type: ignore[no-untyped-def]
    """Everything the Build pane shows in its own widgets (toasts are not part of it)."""
    from textual.widgets import Label, Static

    from tests.ui.helpers import plain
    from tui_lab.ui.panes.builder.build_pane import BuildPane
    from tui_lab.ui.panes.builder.config_form import ConfigForm

    pane = app.query_one(BuildPane)
    form = "\n".join(text for _, _, text in pane.query_one(ConfigForm).shown_lines())
    return "\n".join(plain(w) for w in pane.query(Static) if not isinstance(w, Label)) + "\n" + "\n".join(
        plain(w) for w in pane.query(Label)) + "\n" + form


async def test_lab_refuses_bad_presets_and_the_previous_model_stays_usable(
    in_tmp: Path, run_dir: Path,
) -> None:
    """Each bad file picked in the Build pane: an error naming it, no crash, config and model kept."""
    from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
    from tui_lab.ui.panes.builder.build_pane import BuildPane
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.train.train_pane import TrainPane

    _put_user_presets(in_tmp / "my-presets", LAB_BAD)
    app = tiny_app(run_dir=str(run_dir))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        train = app.query_one(TrainPane)
        decode = app.query_one(DecodePane)
        await wait_until(pilot, lambda: train.state == "ready" and decode.run is not None, 30, "the run")
        model_run, config = decode.run, app.config
        for name in LAB_BAD:
            app.clear_notifications()
            await _pick(pilot, f"zz-{name}")
            assert not app._exit and app._exception is None
            assert app.config == config and app.query_one(BuildPane).config == config, name
            assert decode.run is model_run and train.run is model_run, name
            errors = [n for n in app._notifications if n.severity == "error"]
            assert errors, f"no message for {name}"
            text = errors[-1].message
            assert f"zz-{name}.yaml" in text and "\n" not in text, text
            assert_printable(text)
        # The previous model still decodes.
        await pilot.press("3")
        field = decode.query_one("#decode-input")
        field.value = "1234"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert decode.result is not None and decode.result.input == "1234"


async def test_lab_shows_a_bad_preset_inline_on_the_build_pane(in_tmp: Path) -> None:
    from tests.ui.helpers import SIZE, ready, tiny_app

    _put_user_presets(in_tmp / "my-presets", ("misspelt-key",))
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await _pick(pilot, "zz-misspelt-key")
        app.clear_notifications()  # what stays once the toast has timed out
        await pilot.pause()
        shown = _build_pane_text(app)
        assert "d_modle" in shown and "did you mean" in shown, shown


async def test_lab_opened_on_a_bad_preset_uses_the_default_and_says_why(in_tmp: Path) -> None:
    """``LabApp(preset=bad)`` (the CLI refuses earlier, but the app must cope): default config, an error."""
    from tests.ui.helpers import SIZE, ready, tiny_app
    from tui_lab.core.config.lab_config import default_config

    bad = in_tmp / "bad.yaml"
    bad.write_text(BAD_PRESETS["misspelt-key"][0])
    app = tiny_app(preset=str(bad))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        messages = [n.message for n in app._notifications if n.severity == "error"]
        assert any("bad.yaml" in m and "did you mean 'd_model'" in m for m in messages), messages
        await ready(pilot)
        assert app.config == default_config()
        await pilot.press("5")
        await pilot.pause()
        assert not app._exit


async def test_lab_form_refuses_absurd_sizes_inline_at_once(in_tmp: Path) -> None:
    """Typing an absurd width: flagged inside the Build pane, the lab's config unchanged."""
    from textual import events

    from tests.ui.helpers import SIZE, edit_field, ready, tiny_app, wait_until
    from tui_lab.ui.panes.builder.config_form import ConfigForm

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        before = app.config
        await edit_field(pilot, "model.d_ff")
        await pilot.press("end", "ctrl+u")
        form = app.query_one(ConfigForm)
        form.post_message(events.Paste("4000000000"))
        await wait_until(pilot, lambda: "GiB" in _build_pane_text(app), 10, "the inline error")
        assert "GiB" in _build_pane_text(app)
        assert app.config == before
        await pilot.press("escape")
        await pilot.press("ctrl+r")  # revert: usable again
        await pilot.pause(0.2)
        assert not form.has_errors and app.config == before
