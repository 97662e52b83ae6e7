"""Strict preset loading: every bad preset is one ConfigError line naming the file and the field."""

from __future__ import annotations

import time

import pytest
import yaml

from tui_lab.core.config import (
    ConfigError,
    LabConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    default_config,
    from_dict,
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
    assert cfg.model.n_layers == cfg.model.n_decoder_layers


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
def test_absurd_sizes_are_refused_before_any_allocation(tmp_path, line):
    t0 = time.perf_counter()
    msg = refusal(tmp_path, line + "\n")
    assert time.perf_counter() - t0 < 0.5
    assert "parameters" in msg and "GiB" in msg


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


def test_diff_dict_holds_only_changes():
    cfg = default_config().with_values({"model.d_model": 128, "train.seed": 3})
    diff = cfg.diff_dict()
    assert diff["model"] == {"d_model": 128, "n_encoder_layers": 1, "n_decoder_layers": 1}
    assert diff["train"] == {"steps": 1000, "lr": 3e-3, "warmup_steps": 50, "seed": 3,
                             "target_accuracy": 0.995}
    assert "task" not in diff
    assert from_dict(diff, source=cfg.source, name=cfg.name) == cfg
