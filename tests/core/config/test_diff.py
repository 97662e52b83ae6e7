"""How a config differs from its preset, as the dotted settings legends show."""

from __future__ import annotations

from tests.conftest import tiny_config
from tui_lab.core.config.diff import (
    config_difference,
    default_settings,
    difference_label,
    flat_settings,
    format_value,
)
from tui_lab.core.config.lab_config import LabConfig


def test_flat_settings_name_every_setting_by_section():
    flat = flat_settings(tiny_config())
    assert flat["model.d_model"] == 32 and flat["task.name"] == "copy" and flat["train.steps"] == 30
    assert flat["train.betas"] == [0.9, 0.98]  # a tuple reads as the list a preset writes
    assert flat_settings(tiny_config().to_dict()) == flat
    assert set(default_settings()) == set(flat)  # every setting has a default


def test_only_what_differs_in_the_settings_order_and_never_bookkeeping():
    base = flat_settings(tiny_config())
    other = flat_settings(tiny_config(model={"norm": "post"}, train={"lr": 3e-3, "threads": 2,
                                                                      "checkpoint_seconds": 1.0}))
    diff = config_difference(other, base)
    expected = {"model.norm": "post", "train.lr": 3e-3}
    assert diff == expected and list(diff) == list(expected)  # settings' order, threads skipped
    assert difference_label(diff) == "model.norm=post train.lr=0.003"
    assert config_difference(base, base) == {} and difference_label({}) == ""


def test_equal_values_of_other_types_are_the_same_setting():
    base = {"train.lr": 3, "train.betas": (0.9, 0.98), "model.vocab_size": None}
    same = {"train.lr": 3.0, "train.betas": [0.9, 0.98], "model.vocab_size": None}
    assert config_difference(same, base) == {}
    assert config_difference({"model.new": 1}, {}) == {"model.new": 1}  # absent from base


def test_values_read_as_typed_in_a_preset():
    assert [format_value(v) for v in (None, True, False, 0.003, 2.0, 64, [0.9, 0.98], "post")] == [
        "null", "true", "false", "0.003", "2", "64", "0.9,0.98", "post"]


def test_against_the_defaults_a_preset_reads_as_what_it_sets():
    config: LabConfig = tiny_config()
    diff = config_difference(flat_settings(config), default_settings())
    assert diff["model.d_model"] == 32 and diff["task.max_len"] == 5 and "model.arch" not in diff
