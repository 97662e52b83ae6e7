"""Fixtures for the pretrained-model tests: ``no_network`` (any socket use fails the test)."""

from tests.pretrained.no_network import no_network  # noqa: F401  (a fixture, found by name)
