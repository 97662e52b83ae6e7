"""Fixtures for the pretrained-model tests: ``no_network`` (any socket use fails the test),
and every matrix re-laid for decoding whatever its size (``relay_every_matrix``)."""

import pytest

from tests.hf_fixtures.no_network import no_network  # noqa: F401  (a fixture, found by name)
from tui_lab.core.pretrained import relayout as layout


@pytest.fixture(autouse=True)
def relay_every_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test models are small enough that ``layout`` would leave them as stored; with
    no size floor the reference tests check the re-laid weights against ``transformers``."""
    monkeypatch.setattr(layout, "MIN_ELEMENTS", 0)
