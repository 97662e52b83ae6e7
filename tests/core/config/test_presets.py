"""Shipped presets load, say only what differs (commented), and lookup finds user presets."""

from __future__ import annotations

import dataclasses
import random

import pytest
import yaml

from tui_lab.core.config.lab_config import SECTIONS, ConfigError, default_config, from_yaml
from tui_lab.core.config.presets import SHIPPED_DIR, list_presets, load_preset, resolve_preset
from tui_lab.core.tasks import make_task

SHIPPED = ("copy", "reverse", "sort", "addition", "char-lm", "seed-mini", "paper-base", "induction",
           "induction-1layer", "induction-mlp", "modular-addition", "modular-addition-classic", "mlm-char")


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "my-presets"
    folder.mkdir()
    monkeypatch.setenv("TFX_LAB_PRESETS", str(folder))
    return folder


def test_every_shipped_preset_is_present():
    assert {p.stem for p in SHIPPED_DIR.glob("*.yaml")} == set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_preset_loads(name):
    cfg = load_preset(name)
    assert cfg.name == name
    assert cfg.description and "\n" not in cfg.description
    assert cfg.source.endswith(f"{name}.yaml")


@pytest.mark.parametrize("name", SHIPPED)
def test_preset_file_states_only_changes_each_commented(name):
    path = SHIPPED_DIR / f"{name}.yaml"
    text = path.read_text()
    assert text.startswith("description:")
    data = yaml.safe_load(text)
    for section, values in data.items():
        if section == "description":
            continue
        base = SECTIONS[section]()  # the dataclass defaults
        for key, value in values.items():
            assert getattr(base, key) != value, f"{name}: {section}.{key} repeats the default"
    for line in text.splitlines():
        if line.startswith("  ") and ":" in line:  # a setting inside a section
            assert "#" in line, f"{name}: uncommented value: {line!r}"


@pytest.mark.parametrize("name", SHIPPED)
def test_preset_task_batches_fit_the_model(name):
    """The config's length check and the task's real sequences agree."""
    cfg = load_preset(name)
    task = make_task(cfg.task)
    batch = task.batch(random.Random(0), 64, cfg.model.arch)
    assert batch.tgt_in.shape[1] <= cfg.model.max_len
    if batch.src is not None:
        assert batch.src.shape[1] <= cfg.model.max_len
    assert max(task.vocab.encode(task.vocab.chars)) < len(task.vocab)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_saved_preset_reads_like_a_shipped_one(name):
    """What save-as writes (``to_yaml``): block style, one key a line, and it loads back equal."""
    cfg = load_preset(name)
    text = cfg.to_yaml()
    assert "{" not in text and "[" not in text, text
    assert from_yaml(text, source=cfg.source, name=cfg.name) == cfg


def test_a_user_preset_with_a_duplicate_key_is_listed_but_refused(user_dir):
    (user_dir / "twice.yaml").write_text("description: Twice.\nmodel:\n  d_model: 64\n  d_model: 32\n")
    listed = {i.name: i for i in list_presets()}
    assert "twice" in listed and listed["twice"].description == ""  # listing never raises
    with pytest.raises(ConfigError) as err:
        load_preset("twice")
    assert str(err.value).endswith("twice.yaml: model.d_model: duplicate key at line 4 (first at line 3)")
    assert err.value.field == "model.d_model"


def test_copy_preset_is_the_embedded_default():
    shipped = load_preset("copy")
    assert dataclasses.replace(shipped, source="<embedded copy>") == default_config()
    assert load_preset().task.name == "copy"
    assert load_preset(None).source.endswith("copy.yaml")


def test_preset_contents():
    assert load_preset("reverse").task.name == "reverse"
    assert load_preset("sort").task.name == "sort"
    add = load_preset("addition")
    assert add.task.name == "addition" and add.task.max_digits == 3
    lm = load_preset("char-lm")
    assert lm.model.arch == "decoder-only" and lm.task.name == "char-lm"
    assert 32 <= lm.task.block_size <= lm.model.max_len
    mini = load_preset("seed-mini").model
    assert (mini.d_model, mini.n_heads, mini.n_encoder_layers, mini.n_decoder_layers) == (
        128,
        8,
        3,
        3,
    )
    assert mini.d_ff == 512 and mini.arch == "encoder-decoder"
    base = load_preset("paper-base").model
    assert (base.d_model, base.n_heads, base.n_encoder_layers, base.n_decoder_layers) == (
        512,
        8,
        6,
        6,
    )
    assert (base.d_ff, base.norm, base.dropout, base.vocab_size) == (2048, "post", 0.1, 37000)
    assert base.tie_embeddings and base.share_embeddings
    for name in ("copy", "reverse", "sort", "addition"):
        assert load_preset(name).train.target_accuracy is not None, name
    assert load_preset("char-lm").train.max_seconds == 120


def test_list_presets_shows_shipped_then_user(user_dir):
    (user_dir / "mine.yaml").write_text("description: My own preset.\nmodel:\n  d_model: 32\n")
    (user_dir / "broken.yaml").write_text("model: [\n")
    (user_dir / "notes.txt").write_text("not a preset")
    infos = list_presets()
    names = [i.name for i in infos]
    assert names[: len(SHIPPED)] == sorted(SHIPPED, key=lambda n: f"{n}.yaml")  # by file name
    assert all(i.shipped for i in infos[: len(SHIPPED)])
    user = {i.name: i for i in infos if not i.shipped}
    assert set(user) == {"mine", "broken"}
    assert user["mine"].description == "My own preset."
    assert user["broken"].description == ""  # listed, not fatal
    assert all(i.description for i in infos if i.shipped)


def test_user_preset_by_name_and_shadowing(user_dir):
    (user_dir / "mine.yaml").write_text("description: Mine.\nmodel:\n  d_model: 32\n")
    assert load_preset("mine").model.d_model == 32
    (user_dir / "copy.yaml").write_text("description: My copy.\ntrain:\n  steps: 10\n")
    assert load_preset("copy").train.steps == 10  # the user's folder wins
    assert resolve_preset("copy") == user_dir / "copy.yaml"


def test_load_preset_by_path(tmp_path, user_dir):
    path = tmp_path / "elsewhere.yaml"
    path.write_text("description: A path.\ntask:\n  name: sort\n")
    cfg = load_preset(str(path))
    assert cfg.task.name == "sort" and cfg.name == "elsewhere"
    with pytest.raises(ConfigError, match="no such preset file"):
        load_preset(str(tmp_path / "absent.yaml"))


@pytest.mark.parametrize(
    "typo, right",
    [("cpy", "copy"), ("revrse", "reverse"), ("char_lm", "char-lm"), ("paperbase", "paper-base")],
)
def test_resolve_preset_suggests_close_names(user_dir, typo, right):
    with pytest.raises(ConfigError) as err:
        resolve_preset(typo)
    msg = str(err.value)
    assert "no such preset" in msg and f"did you mean '{right}'" in msg and "\n" not in msg


def test_unknown_preset_lists_known_names(user_dir):
    (user_dir / "mine.yaml").write_text("description: Mine.\n")
    with pytest.raises(ConfigError) as err:
        load_preset("zzzzzz")
    msg = str(err.value)
    assert "known:" in msg and "copy" in msg and "mine" in msg
