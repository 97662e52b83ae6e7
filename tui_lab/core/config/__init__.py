"""A lab's settings: the config dataclasses and their sections, strict YAML, presets, diffs, errors."""
