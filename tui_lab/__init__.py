"""tfx-lab: build, train and look inside small Transformer models from a terminal."""

__version__ = "0.1.0"
