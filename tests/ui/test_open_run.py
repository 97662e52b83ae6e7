"""Opening a run makes its config the lab's everywhere: by --run, by watch, and by o in the lab.

The run differs from the default preset in every field of the Build form, so a
pane still showing the default shows up as a wrong value.
"""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.ui.helpers import SIZE, plain, ready, wait_until
from tui_lab.core.config.lab_config import LabConfig, default_config
from tui_lab.ui.app import LabApp
from tui_lab.ui.panes.builder.config_form import ConfigForm
from tui_lab.ui.panes.builder.form_fields import FIELDS, format_value
from tui_lab.ui.widgets.status_bar import StatusBar

RUN_NAME = "odd-run"
# Every form field away from the default preset's value (checked below).
ODD = {
    "model.arch": "decoder-only",
    "model.d_model": 24,
    "model.n_heads": 3,
    "model.n_encoder_layers": 2,
    "model.n_decoder_layers": 2,
    "model.d_ff": 40,
    "model.dropout": 0.05,
    "model.norm": "post",
    "model.positional": "rope",
    "model.tie_embeddings": False,
    "model.activation": "relu2",
    "model.qk_norm": "head",
    "model.zero_init_proj": True,
    "model.logit_softcap": 15.0,
    "task.name": "reverse",
    "train.steps": 3,
    "train.batch_size": 8,
    "train.lr": 0.002,
    "train.optimizer": "muon",
    "train.muon_lr": 0.01,
    "train.warmup_steps": 2,
    "train.schedule": "linear",
    "train.max_seconds": 50.0,
    "train.decay_over": "time",
    "train.clip": 0.5,
    "train.label_smoothing": 0.05,
    "train.seed": 7,
    "train.device": "cpu",
}


def value(config: LabConfig, key: str) -> object:
    section, _, name = key.partition(".")
    return config.to_dict()[section][name]


@pytest.fixture(scope="module")
def odd_run_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A decoder-only reverse run of 3 steps, trained once for this module."""
    warnings.filterwarnings("ignore")
    from tui_lab.core.training.train import TrainingRun

    config = default_config().with_values(
        {**ODD, "train.eval_examples": 8, "train.threads": 1, "task.max_len": 5}
    )
    # Named as its folder: a run restored by the trainer is named after its preset.
    config = dataclasses.replace(config, name=RUN_NAME)
    out = tmp_path_factory.mktemp("odd") / RUN_NAME
    TrainingRun(config, out).run()
    return out


@pytest.fixture
def odd_run(odd_run_master: Path, lab_folders: Path) -> tuple[Path, LabConfig]:
    """A copy at ``runs/odd-run`` and the config the lab should show for it."""
    dest = lab_folders / "runs" / RUN_NAME
    shutil.copytree(odd_run_master, dest)
    from tui_lab.ui.run_config import read_run_config

    config = read_run_config(dest)
    assert config is not None and config.name == RUN_NAME
    default = default_config()
    # task.text is char-lm's own text file: a reverse run has none to differ by.
    assert set(ODD) == set(FIELDS) - {"task.text"}
    for key in ODD:  # the test means something only if every field differs
        assert value(config, key) == ODD[key] != value(default, key), key
    return Path("runs") / RUN_NAME, config


def lab(**kwargs: object) -> LabApp:
    app = LabApp(**kwargs)  # type: ignore[arg-type]
    app.animation_level = "none"
    return app


async def shows_everywhere(pilot, config: LabConfig) -> None:  # type: ignore[no-untyped-def]
    """Every pane shows ``config`` (the opened run's), none the default."""
    from tui_lab.core.model.params import parameter_report
    from tui_lab.ui.panes.attention.attention_pane import AttentionPane
    from tui_lab.ui.panes.decode.decode_pane import DecodePane
    from tui_lab.ui.panes.params.params_pane import ParamsPane
    from tui_lab.ui.panes.train.train_pane import TrainPane

    app = pilot.app
    assert isinstance(app, LabApp)
    params = app.query_one(ParamsPane)
    decode = app.query_one(DecodePane)
    await wait_until(
        pilot,
        lambda: params.config is not None
        and params.config.to_dict() == config.to_dict()
        and decode.examples,
        30,
        "Params and Decode to follow the run",
    )
    await pilot.pause()
    assert app.config.name == RUN_NAME and app.config.to_dict() == config.to_dict()
    # The status bar names the run.
    assert f"preset {RUN_NAME}" in plain(app.query_one(StatusBar))
    # The Build form: every field's value, as held and as drawn on screen.
    form = app.query_one(ConfigForm)
    for key in FIELDS:
        assert form.text(key) == format_value(value(config, key)), key
    await pilot.press("1")
    await pilot.pause()
    drawn = "\n".join(
        "".join(seg.text for seg in form.render_line(y)) for y in range(form.size.height)
    )
    assert "decoder-only" in drawn and "encoder-decoder" not in drawn
    assert "rope" in drawn and "reverse" in drawn and "[ ] off" in drawn
    assert f"Hyperparameters · {RUN_NAME}" in plain(app.query_one("#form-title"))
    # The YAML preview.
    yaml_text = plain(app.query_one("#yaml", Static))
    assert "arch: decoder-only" in yaml_text and "name: reverse" in yaml_text
    # Params: the run's model counted.
    vocab = len(app.counter.task_for(config.task).vocab)
    assert params.report.total == parameter_report(config.model, vocab).total
    assert RUN_NAME in plain(params.query_one("#params-title")) and "decoder-only" in plain(
        params.query_one("#params-title")
    )
    # Decode: examples of the run's task (reverse).
    assert decode.lab_task.solve("123") == "321"
    # Attention: before a decode, says what the run's model has.
    header = plain(app.query_one(AttentionPane).query_one("#attn-header"))
    assert RUN_NAME in header and "decoder-only" in header and "3 heads" in header
    # Train: the run's name and settings.
    train = app.query_one(TrainPane)
    assert train.config.to_dict() == config.to_dict()
    title = plain(train.query_one("#train-status"))
    # (an opened run's title also carries its tokens/s and MFU between the name and the folder)
    assert title.startswith(f"{RUN_NAME} · ") and f" · runs/{RUN_NAME}" in title and "copy" not in title


async def test_run_option_opens_the_run_everywhere(odd_run: tuple[Path, LabConfig]) -> None:
    """``tfx-lab --run DIR``: the lab starts on the run's settings and restores its model."""
    path, config = odd_run
    app = lab(run_dir=str(path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.active_pane == "build"
        assert app.query_one(ConfigForm).text("model.arch") == "decoder-only"  # first frame
        await ready(pilot)
        await shows_everywhere(pilot, config)
        await wait_until(pilot, lambda: app.current_run is not None, 30, "the model")


async def test_watch_opens_the_run_everywhere_on_the_train_pane(
    odd_run: tuple[Path, LabConfig],
) -> None:
    """``tfx-lab watch DIR``: the Train pane first, following the run; its settings everywhere."""
    path, config = odd_run
    app = lab(run_dir=str(path), follow=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.active_pane == "train"
        assert app.focused is not None and app.focused.id == "train-pane"
        await shows_everywhere(pilot, config)


async def test_o_in_the_lab_opens_the_run_everywhere(odd_run: tuple[Path, LabConfig]) -> None:
    """``o`` on the Train pane, then the run picked from the list."""
    from tui_lab.ui.screens.open_run import OpenRunScreen

    _, config = odd_run
    app = lab()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.config.name == "copy"
        await pilot.press("2", "o")
        await wait_until(pilot, lambda: isinstance(app.screen, OpenRunScreen), 10, "the dialog")
        await pilot.press("enter")
        await shows_everywhere(pilot, config)
