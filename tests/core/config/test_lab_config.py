"""Strict preset loading: every bad preset is one ConfigError line naming the file and the field."""

from __future__ import annotations

import pytest
import torch
import yaml

from tui_lab.core.config.lab_config import (
    ConfigError,
    LabConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    check_fits_in_memory,
    default_config,
    from_dict,
    from_yaml,
    load_file,
)


def load_text(tmp_path, text: str | bytes, name: str = "bad.yaml") -> LabConfig:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return load_file(path)


def refusal(tmp_path, text: str | bytes, name: str = "bad.yaml") -> str:
    """The one-line message a bad preset file gets."""
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, text, name)
    msg = str(err.value)
    assert "\n" not in msg, msg
    assert name in msg, msg  # names the file
    # The field and the reason travel as data too, and agree with the text.
    assert err.value.reason and msg.endswith(err.value.reason), (msg, err.value.reason)
    if err.value.field is not None:
        assert f" {err.value.field}" in msg, (msg, err.value.field)
    return msg


# -- malformed files ----------------------------------------------------------------


def test_yaml_syntax_error_gives_the_line(tmp_path):
    msg = refusal(tmp_path, "description: x\nmodel:\n  d_model: 64\n   n_heads: 4\n")
    assert "YAML syntax error" in msg and "line 4" in msg
    assert "line 2" in refusal(tmp_path, "model: [1, 2\n")
    assert "line 2" in refusal(tmp_path, "model:\n\td_model: 64\n")  # a tab indent


@pytest.mark.parametrize(
    "text, kind", [("- 1\n- 2\n", "list"), ("42\n", "int"), ("just words\n", "str")]
)
def test_top_level_must_be_a_mapping(tmp_path, text, kind):
    msg = refusal(tmp_path, text)
    assert "expected a mapping" in msg and kind in msg


@pytest.mark.parametrize("text", ["model: [1, 2]\n", "train: 5\n", "task: fast\n"])
def test_sections_must_be_mappings(tmp_path, text):
    section = text.split(":")[0]
    msg = refusal(tmp_path, text)
    assert f"{section}: expected a mapping" in msg


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path, text):
    assert "empty" in refusal(tmp_path, text)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x01\x02\x03PK\x03\x04",  # NUL bytes
        b"model:\n  d_model: \xff\xfe\n",  # invalid UTF-8
        bytes(range(256)) * 4,  # both
    ],
)
def test_binary_garbage(tmp_path, raw):
    assert "not a text file" in refusal(tmp_path, raw)


def test_deeply_nested_yaml(tmp_path):
    assert "nested" in refusal(tmp_path, "model: " + "[" * 5000 + "]" * 5000 + "\n")


def test_python_tags_are_not_executed(tmp_path):
    msg = refusal(tmp_path, "!!python/object/apply:os.system ['echo hi']\n")
    assert "YAML" in msg


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ConfigError, match="no such preset file"):
        load_file(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="folder"):
        load_file(tmp_path)


# -- keys -----------------------------------------------------------------------------


def test_unknown_key(tmp_path):
    msg = refusal(tmp_path, "model:\n  colour: blue\n")
    assert "model.colour" in msg and "unknown setting" in msg


@pytest.mark.parametrize(
    "section, wrong, right",
    [
        ("model", "d_modle", "d_model"),
        ("model", "n_head", "n_heads"),
        ("model", "dropuot", "dropout"),
        ("task", "max_lenn", "max_len"),
        ("train", "learning_rat", None),  # too far from any name: no wild guess needed
        ("train", "batchsize", "batch_size"),
        ("train", "warmup", "warmup_steps"),
    ],
)
def test_misspelt_key_suggests_the_right_name(tmp_path, section, wrong, right):
    msg = refusal(tmp_path, f"{section}:\n  {wrong}: 1\n")
    assert f"{section}.{wrong}" in msg
    if right:
        assert f"did you mean '{right}'" in msg


def test_misspelt_section(tmp_path):
    msg = refusal(tmp_path, "modle:\n  d_model: 64\n")
    assert "modle" in msg and "did you mean 'model'" in msg


# -- types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, field",
    [
        ("model:\n  d_model: '64'", "model.d_model"),  # string for int
        ("model:\n  d_model: sixty-four", "model.d_model"),
        ("model:\n  d_model: 64.0", "model.d_model"),  # float for int
        ("model:\n  n_heads: 4.5", "model.n_heads"),
        ("model:\n  d_model: true", "model.d_model"),  # bool for int
        ("train:\n  steps: yes", "train.steps"),  # YAML 1.1 bool
        ("model:\n  d_model:", "model.d_model"),  # null for int
        ("train:\n  lr: fast", "train.lr"),
        ("train:\n  lr: true", "train.lr"),
        ("train:\n  lr: .nan", "train.lr"),
        ("model:\n  tie_embeddings: 1", "model.tie_embeddings"),
        ("model:\n  arch: 5", "model.arch"),
        ("train:\n  betas: [0.9]", "train.betas"),
        ("description: [a, b]", "description"),
    ],
)
def test_wrong_types(tmp_path, line, field):
    msg = refusal(tmp_path, line + "\n")
    assert f"{field}:" in msg and "expected" in msg


def test_int_is_accepted_for_float(tmp_path):
    cfg = load_text(tmp_path, "train:\n  lr: 1\n  clip: 0\n  betas: [0, 0]\n", "ok.yaml")
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert cfg.train.clip == 0.0 and cfg.train.betas == (0.0, 0.0)
    cfg = load_text(tmp_path, "train:\n  target_accuracy: 1\n", "ok.yaml")
    assert cfg.train.target_accuracy == 1.0


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, field",
    [
        ("model:\n  d_model: -64", "model.d_model"),
        ("model:\n  d_model: 0", "model.d_model"),
        ("model:\n  n_heads: 0", "model.n_heads"),
        ("model:\n  d_ff: -1", "model.d_ff"),
        ("model:\n  n_encoder_layers: 0", "model.n_encoder_layers"),
        ("model:\n  n_decoder_layers: 0", "model.n_decoder_layers"),
        ("model:\n  max_len: 0", "model.max_len"),
        ("model:\n  dropout: 1.0", "model.dropout"),
        ("task:\n  max_len: 0", "task.max_len"),
        ("task:\n  min_len: 5\n  max_len: 3", "task.min_len"),
        ("task:\n  max_digits: 0", "task.max_digits"),
        ("task:\n  val_fraction: 0", "task.val_fraction"),
        ("train:\n  steps: 0", "train.steps"),
        ("train:\n  batch_size: -8", "train.batch_size"),
        ("train:\n  lr: 0", "train.lr"),
        ("train:\n  lr: -0.001", "train.lr"),
        ("train:\n  warmup_steps: -1", "train.warmup_steps"),
        ("train:\n  label_smoothing: 1", "train.label_smoothing"),
    ],
)
def test_negative_zero_and_out_of_range(tmp_path, line, field):
    assert f"{field}:" in refusal(tmp_path, line + "\n")


def test_decoder_only_may_have_no_encoder(tmp_path):
    cfg = load_text(tmp_path, "model:\n  arch: decoder-only\n  n_encoder_layers: 0\n", "ok.yaml")
    assert cfg.model.n_encoder_layers == 0 and cfg.model.arch == "decoder-only"


@pytest.mark.parametrize(
    "line",
    [
        "model:\n  d_model: 10000000",
        "model:\n  d_ff: 1000000000000",
        "model:\n  n_decoder_layers: 1000000000",
        "model:\n  vocab_size: 100000000000",
        "model:\n  max_len: 100000000000",
    ],
)
def test_absurd_sizes_load_but_do_not_fit_in_memory(tmp_path, line, monkeypatch):
    """Validity does not depend on the machine; the builder's memory check refuses from the
    config's arithmetic alone: no layer is built, not even on the meta device."""
    cfg = load_text(tmp_path, line + "\n", "big.yaml")
    built = []
    real_init = torch.nn.Module.__init__
    monkeypatch.setattr(torch.nn.Module, "__init__",
                        lambda self, *a, **k: built.append(type(self)) or real_init(self, *a, **k))
    with pytest.raises(ConfigError) as err:
        check_fits_in_memory(cfg.model)
    assert built == []
    msg = str(err.value)
    assert "\n" not in msg and "parameters" in msg and "GiB" in msg, msg
    assert err.value.field is None and msg == f"model: {err.value.reason}"


def test_memory_check_uses_this_machine(monkeypatch):
    import tui_lab.core.config.lab_config as config

    model = ModelConfig()
    need = model.estimated_params(11) * config.TRAIN_BYTES_PER_PARAM
    monkeypatch.setattr(config, "available_memory_bytes", lambda: need)
    check_fits_in_memory(model, vocab_size=11)  # exactly enough
    monkeypatch.setattr(config, "available_memory_bytes", lambda: need - 1)
    with pytest.raises(ConfigError, match="reduce d_model"):
        check_fits_in_memory(model, vocab_size=11)
    default_config()  # making a config never asks the machine


@pytest.mark.parametrize(
    "text, field, fragment",
    [
        ("model:\n  d_model: 66", "model.d_model", "divisible by n_heads"),
        (
            "model:\n  d_model: 12\n  n_heads: 4\n  positional: rope",
            "model.positional",
            "even head size",
        ),
        ("task:\n  name: char-lm", "task.name", "decoder-only"),
        ("model:\n  max_len: 8", "model.max_len", "too short"),
        (
            "model:\n  arch: decoder-only\n  max_len: 16\ntask:\n  max_len: 10",
            "model.max_len",
            "22 positions",
        ),
        ("task:\n  name: addition\n  max_digits: 40", "model.max_len", "too short"),
        (
            "model:\n  arch: decoder-only\ntask:\n  name: char-lm\n  block_size: 128",
            "model.max_len",
            "128",
        ),
    ],
)
def test_incompatible_combinations(tmp_path, text, field, fragment):
    msg = refusal(tmp_path, text + "\n")
    assert f"{field}:" in msg and fragment in msg


@pytest.mark.parametrize(
    "line, field, suggestion",
    [
        ("task:\n  name: copyy", "task.name", "copy"),
        ("task:\n  name: char_lm", "task.name", "char-lm"),
        ("task:\n  name: reversal", "task.name", "reverse"),
        ("model:\n  arch: decoder_only", "model.arch", "decoder-only"),
        ("model:\n  arch: encoder_decoder", "model.arch", "encoder-decoder"),
        ("model:\n  positional: rotary", "model.positional", None),
        ("model:\n  norm: Pre", "model.norm", "pre"),
        ("train:\n  schedule: cosin", "train.schedule", "cosine"),
        ("train:\n  device: gpu", "train.device", None),
    ],
)
def test_unknown_names_list_choices_and_suggest(tmp_path, line, field, suggestion):
    msg = refusal(tmp_path, line + "\n")
    assert f"{field}:" in msg and "is not one of" in msg
    if suggestion:
        assert f"did you mean '{suggestion}'" in msg


# -- programmatic use -----------------------------------------------------------------


def test_defaults_are_valid_and_default_config_is_copy():
    cfg = default_config()
    assert cfg.name == "copy" and cfg.task.name == "copy"
    assert cfg.train.target_accuracy == 0.995
    assert LabConfig().model == ModelConfig()
    ModelConfig(), TaskConfig(), TrainConfig()  # noqa: B018 - constructing validates


def test_with_values_revalidates():
    cfg = default_config()
    wider = cfg.with_values({"model.d_model": 128, "train.lr": 3e-4})
    assert wider.model.d_model == 128 and wider.train.lr == 3e-4
    assert wider.name == cfg.name and cfg.model.d_model == 64  # the original is unchanged
    with pytest.raises(ConfigError, match="model.d_model: 66 is not divisible"):
        cfg.with_values({"model.d_model": 66})
    with pytest.raises(ConfigError, match="did you mean 'd_model'"):
        cfg.with_values({"model.d_modle": 128})
    with pytest.raises(ConfigError, match="model.d_model: expected a whole number"):
        cfg.with_values({"model.d_model": "128"})
    with pytest.raises(ConfigError, match="not a setting"):
        cfg.with_values({"d_model": 128})
    with pytest.raises(ConfigError, match="char-lm needs model.arch"):
        cfg.with_values({"task.name": "char-lm"})
    both = cfg.with_values({"task.name": "char-lm", "model.arch": "decoder-only"})
    assert both.task.name == "char-lm"


def test_from_dict_prefixes_the_source():
    with pytest.raises(ConfigError) as err:
        from_dict({"model": {"d_model": 0}}, source="<form>")
    assert str(err.value).startswith("<form>: model.d_model")


def round_trip(cfg: LabConfig, full: bool) -> LabConfig:
    data = yaml.safe_load(cfg.to_yaml(full=full))
    return from_dict(data, source=cfg.source, name=cfg.name)


@pytest.mark.parametrize("full", [False, True])
def test_to_yaml_round_trips(full):
    cfg = default_config().with_values(
        {
            "model.arch": "decoder-only",
            "model.positional": "rope",
            "model.vocab_size": 100,
            "task.name": "addition",
            "train.betas": [0.8, 0.9],
            "train.eps": 1e-9,
            "train.max_seconds": 12.5,
            "train.target_accuracy": None,
        }
    )
    assert round_trip(cfg, full) == cfg
    assert round_trip(default_config(), full) == default_config()
    text = cfg.to_yaml(full=full)
    # Block style, as the shipped presets (an empty list, attention_windows: [], has no other form).
    assert "{" not in text and "[" not in text.replace(": []\n", ":\n"), text
    assert from_yaml(text, source=cfg.source, name=cfg.name) == cfg


def test_to_yaml_writes_one_key_a_line():
    text = default_config().with_values({"model.d_model": 128, "train.betas": [0.8, 0.9]}).to_yaml()
    assert text.splitlines() == [
        "description: Copy a digit string (the default preset).",
        "model:",
        "  d_model: 128",
        "  n_encoder_layers: 1",
        "  n_decoder_layers: 1",
        "train:",
        "  steps: 1000",
        "  lr: 0.003",
        "  warmup_steps: 50",
        "  betas:",
        "  - 0.8",
        "  - 0.9",
        "  target_accuracy: 0.995",
    ]


def test_diff_dict_holds_only_changes():
    cfg = default_config().with_values({"model.d_model": 128, "train.seed": 3})
    diff = cfg.diff_dict()
    assert diff["model"] == {"d_model": 128, "n_encoder_layers": 1, "n_decoder_layers": 1}
    assert diff["train"] == {"steps": 1000, "lr": 3e-3, "warmup_steps": 50, "seed": 3,
                             "target_accuracy": 0.995}
    assert "task" not in diff
    assert from_dict(diff, source=cfg.source, name=cfg.name) == cfg


# -- the error as data ----------------------------------------------------------------


@pytest.mark.parametrize(
    "values, field, reason",
    [
        ({"model.d_model": 30}, "model.d_model", "30 is not divisible by n_heads=4"),
        ({"model.d_modle": 64}, "model.d_modle", "unknown setting (did you mean 'd_model'?)"),
        ({"model.d_model": "64"}, "model.d_model", "expected a whole number, got '64'"),
        ({"train.lr": 0}, "train.lr", "must be a positive number, got 0.0"),
        ({"task.name": "char-lm"}, "task.name", "char-lm needs model.arch: decoder-only"),
        ({"model.max_len": 8}, "model.max_len",
         "8 is too short for this task (sequences need 11 positions)"),
        ({"train.betas": [0.9, "x"]}, "train.betas", "item 1: expected a number, got 'x'"),
        ({"d_model": 64}, "d_model", "not a setting (use model.*, task.* or train.*)"),
    ],
)
def test_config_error_carries_field_and_reason(values, field, reason):
    with pytest.raises(ConfigError) as err:
        default_config().with_values(values)
    assert (err.value.field, err.value.reason) == (field, reason)
    assert str(err.value).removeprefix("<embedded copy>: ").startswith(field)
    # A list item keeps its index in the text ("train.betas[1]: ...") and in the reason.
    assert str(err.value).endswith(reason.removeprefix("item 1: "))


def test_config_error_defaults_and_pickles():
    import pickle

    plain = ConfigError("x.yaml: no such preset file")
    assert (plain.field, plain.reason, str(plain)) == (None, None, "x.yaml: no such preset file")
    err = ConfigError("a.yaml: model.d_model: bad", field="model.d_model", reason="bad")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.field, back.reason) == (ConfigError, str(err), "model.d_model", "bad")


def test_file_errors_have_no_field(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_file(tmp_path / "absent.yaml")
    assert err.value.field is None and err.value.reason == "no such preset file"
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, "model:\n  d_model: 64\n   n_heads: 4\n")
    assert err.value.field is None and err.value.reason.startswith("YAML syntax error at line 3")


# -- duplicate keys ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, field, line, first",
    [
        ("model:\n  d_model: 64\n  n_heads: 4\n  d_model: 32\n", "model.d_model", 4, 2),
        ("train:\n  lr: 0.001\n  lr: 0.001\n", "train.lr", 3, 2),  # even the same value
        ("model:\n  d_model: 64\ntrain:\n  steps: 5\nmodel:\n  d_model: 32\n", "model", 5, 1),
        ("description: a\ndescription: b\n", "description", 2, 1),
        ("model: {d_model: 64, d_model: 32}\n", "model.d_model", 1, 1),
    ],
)
def test_duplicate_keys_are_refused_with_line_and_key(tmp_path, text, field, line, first):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, text, "dup.yaml")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path / 'dup.yaml'}: {field}: duplicate ")
    assert f"at line {line} (first at line {first})" in msg
    assert err.value.field == field and msg.endswith(err.value.reason)


def test_yaml_merge_keys_may_still_be_overridden():
    text = "base: &b {d_model: 32}\n"  # not a section: refused below, but not as a duplicate
    with pytest.raises(ConfigError, match="base: unknown section"):
        from_yaml(text, source="m.yaml")
    cfg = from_yaml("model:\n  <<: {d_model: 32, n_heads: 4}\n  d_model: 64\n", source="m.yaml")
    assert cfg.model.d_model == 64


def test_from_yaml_refuses_duplicates_like_load_file():
    with pytest.raises(ConfigError, match=r"^run/config.yaml: task.name: duplicate key at line 3"):
        from_yaml("task:\n  name: copy\n  name: sort\n", source="run/config.yaml")
