"""ModelValues names every ModelConfig field with the same type, so a family's
settings are checked against the config they become."""

import dataclasses
import typing

from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.config.sections import ModelConfig


def test_model_values_are_the_model_config_fields() -> None:
    fields = typing.get_type_hints(ModelConfig)
    values = typing.get_type_hints(ModelValues)
    assert values == {f.name: fields[f.name] for f in dataclasses.fields(ModelConfig)}
